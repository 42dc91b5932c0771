"""mcp_sealer_bin: the sealer's static binary for this platform, as a wheel.

    sealer --help                 # the binary, on PATH (a shim that execs it)
    python -m mcp_sealer_bin      # the same

For tests and notebooks, ``start()`` runs a sealer on free loopback ports
with its data in a temporary directory, and stops it with the process::

    from mcp_sealer_bin import start

    with start() as sealer:
        client = grpc_client(sealer.grpc_url)

Nothing is downloaded, ever: the binary is in the wheel.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Sealer", "binary", "main", "start"]

_NAME = "sealer.exe" if sys.platform == "win32" else "sealer"


def binary() -> str:
    """The path of the sealer binary this wheel holds."""
    path = Path(__file__).parent / "bin" / _NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path}: this mcp-sealer-bin wheel holds no sealer binary")
    return str(path)


def main() -> None:
    """Runs the sealer with this process's arguments (the ``sealer`` command)."""
    args = [binary(), *sys.argv[1:]]
    if sys.platform == "win32":  # no exec: wait, and pass the exit code on
        sys.exit(subprocess.call(args))  # noqa: S603
    os.execv(args[0], args)  # noqa: S606


@dataclass
class Sealer:
    """A sealer started by ``start()``: its addresses, its log lines, ``stop()``."""

    process: subprocess.Popen[str]
    grpc: str
    http: str
    data_dir: str
    lines: list[str] = field(default_factory=list)
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def grpc_url(self) -> str:
        """For ``grpc_client``: http://127.0.0.1:PORT."""
        return f"http://{self.grpc}"

    @property
    def rest_url(self) -> str:
        """For ``rest_client``: http://127.0.0.1:PORT."""
        return f"http://{self.http}"

    def stop(self) -> None:
        """Stops the sealer and removes a data directory ``start()`` made."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Sealer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start(*flags: str, data_dir: str | None = None, timeout: float = 15.0) -> Sealer:
    """Starts the sealer on free loopback ports (``--grpc-addr 127.0.0.1:0
    --http-addr 127.0.0.1:0``) with its key file and ledger in data_dir (a
    temporary directory, removed by ``stop()``, when None), plus any serve
    ``flags``; returns once it listens. It is stopped at exit at the latest."""
    tmp = tempfile.TemporaryDirectory(prefix="sealer-") if data_dir is None else None
    d = tmp.name if tmp is not None else str(data_dir)
    args = [binary(), "serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--data-dir", d]
    args += ["--log-format", "json", "--shutdown-delay", "0s", *flags]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # noqa: S603
    found: list[tuple[str, str]] = []
    ready = threading.Event()
    lines: list[str] = []

    def follow() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if not found:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and rec.get("msg") == "listening":
                    found.append((rec["grpc"], rec["http"]))
                    ready.set()
        ready.set()

    threading.Thread(target=follow, daemon=True).start()
    if not ready.wait(timeout) or not found:
        proc.kill()
        proc.wait(10)
        if tmp is not None:
            tmp.cleanup()
        raise RuntimeError("the sealer did not start:\n" + "\n".join(lines[-20:]))
    s = Sealer(proc, found[0][0], found[0][1], d, lines, tmp)
    atexit.register(s.stop)
    return s
