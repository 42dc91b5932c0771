"""The READMEs' Python servers, run as written: every ```python block that
follows the line ``<!-- test: runs as written -->`` in README.md (the
repository's) and clients/python/README.md is taken from the README text
itself, written to a file unchanged and run as a program (``python FILE``,
so its module-level client is built before any event loop runs), against a
real sealer; the SDK's client then drives two rounds of its ``book`` tool and
checks that the state opens for no other arguments.

    python readme_lines.py SEALER_BINARY [README ...]
    python readme_lines.py --wheel [README ...]

With ``--wheel`` the sealer is the one the mcp-sealer-bin wheel installed
(``mcp_sealer_bin.start()``): no Go, no source tree but the READMEs.

The test command runs it in a fresh environment where only the wheel is
installed (scripts/test.sh, python_package), and the integration tests
import it (tests/integration/test_readme.py). A snippet reads the sealer's
address from SEALER_URL (gRPC) or SEALER_REST_URL and its port from PORT, as
it says, with the README's defaults otherwise.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
READMES = (ROOT / "README.md", ROOT / "clients" / "python" / "README.md")
MARKER = "<!-- test: runs as written -->"
_BLOCK = re.compile(re.escape(MARKER) + r"\s*\n```python\n(.*?)\n```", re.S)


def snippets(readme: Path) -> list[str]:
    """The marked Python blocks of readme, as written."""
    return _BLOCK.findall(readme.read_text(encoding="utf-8"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_listening(proc: subprocess.Popen[str], port: int, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"the snippet exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"the snippet did not listen on {port} within {timeout:.0f} s")


async def two_rounds(url: str) -> None:
    """Round 1 asks; round 2 with the sealed state completes; other arguments are refused."""
    from mcp import Client
    from mcp.shared.exceptions import MCPError
    from mcp_types import InputRequiredResult

    async with Client(url, mode="2026-07-28") as client:
        first = await client.session.call_tool("book", {"seat": "12A"}, allow_input_required=True)
        assert isinstance(first, InputRequiredResult), first
        state = first.request_state
        assert state is not None and state != "12A" and state.startswith("A"), f"not a sealer state: {state!r}"
        answer = {"confirm": {"action": "accept", "content": {"ok": True}}}
        done = await client.session.call_tool("book", {"seat": "12A"}, input_responses=answer, request_state=state)
        assert "booked 12A" in str(done.content), done
        refusal = None
        try:
            await client.session.call_tool("book", {"seat": "1A"}, input_responses=answer, request_state=state)
        except MCPError as e:
            refusal = e
        assert refusal is not None and refusal.code == -32602, f"a state opened for other arguments: {refusal!r}"


def run_snippet(code: str, grpc_addr: str, http_addr: str, python: str = sys.executable, env: dict[str, str] | None = None) -> str:
    """Runs one snippet as a program against the sealer at the addresses,
    drives two rounds, stops it; returns what it printed."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="readme-snippet-") as d:
        path = os.path.join(d, "server.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(code + "\n")
        e = {**os.environ, **(env or {}), "SEALER_URL": f"http://{grpc_addr}", "SEALER_REST_URL": f"http://{http_addr}", "PORT": str(port)}
        with open(os.path.join(d, "out.log"), "w+", encoding="utf-8") as out:
            proc = subprocess.Popen([python, path], cwd=d, env=e, stdout=out, stderr=subprocess.STDOUT, text=True)  # noqa: S603
            try:
                _wait_listening(proc, port)
                asyncio.run(two_rounds(f"http://127.0.0.1:{port}/mcp"))
            except BaseException as err:
                out.seek(0)
                raise AssertionError(f"{err}\n--- the snippet printed:\n{out.read()[-4000:]}\n--- the snippet:\n{code}") from err
            finally:
                proc.kill()
                proc.wait(10)
            out.seek(0)
            return out.read()


def main(sealer_binary: str, readmes: list[str]) -> None:
    found = [(r, code) for r in (readmes or [str(p) for p in READMES]) for code in snippets(Path(r))]
    assert found, "no README snippet marked to run"
    if sealer_binary == "--wheel":
        from mcp_sealer_bin import start  # type: ignore[import-not-found]

        s = start()
    else:
        sys.path.insert(0, str(Path(__file__).parent / "integration"))
        os.environ["SEALER_TEST_SEALER"] = sealer_binary
        from harness import start_sealer

        s = start_sealer(tempfile.mkdtemp(prefix="sealer-data-"))
    try:
        for readme, code in found:
            t0 = time.monotonic()
            run_snippet(code, s.grpc, s.http)
            print(f"{Path(readme).relative_to(ROOT)}: a snippet ran as written, two rounds complete ({time.monotonic() - t0:.1f} s)")
    finally:
        s.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
