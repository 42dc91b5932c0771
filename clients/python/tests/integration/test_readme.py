"""Issue 42: the READMEs' Python servers work as written, their sealer
client built at module level before ``server.run(...)`` starts its loop
(before the fix the gRPC client failed every call "attached to a different
loop"), on MCPServer, the low-level Server and FastMCP, with either client."""

from __future__ import annotations

from pathlib import Path

import pytest

import mcp_sealer

from .. import readme_lines
from .harness import Sealer

SNIPPETS = [(str(p.relative_to(readme_lines.ROOT)), i, code) for p in readme_lines.READMES for i, code in enumerate(readme_lines.snippets(p))]


def test_every_server_kind_and_client_is_shown() -> None:
    text = "\n".join(code for _, _, code in SNIPPETS)
    for needed in ("MCPServer(", "Server(", "FastMCP(", "grpc_client(", "rest_client("):
        assert needed in text, f"no README snippet that runs as written uses {needed}"


@pytest.mark.parametrize(("readme", "index", "code"), SNIPPETS, ids=[f"{r}#{i}" for r, i, _ in SNIPPETS])
def test_snippet_runs_as_written(real_sealer: Sealer, readme: str, index: int, code: str) -> None:
    readme_lines.run_snippet(code, real_sealer.grpc, real_sealer.http, env={"PYTHONPATH": str(readme_lines.ROOT / "clients" / "python" / "src")})


# A server as issue 42 found it: the client built at module level, then
# server.run(...) starting its own event loop. Only names that existed
# before the fix (principal=, not allow_anonymous=).
MODULE_LEVEL = """
import os

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

from mcp_sealer import CLIENT
from mcp_sealer.mcp import sealed_request_state

server = MCPServer("booking")


@server.tool()
async def book(seat: str, ctx: Context) -> str | InputRequiredResult:
    if ctx.request_state is None:
        confirm = ElicitRequest(params=ElicitRequestFormParams(
            message=f"Book seat {seat}?",
            requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}}))
        return InputRequiredResult(input_requests={"confirm": confirm}, request_state=seat)
    return f"booked {ctx.request_state}"


sealer = CLIENT(os.environ["URL"])
sealed_request_state(server, sealer, principal=lambda ctx: "alice")

server.run("streamable-http", port=int(os.environ["PORT"]))
"""


@pytest.mark.parametrize("client", ["grpc_client", "rest_client"])
def test_module_level_client_in_server_run_loop(real_sealer: Sealer, client: str) -> None:
    """Issue 42: "module-level grpc_client + server.run failed with 'attached to
    a different loop'". The program runs the package this test imports (its
    source directory on PYTHONPATH), so that the code before the fix can be
    checked with the same test."""
    url = real_sealer.grpc_url if client == "grpc_client" else real_sealer.rest_url
    src = Path(mcp_sealer.__file__).resolve().parents[1]
    # COLUMNS: the SDK's log handler wraps its lines at the terminal's width.
    env = {"PYTHONPATH": str(src), "URL": url, "COLUMNS": "400"}
    try:
        readme_lines.run_snippet(MODULE_LEVEL.replace("CLIENT", client), real_sealer.grpc, real_sealer.http, env=env)
    except AssertionError as e:
        if "attached to a different loop" in " ".join(str(e).split()):
            pytest.fail(f"{client} built at module level failed in server.run's event loop: 'attached to a different loop'\n{e}")
        raise
