"""The same server as server.py on FastMCP 4.2 (``fastmcp``): the tools and the
prompt of the MCP conformance suite's input-required-result scenarios, the
two booking tools and the payment tool (mrtr_tools.py), served as stateless
Streamable HTTP (the 2026-07-28 wire, no sessions) at /mcp, every
requestState sealed and opened by a running sealer, the answer to a state
that opens once recorded for its retry.

FastMCP installs the SDK's ``RequestStateBoundary`` in its low-level server,
as ``MCPServer`` does; ``sealed_request_state`` puts the sealer in its place,
and the tools keep FastMCP's own idiom (return ``InputRequiredResult``, read
``ctx.request_state`` and ``ctx.input_responses`` on the retry).

    python fastmcp_server.py --addr 127.0.0.1:0 --sealer http://127.0.0.1:7443 [--rest] [--one-time]
                             [--no-record-outcomes] [--tokens alice=TOKEN_A,bob=TOKEN_B] [--calls] [--sdk-boundary]

With ``--tokens``, FastMCP's ``StaticTokenVerifier`` requires a bearer token
(through the SDK's auth context, which the sealer's default principal reads);
``--sdk-boundary`` leaves the SDK's boundary in place (no sealer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from fastmcp import Context, FastMCP
from fastmcp.server.auth.providers.jwt import StaticTokenVerifier
from mcp_sealer import SealerClient
from mcp_sealer.mcp import sealed_request_state
from starlette.types import ASGIApp

import mrtr_tools
from mrtr_tools import Reply, Round
from serving import counted, parse_args, principal_options, serve


def _round(ctx: Context) -> Round:
    """This round as the tools see it; the client capabilities come from the request's own _meta."""
    rc = ctx.request_context
    return Round(
        responses=ctx.input_responses or {},
        state=ctx.request_state,
        capabilities=mrtr_tools.capabilities_of(rc.meta if rc is not None else None),
    )


def _handler(name: str, fn: Callable[[Round], Reply]) -> Callable[[Context], Awaitable[Reply]]:
    async def handler(ctx: Context) -> Reply:
        counted(name)
        return fn(_round(ctx))

    return handler


def _booking(name: str) -> Callable[[str, Context], Awaitable[Reply]]:
    async def handler(seat: str, ctx: Context) -> Reply:
        counted(name)
        return mrtr_tools.book(name, seat, _round(ctx))

    return handler


async def _pay(payee: str, amount: int, ctx: Context) -> Reply:
    counted(mrtr_tools.PAY_TOOL)
    return mrtr_tools.pay(payee, amount, _round(ctx))


def build(
    sealer: SealerClient | None,
    *,
    one_time: bool = False,
    record_outcomes: bool = True,
    tokens: dict[str, str] | None = None,
    identity: dict[str, Any] | None = None,
) -> FastMCP:
    """The server: the conformance tools and prompt and the booking tools, every
    state sealed by sealer (by the SDK's own boundary when None); with tokens
    (token: principal), a bearer token required; identity says who the caller is
    (sealed_request_state's principal= or allow_anonymous=; nothing with tokens);
    record_outcomes False records no answers (a retry of a consumed state is refused)."""
    auth = None
    if tokens:
        auth = StaticTokenVerifier(tokens={token: {"client_id": name, "sub": name, "scopes": []} for token, name in tokens.items()})
    server = FastMCP("sealer-example-fastmcp-server", version="1.0.0", auth=auth)
    for name, (description, fn) in mrtr_tools.TOOLS.items():
        server.tool(_handler(name, fn), name=name, description=description, output_schema=None)
    for name, description in mrtr_tools.BOOKING_TOOLS.items():
        server.tool(_booking(name), name=name, description=description, output_schema=None)
    server.tool(_pay, name=mrtr_tools.PAY_TOOL, description=mrtr_tools.PAY_DESCRIPTION, output_schema=None)
    prompt = _handler(mrtr_tools.PROMPT, mrtr_tools.prompt)
    server.prompt(prompt, name=mrtr_tools.PROMPT, description=mrtr_tools.PROMPT_DESCRIPTION)
    if sealer is not None:
        sealed_request_state(server, sealer, one_time=one_time, record_outcomes=record_outcomes, **(identity or {}))
    return server


def main() -> None:
    args = parse_args("An MCP server (FastMCP) whose requestState a sealer seals.")

    def app(_host: str, sealer: SealerClient | None) -> ASGIApp:
        server = build(sealer, one_time=args.one_time, record_outcomes=args.record_outcomes, tokens=args.tokens, identity=principal_options(args))
        return server.http_app(path="/mcp", stateless_http=True, json_response=True)

    asyncio.run(serve(args, app))


if __name__ == "__main__":
    main()
