"""R3 when the caller's identity comes from outside the SDK's auth: the
example servers (on MCPServer and on FastMCP) behind an API key that an ASGI
middleware of their own checks (``--api-keys``), against a real sealer.

With nothing said about the principal, every caller was bound to one shared
principal: bob presented alice's round-2 state with his own key and booked
her seat on his card, and alice's own retry was then refused (issue 40,
finding 7). The package now refuses to install without a principal unless
the server has the SDK's own auth or the author opts into anonymous callers
(test_mcp_unit.py); the examples, behind API keys, bind each state to the
key's owner.

And R3 under the SDK's own auth when the token verifier names no subject
(issue 50): an MCPServer in process, behind the SDK's bearer auth, whose
tokens all name one OAuth client. Bound to the SDK's
``authenticated_principal``, which then falls back to that client id, bob
opened alice's state (the control shows it still would); the middleware
binds each such token to itself."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import authenticated_principal
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult
from pydantic import AnyHttpUrl

from mcp_sealer import SealerClient, grpc_client
from mcp_sealer.mcp import sealed_request_state

from .harness import Sealer
from .mcp_harness import (
    ALICE,
    BOB,
    CONFIRM,
    PAY,
    SEAT,
    SERVERS,
    Server,
    WireCaller,
    assert_refused,
    attempt,
    caller,
    logged,
    sealer_reasons,
    shared,
)

pytestmark = pytest.mark.integration

API_KEYS = f"alice={ALICE},bob={BOB}"
"""The --api-keys flag: each key's owner (sent as a bearer token, which the SDK never sees as one)."""

BOBS_CARD = {"payment": {"action": "accept", "content": {"card": "bob-card-1111"}}}


@pytest.fixture(scope="module", params=list(SERVERS))
def api_key_server(request: pytest.FixtureRequest, real_sealer: Sealer) -> Server:
    (s,) = shared(request, [(SERVERS[request.param], real_sealer.grpc_url, ("--api-keys", API_KEYS), 0)])
    return s


@pytest.mark.parametrize("kind", ["sdk-client", "wire"])
async def test_api_key_callers_are_their_own_principals(api_key_server: Server, real_sealer: Sealer, kind: str) -> None:
    s = api_key_server
    before = sealer_reasons(real_sealer)
    async with caller(kind) as c:
        r1 = await c.call(s.url, "book_seat", SEAT)
        r2 = await c.call(s.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state)
        assert r2.asks == ["payment"], r2
        out = await attempt(s, [c.call(s.url, "book_seat", SEAT, token=BOB, responses=BOBS_CARD, state=r2.state)])
        assert out.replies == [], f"bob completed alice's booking with her state: {out.replies}"
        out.refused_before_the_handler()
        await logged(real_sealer, before, "PRINCIPAL_MISMATCH")
        # Alice's own round still proceeds: bob's refused attempt spent nothing.
        r3 = await c.call(s.url, "book_seat", SEAT, responses=PAY, state=r2.state)
    assert r3.complete and r3.text == "booked book_seat 1A with card visa-4242", r3


# R3 under the SDK's own auth with a token verifier that names no subject
# (client-credentials tokens, many introspection setups): the SDK's
# authenticated_principal then falls back to the OAuth client id, which
# every user of that client shares. Bound to it, bob's retry opened alice's
# state (issue 50). The middleware binds such a caller to the hash of the
# token the SDK verified (from_access_token), never the client id alone.

CLIENT_ID = "shared-app"
ALICES_NOTE = "seat 1A held for alice"


class ClientCredentials:
    """The SDK's ``TokenVerifier`` over fixed bearer tokens of one OAuth client: no subject."""

    def __init__(self, *tokens: str) -> None:
        self._tokens = set(tokens)

    async def verify_token(self, token: str) -> AccessToken | None:
        return AccessToken(token=token, client_id=CLIENT_ID, scopes=[]) if token in self._tokens else None


