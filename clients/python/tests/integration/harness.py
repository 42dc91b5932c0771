"""The real things the integration tests drive: the sealer binary and the
example MCP servers, each a process on loopback ports of its own.

The sealer binary is SEALER_TEST_SEALER (the test command builds it), else
built here with go. A component that is missing fails the test under CI and
skips it elsewhere.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
EXAMPLES = ROOT / "examples" / "python"
SRC = ROOT / "clients" / "python" / "src"


def missing(why: str) -> None:
    """Fails under CI (a component the test command must provide is missing), else skips."""
    if os.environ.get("CI"):
        pytest.fail(f"missing in CI: {why}")
    pytest.skip(why)


_built: dict[str, str] = {}


def sealer_binary() -> str:
    path = os.environ.get("SEALER_TEST_SEALER")
    if path:
        if not os.access(path, os.X_OK):
            missing(f"SEALER_TEST_SEALER={path} is not an executable")
        return path
    if "sealer" not in _built:
        go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
        if go is None:
            missing("no sealer binary (SEALER_TEST_SEALER) and no go to build one")
            raise AssertionError("unreachable")
        out = os.path.join(tempfile.mkdtemp(prefix="sealer-bin-"), "sealer")
        subprocess.run([go, "build", "-o", out, "./cmd/sealer"], cwd=ROOT, check=True)  # noqa: S603
        _built["sealer"] = out
    return _built["sealer"]


@dataclass
class Proc:
    """A process started by a test, with everything it printed on stderr (or stdout)."""

    popen: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    @property
    def logs(self) -> str:
        return "\n".join(self.lines)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(timeout=10)


@dataclass
class Sealer(Proc):
    grpc: str = ""
    http: str = ""

    @property
    def grpc_url(self) -> str:
        return f"http://{self.grpc}"

    @property
    def rest_url(self) -> str:
        return f"http://{self.http}"


def _follow(proc: Proc, stream: object, found: threading.Event, match: re.Pattern[str] | None, sink: list[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        line = line.rstrip("\n")
        proc.lines.append(line)
        if match is not None and not found.is_set():
            m = match.search(line)
            if m:
                sink.append(m.group(1))
                found.set()
    found.set()


def start_sealer(data_dir: str, *flags: str, scheme: str = "http") -> Sealer:
    """Starts the sealer on loopback ports of its own, on the embedded ledger in data_dir."""
    args = [
        sealer_binary(),
        "serve",
        "--grpc-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
        "--data-dir",
        data_dir,
        "--log-format",
        "json",
        "--log-level",
        "debug",
        "--shutdown-delay",
        "0s",
        *flags,
    ]
    popen = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)  # noqa: S603
    s = Sealer(popen)
    found = threading.Event()
    addrs: list[str] = []

    def follow() -> None:
        assert popen.stderr is not None
        for line in popen.stderr:
            s.lines.append(line.rstrip("\n"))
            if not found.is_set():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("msg") == "listening":
                    addrs.extend([rec["grpc"], rec["http"]])
                    found.set()
        found.set()

    threading.Thread(target=follow, daemon=True).start()
    if not found.wait(15) or not addrs:
        s.stop()
        raise AssertionError(f"the sealer did not listen within 15 s:\n{s.logs}")
    s.grpc, s.http = addrs
    return s


@contextmanager
def sealer(*flags: str) -> Iterator[Sealer]:
    with tempfile.TemporaryDirectory(prefix="sealer-data-") as d:
        s = start_sealer(d, *flags)
        try:
            yield s
        finally:
            s.stop()


def python() -> str:
    """The interpreter of the test environment, which runs the example servers."""
    return os.environ.get("SEALER_TEST_PYTHON") or sys.executable


def start_server(script: str, sealer_url: str, *flags: str, env: dict[str, str] | None = None) -> tuple[Proc, str]:
    """Starts an example MCP server (examples/python/SCRIPT) against the sealer at sealer_url; returns it and its URL."""
    e = {**os.environ, "PYTHONPATH": str(SRC), **(env or {})}
    popen = subprocess.Popen(  # noqa: S603
        [python(), str(EXAMPLES / script), "--addr", "127.0.0.1:0", "--sealer", sealer_url, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=e,
    )
    p = Proc(popen)
    found = threading.Event()
    urls: list[str] = []
    assert popen.stdout is not None
    threading.Thread(target=_follow, args=(p, popen.stdout, found, re.compile(r"listening on (http://\S+/mcp)"), urls), daemon=True).start()
    deadline = time.monotonic() + 30
    while not found.wait(0.1):
        if time.monotonic() > deadline:
            break
    if not urls:
        p.stop()
        raise AssertionError(f"{script} did not listen within 30 s:\n{p.logs}")
    return p, urls[0]
