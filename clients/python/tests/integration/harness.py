"""The real things the integration tests drive: the sealer binary and the
example MCP servers, each a process on loopback ports of its own.

The sealer binary is SEALER_TEST_SEALER (the test command builds it), else
built here with go. A component that is missing fails the test under CI and
skips it elsewhere.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

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


def _await_line(proc: Proc, stream: IO[str], parse: Callable[[str], list[str] | None], what: str, timeout: float) -> list[str]:
    """Keeps every line proc writes to stream (proc.lines, read by a thread to
    the end) and returns what parse finds in the first line it accepts; fails
    the test, with the output, when none comes within timeout."""
    found: queue.Queue[list[str] | None] = queue.Queue()

    def follow() -> None:
        waiting = True
        for line in stream:
            proc.lines.append(line.rstrip("\n"))
            if waiting and (got := parse(line)) is not None:
                found.put(got)
                waiting = False
        found.put(None)

    threading.Thread(target=follow, daemon=True).start()
    try:
        got = found.get(timeout=timeout)
    except queue.Empty:
        got = None
    if got is None:
        proc.stop()
        raise AssertionError(f"{what} did not listen within {timeout:.0f} s:\n{proc.logs}")
    return got


def _listening(line: str) -> list[str] | None:
    """The sealer's addresses, from its JSON "listening" log line."""
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    return [rec["grpc"], rec["http"]] if isinstance(rec, dict) and rec.get("msg") == "listening" else None


def start_sealer(data_dir: str, *flags: str) -> Sealer:
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
    assert popen.stderr is not None
    s.grpc, s.http = _await_line(s, popen.stderr, _listening, "the sealer", 15)
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
    assert popen.stdout is not None
    url = re.compile(r"listening on (http://\S+/mcp)")
    (found,) = _await_line(p, popen.stdout, lambda line: [m.group(1)] if (m := url.search(line)) else None, script, 30)
    return p, found