def shared_client_server(sealer: SealerClient, calls: Counter[str], **options: Any) -> MCPServer:
    """An MCPServer with the SDK's own auth over ClientCredentials and the
    middleware installed with options: book_seat asks to confirm, then
    answers with the state it was given."""
    server = MCPServer(
        "shared-client",
        token_verifier=ClientCredentials(ALICE, BOB),
        auth=AuthSettings(issuer_url=AnyHttpUrl("http://127.0.0.1/"), resource_server_url=None),
    )

    @server.tool(structured_output=False)
    async def book_seat(seat: str, ctx: Context) -> str | InputRequiredResult:
        calls[ctx.request_state or "round 1"] += 1
        if ctx.request_state is None:
            confirm = ElicitRequest(params=ElicitRequestFormParams(message=f"Book {seat}?", requested_schema={"type": "object", "properties": {}}))
            return InputRequiredResult(input_requests={"confirm": confirm}, request_state=ALICES_NOTE)
        return f"booked: {ctx.request_state}"

    sealed_request_state(server, sealer, **options)
    return server


@asynccontextmanager
async def serving(server: MCPServer) -> AsyncIterator[str]:
    """Serves server's Streamable HTTP app (the SDK's bearer auth in front) on a loopback port; yields its URL."""
    sock = socket.create_server(("127.0.0.1", 0))
    app = server.streamable_http_app(stateless_http=True, json_response=True, host="127.0.0.1")
    web = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning"))
    task = asyncio.create_task(web.serve(sockets=[sock]))
    try:
        deadline = asyncio.get_running_loop().time() + 30.0  # generous: a loaded machine
        while not web.started:
            assert not task.done(), f"the server did not start: {task.exception() if not task.cancelled() else 'cancelled'}"
            assert asyncio.get_running_loop().time() < deadline, "the server did not start within 30 s"
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        web.should_exit = True
        await task
        sock.close()


async def test_one_oauth_client_users_are_their_own_principals(real_sealer: Sealer) -> None:
    calls: Counter[str] = Counter()
    before = sealer_reasons(real_sealer)
    async with grpc_client(real_sealer.grpc_url) as sealer, serving(shared_client_server(sealer, calls)) as url, WireCaller() as c:
        r1 = await c.call(url, "book_seat", SEAT, token=ALICE)
        assert r1.asks == ["confirm"], r1
        try:
            stolen = await c.call(url, "book_seat", SEAT, token=BOB, responses=CONFIRM, state=r1.state)
        except MCPError as e:
            assert_refused(e)
        else:
            raise AssertionError(f"bob, a user of alice's OAuth client, opened her state: {stolen}")
        await logged(real_sealer, before, "PRINCIPAL_MISMATCH")
        # Alice's own retry opens: bob's refused attempt spent nothing.
        r2 = await c.call(url, "book_seat", SEAT, token=ALICE, responses=CONFIRM, state=r1.state)
    assert r2.complete and r2.text == f"booked: {ALICES_NOTE}", r2
    assert calls == Counter({"round 1": 1, ALICES_NOTE: 1}), calls


async def test_one_oauth_client_control_client_id_binding(real_sealer: Sealer) -> None:
    """The control: the same server bound to the SDK's authenticated_principal
    (the middleware's default before issue 50) gives alice and bob one
    principal, and bob's retry completes alice's request with her state."""
    calls: Counter[str] = Counter()
    seen: dict[str, str | None] = {}

    def sdk_principal(ctx: ServerRequestContext[Any, Any]) -> str | None:
        token = get_access_token()
        assert token is not None and token.subject is None, token
        seen[token.token] = authenticated_principal(ctx)
        return seen[token.token]

    async with grpc_client(real_sealer.grpc_url) as sealer, serving(shared_client_server(sealer, calls, principal=sdk_principal)) as url, WireCaller() as c:
        r1 = await c.call(url, "book_seat", SEAT, token=ALICE)
        stolen = await c.call(url, "book_seat", SEAT, token=BOB, responses=CONFIRM, state=r1.state)
    assert seen[ALICE] == seen[BOB] == f'["{CLIENT_ID}",null,null]', seen
    assert stolen.complete and stolen.text == f"booked: {ALICES_NOTE}", stolen
    assert calls == Counter({"round 1": 1, ALICES_NOTE: 1}), calls
