"""R10, a fleet: two replicas of an example server (on MCPServer and on
FastMCP) behind one address, a round-robin forwarder that sends each POST to
the next replica (any round on any replica, as a plain load balancer does),
and one sealer. The rounds of one request move between the replicas and the
request completes: each replica opens the states the other sealed, because
the sealer holds the keys of the whole fleet.

The control: the same with two replicas on the SDK's default boundary
(``--sdk-boundary``), each sealing under a key of its own process. The round
that moves to the other replica is refused there (-32602), before its
handler runs; the same round sent back to the replica that sealed it
proceeds, so the state was good and only the move broke it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from mcp.shared.exceptions import MCPError

from .harness import Sealer
from .mcp_harness import CONFIRM, NO_SEALER, PAY, SEAT, SERVERS, TOKENS, Forwarder, Server, assert_refused, caller, shared

pytestmark = pytest.mark.integration


@dataclass
class Replicas:
    sealed: tuple[Server, Server]
    """Two replicas whose states one sealer seals."""
    sdk: tuple[Server, Server]
    """Two replicas on the SDK's own boundary (a key each)."""


@pytest.fixture(scope="module", params=list(SERVERS))
def replicas(request: pytest.FixtureRequest, real_sealer: Sealer) -> Replicas:
    # The servers of the attack tests are the first replica of each pair.
    script, auth = SERVERS[request.param], ("--tokens", TOKENS)
    sealed, sdk = (script, real_sealer.grpc_url, auth), (script, NO_SEALER, (*auth, "--sdk-boundary"))
    a, b, sa, sb = shared(request, [(*sealed, 0), (*sealed, 1), (*sdk, 0), (*sdk, 1)])
    return Replicas((a, b), (sa, sb))


@pytest.mark.parametrize("kind", ["sdk-client", "wire"])
async def test_rounds_move_between_replicas_and_complete(replicas: Replicas, kind: str) -> None:
    a, b = replicas.sealed
    before = [(await a.calls())["book_seat"], (await b.calls())["book_seat"]]
    with Forwarder([a.url, b.url]) as lb:
        async with caller(kind) as c:
            # Two requests of three rounds: the first is served A, B, A; the second B, A, B.
            for _ in range(2):
                r1 = await c.call(lb.url, "book_seat", SEAT)
                r2 = await c.call(lb.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state)
                r3 = await c.call(lb.url, "book_seat", SEAT, responses=PAY, state=r2.state)
                assert (r1.asks, r2.asks) == (["confirm"], ["payment"])
                assert r3.complete and r3.text == "booked book_seat 1A with card visa-4242"
    assert [i for i, method in lb.served if method == "tools/call"] == [0, 1, 0, 1, 0, 1]
    # Each replica's handler served three of the six rounds, two of its
    # rounds from states the other replica sealed.
    assert [(await a.calls())["book_seat"] - before[0], (await b.calls())["book_seat"] - before[1]] == [3, 3]


@pytest.mark.parametrize("kind", ["sdk-client", "wire"])
async def test_control_sdk_boundary_refuses_a_round_that_moves(replicas: Replicas, kind: str) -> None:
    sa, sb = replicas.sdk
    with Forwarder([sa.url, sb.url]) as lb:
        async with caller(kind) as c:
            r1 = await c.call(lb.url, "book_seat", SEAT)
            assert r1.state and r1.asks == ["confirm"]
            before = await sb.handler_calls()
            with pytest.raises(MCPError) as e:
                await c.call(lb.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state)
            assert_refused(e.value)
            assert await sb.handler_calls() == before, "B's handler ran on a state it cannot open"
            # Back on the replica that sealed it, the same round proceeds.
            r2 = await c.call(sa.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state)
            assert r2.asks == ["payment"]
    assert [i for i, method in lb.served if method == "tools/call"] == [0, 1]
