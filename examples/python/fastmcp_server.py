"""The same server as server.py on FastMCP 4.1 (``fastmcp``): the tools and the
prompt of the MCP conformance suite's input-required-result scenarios
(mrtr_tools.py), served as stateless Streamable HTTP (the 2026-07-28 wire, no
sessions) at /mcp, every requestState sealed and opened by a running sealer.

FastMCP installs the SDK's ``RequestStateBoundary`` in its low-level server,
as ``MCPServer`` does; ``sealed_request_state`` puts the sealer in its place,
and the tools keep FastMCP's own idiom (return ``InputRequiredResult``, read
``ctx.request_state`` and ``ctx.input_responses`` on the retry).

    python fastmcp_server.py --addr 127.0.0.1:0 --sealer http://127.0.0.1:7443 [--rest] [--one-time]
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from fastmcp import Context, FastMCP
from mcp_sealer import SealerClient
from mcp_sealer.mcp import sealed_request_state
from starlette.types import ASGIApp

import mrtr_tools
from mrtr_tools import Reply, Round
from serving import parse_args, serve


def _round(ctx: Context) -> Round:
    """This round as the tools see it; the client capabilities come from the request's own _meta."""
    rc = ctx.request_context
    return Round(
        responses=ctx.input_responses or {},
        state=ctx.request_state,
        capabilities=mrtr_tools.capabilities_of(rc.meta if rc is not None else None),
    )


def _handler(fn: Callable[[Round], Reply]) -> Callable[[Context], Awaitable[Reply]]:
    async def handler(ctx: Context) -> Reply:
        return fn(_round(ctx))

    return handler


def build(sealer: SealerClient, *, one_time: bool = False) -> FastMCP:
    """The server: the conformance tools and prompt, every state sealed by sealer."""
    server = FastMCP("sealer-example-fastmcp-server", version="1.0.0")
    for name, (description, fn) in mrtr_tools.TOOLS.items():
        server.tool(_handler(fn), name=name, description=description, output_schema=None)
    server.prompt(_handler(mrtr_tools.prompt), name=mrtr_tools.PROMPT, description=mrtr_tools.PROMPT_DESCRIPTION)
    sealed_request_state(server, sealer, one_time=one_time)
    return server


def main() -> None:
    args = parse_args("An MCP server (FastMCP) whose requestState a sealer seals.")

    def app(_host: str, sealer: SealerClient) -> ASGIApp:
        return build(sealer, one_time=args.one_time).http_app(path="/mcp", stateless_http=True, json_response=True)

    asyncio.run(serve(args, app))


if __name__ == "__main__":
    main()
