"""An MCP server on the official Python SDK's high-level ``MCPServer`` (``mcp``
2.3), serving stateless Streamable HTTP (the 2026-07-28 wire, no sessions) at
/mcp, whose every requestState a running sealer seals and opens.

It implements the tools and the prompt of the MCP conformance suite's
input-required-result scenarios, two booking tools with arguments and a
payment tool (mrtr_tools.py). The handlers keep the SDK's own multi-round-trip idiom:
they return ``InputRequiredResult(input_requests=..., request_state=
"<plaintext>")`` and read ``ctx.request_state`` and ``ctx.input_responses``
on the retry. One line, ``sealed_request_state``, puts the sealer in the
place of the SDK's ``RequestStateBoundary``: every state is sealed by the
sealer (bound to the principal, the request and the input keys its round
asked, as a round of one flow), a state the sealer refuses is answered
with -32602 before any handler runs, and the answer to a state that opens
once is recorded, so that its retry gets it again without a second run
(``--no-record-outcomes`` turns that off).

    python server.py --addr 127.0.0.1:0 --sealer http://127.0.0.1:7443 [--rest] [--one-time]
                     [--no-record-outcomes] [--tokens alice=TOKEN_A,bob=TOKEN_B] [--calls] [--sdk-boundary]

With ``--tokens`` the SDK's own auth (a ``TokenVerifier`` and
``AuthSettings``) requires a bearer token, and the SDK's
``authenticated_principal`` (the sealer's default principal) names its
owner. ``--sdk-boundary`` leaves the SDK's boundary in place (no sealer): the
control of the tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts import Prompt
from mcp_sealer import SealerClient
from mcp_sealer.mcp import sealed_request_state
from pydantic import AnyHttpUrl
from starlette.types import ASGIApp

import mrtr_tools
from mrtr_tools import Reply, Round
from serving import counted, parse_args, principal_options, serve


def _round(ctx: Context) -> Round:
    """This round as the tools see it; the client capabilities come from the request's own _meta."""
    params = ctx.request_context.params or {}
    return Round(
        responses=ctx.input_responses or {},
        state=ctx.request_state,
        capabilities=mrtr_tools.capabilities_of(params.get("_meta")),
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


class StaticTokens:
    """The SDK's ``TokenVerifier`` over fixed bearer tokens: each names its principal
    (the access token's client id and subject)."""

    def __init__(self, principals: dict[str, str]) -> None:
        self._principals = principals

    async def verify_token(self, token: str) -> AccessToken | None:
        name = self._principals.get(token)
        return None if name is None else AccessToken(token=token, client_id=name, subject=name, scopes=[])


def build(
    sealer: SealerClient | None,
    *,
    one_time: bool = False,
    record_outcomes: bool = True,
    tokens: dict[str, str] | None = None,
    identity: dict[str, Any] | None = None,
) -> MCPServer:
    """The server: the conformance tools and prompt and the booking tools, every
    state sealed by sealer (by the SDK's own boundary when None); with tokens
    (token: principal), a bearer token required; identity says who the caller is
    (sealed_request_state's principal= or allow_anonymous=; nothing with tokens);
    record_outcomes False records no answers (a retry of a consumed state is refused)."""
    # A resource server only: no authorization server's routes, no metadata.
    server: MCPServer = MCPServer(
        "sealer-example-mcp-server-py",
        version="1.0.0",
        log_level="WARNING",
        token_verifier=StaticTokens(tokens) if tokens else None,
        auth=AuthSettings(issuer_url=AnyHttpUrl("http://127.0.0.1/"), resource_server_url=None) if tokens else None,
    )
    for name, (description, fn) in mrtr_tools.TOOLS.items():
        server.add_tool(_handler(name, fn), name=name, description=description, structured_output=False)
    for name, description in mrtr_tools.BOOKING_TOOLS.items():
        server.add_tool(_booking(name), name=name, description=description, structured_output=False)
    server.add_tool(_pay, name=mrtr_tools.PAY_TOOL, description=mrtr_tools.PAY_DESCRIPTION, structured_output=False)
    prompt = _handler(mrtr_tools.PROMPT, mrtr_tools.prompt)
    server.add_prompt(Prompt.from_function(prompt, name=mrtr_tools.PROMPT, description=mrtr_tools.PROMPT_DESCRIPTION))
    if sealer is not None:
        sealed_request_state(server, sealer, one_time=one_time, record_outcomes=record_outcomes, **(identity or {}))
    return server


def main() -> None:
    args = parse_args("An MCP server (MCPServer) whose requestState a sealer seals.")

    def app(host: str, sealer: SealerClient | None) -> ASGIApp:
        server = build(sealer, one_time=args.one_time, record_outcomes=args.record_outcomes, tokens=args.tokens, identity=principal_options(args))
        return server.streamable_http_app(stateless_http=True, json_response=True, host=host)

    asyncio.run(serve(args, app))


if __name__ == "__main__":
    main()
