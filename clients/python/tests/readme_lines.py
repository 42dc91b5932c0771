"""The README's three lines, run as a user would: an MCPServer whose tool asks
for input, its requestState sealed by a real sealer (the binary given as the
only argument), driven in process by the SDK's own client. The test command
runs it in a fresh environment where only the wheel is installed."""

from __future__ import annotations

import asyncio
import sys
import tempfile

from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/integration")
from harness import start_sealer


def booking_server(sealer_url: str) -> MCPServer:
    server = MCPServer("booking")

    @server.tool()
    async def book(seat: str, ctx: Context) -> str | InputRequiredResult:
        if ctx.request_state is None:
            confirm = ElicitRequest(
                params=ElicitRequestFormParams(
                    message=f"Book seat {seat}?",
                    requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
                )
            )
            return InputRequiredResult(input_requests={"confirm": confirm}, request_state=f"asked:{seat}")
        return f"booked {seat} ({ctx.request_state})"

    # The README's three lines: this server has no authentication, and the
    # line refuses to guess who the caller is.
    from mcp_sealer import grpc_client
    from mcp_sealer.mcp import sealed_request_state

    try:
        sealed_request_state(server, grpc_client(sealer_url))
    except ValueError as e:
        if "allow_anonymous" not in str(e):
            raise
    else:
        raise AssertionError("installed on a server without auth, with no principal")
    # The README's choice for a server without any auth.
    sealed_request_state(server, grpc_client(sealer_url), allow_anonymous=True)
    return server


async def main(sealer_binary: str) -> None:
    import os

    os.environ["SEALER_TEST_SEALER"] = sealer_binary
    with tempfile.TemporaryDirectory() as d:
        s = start_sealer(d)
        try:
            async with Client(booking_server(s.grpc_url), mode="2026-07-28") as client:
                first = await client.session.call_tool("book", {"seat": "12A"}, allow_input_required=True)
                assert isinstance(first, InputRequiredResult), first
                state = first.request_state
                assert state is not None and not state.startswith("asked:") and state.startswith("Ag"), "not a sealer state"
                answer = {"confirm": {"action": "accept", "content": {"ok": True}}}
                done = await client.session.call_tool("book", {"seat": "12A"}, input_responses=answer, request_state=state)
                assert "booked 12A (asked:12A)" in str(done.content), done
                for bad in ({"seat": "1A"}, {"seat": "12A", "x": 1}):
                    refusal = None
                    try:
                        await client.session.call_tool("book", bad, input_responses=answer, request_state=state)
                    except MCPError as e:
                        refusal = e
                    if refusal is None or refusal.code != -32602 or refusal.message != "Invalid or expired requestState":
                        raise AssertionError(f"a state opened for other arguments {bad}: {refusal!r}")
        finally:
            s.stop()
    import mcp_sealer

    print(f"the README's three lines work against a real sealer (mcp_sealer from {mcp_sealer.__file__})")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
