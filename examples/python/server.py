"""An MCP server on the official Python SDK's high-level ``MCPServer`` (``mcp``
2.3), serving stateless Streamable HTTP (the 2026-07-28 wire, no sessions) at
/mcp, whose every requestState a running sealer seals and opens.

It implements the tools and the prompt of the MCP conformance suite's
input-required-result scenarios (mrtr_tools.py). The handlers keep the SDK's
own multi-round-trip idiom: they return ``InputRequiredResult(input_requests=
..., request_state="<plaintext>")`` and read ``ctx.request_state`` and
``ctx.input_responses`` on the retry. One line, ``sealed_request_state``,
puts the sealer in the place of the SDK's ``RequestStateBoundary``: every
state is sealed by the sealer (bound to the principal, the request and the
input keys its round asked, as a round of one flow), and a state the sealer
refuses is answered with -32602 before any handler runs.

    python server.py --addr 127.0.0.1:0 --sealer http://127.0.0.1:7443 [--rest] [--one-time]
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts import Prompt
from mcp_sealer import SealerClient
from mcp_sealer.mcp import sealed_request_state
from starlette.types import ASGIApp

import mrtr_tools
from mrtr_tools import Reply, Round
from serving import parse_args, serve


def _round(ctx: Context) -> Round:
    """This round as the tools see it; the client capabilities come from the request's own _meta."""
    params = ctx.request_context.params or {}
    return Round(
        responses=ctx.input_responses or {},
        state=ctx.request_state,
        capabilities=mrtr_tools.capabilities_of(params.get("_meta")),
    )


def _handler(fn: Callable[[Round], Reply]) -> Callable[[Context], Awaitable[Reply]]:
    async def handler(ctx: Context) -> Reply:
        return fn(_round(ctx))

    return handler


def build(sealer: SealerClient, *, one_time: bool = False) -> MCPServer:
    """The server: the conformance tools and prompt, every state sealed by sealer."""
    server: MCPServer = MCPServer("sealer-example-mcp-server-py", version="1.0.0", log_level="WARNING")
    for name, (description, fn) in mrtr_tools.TOOLS.items():
        server.add_tool(_handler(fn), name=name, description=description, structured_output=False)
    server.add_prompt(Prompt.from_function(_handler(mrtr_tools.prompt), name=mrtr_tools.PROMPT, description=mrtr_tools.PROMPT_DESCRIPTION))
    sealed_request_state(server, sealer, one_time=one_time)
    return server


def main() -> None:
    args = parse_args("An MCP server (MCPServer) whose requestState a sealer seals.")

    def app(host: str, sealer: SealerClient) -> ASGIApp:
        server = build(sealer, one_time=args.one_time)
        return server.streamable_http_app(stateless_http=True, json_response=True, host=host)

    asyncio.run(serve(args, app))


if __name__ == "__main__":
    main()
