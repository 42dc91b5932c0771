"""R3 when the caller's identity comes from outside the SDK's auth: the
example servers (on MCPServer and on FastMCP) behind an API key that an ASGI
middleware of their own checks (``--api-keys``), against a real sealer.

With nothing said about the principal, every caller was bound to one shared
principal: bob presented alice's round-2 state with his own key and booked
her seat on his card, and alice's own retry was then refused (issue 40,
finding 7). The package now refuses to install without a principal unless
the server has the SDK's own auth or the author opts into anonymous callers
(test_mcp_unit.py); the examples, behind API keys, bind each state to the
key's owner."""

from __future__ import annotations

import pytest

from .harness import Sealer
from .mcp_harness import ALICE, BOB, CONFIRM, PAY, SEAT, SERVERS, Server, attempt, caller, logged, sealer_reasons, shared

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
