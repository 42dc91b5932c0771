"""The attacks on requestState at the MCP level, against the real example
servers (examples/python, on MCPServer and on FastMCP) and a real sealer:
through the SDK's own client (``mcp.Client``, rounds driven by hand with
``ClientSession.call_tool``) and over the raw wire (JSON-RPC POSTs with
httpx).

Each attack starts an honest booking (``book_seat``: confirm, then a card,
then booked) as alice, then sends what an attacker would. Against the server
whose states the sealer seals (``sealed_request_state``) every attack is
refused with the SDK's own refusal (-32602 "Invalid or expired
requestState", ``data.reason`` ``invalid_request_state``) before any handler
runs: the server's handler count (``GET /calls``) does not move, and the
sealer logged the reason that refused it. Where the attack leaves the honest
user a round to send, that round still completes: a refused attack burns
nothing.

Beside each, its control: the same attack against the same server with the
SDK's default boundary (``--sdk-boundary``: ``RequestStateBoundary`` under a
key of the process). The SDK refuses another principal (it binds the
authenticated principal), other arguments, another tool and a tampered
state: there the control shows both refuse. It lets through a state used
twice, a rewind to an earlier round, 32 parallel retries of one round, and
answers under other keys than the round asked (an extra, a missing, a
differently-cased key): there the control shows the handler running on it
(a second booking, a fork of the request).

A round resent as it was (a state used twice, a rewind, parallel retries)
is what an honest client sends when an answer is lost. With answers
recorded (the middleware's default, README "Recorded outcomes") it gets the
answer its round got first, and no handler runs: no second booking, no fork.
With ``--no-record-outcomes`` it is refused ALREADY_CONSUMED, before any
handler runs.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
from mcp.shared.exceptions import MCPError

from .harness import Sealer
from .mcp_harness import (
    BOB,
    CONFIRM,
    INVALID_PARAMS,
    NO_SEALER,
    PAY,
    SEAT,
    SERVERS,
    TOKENS,
    Caller,
    Outcome,
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

CALLERS = ("sdk-client", "wire")


@dataclass
class Servers:
    sealed: Server
    """States sealed by the sealer (flows, latest round only: the default)."""
    one_time: Server
    """The same with --one-time: every state opens at most once."""
    switched_off: Server
    """The sealed server with --no-record-outcomes: a state consumed is refused."""
    one_time_switched_off: Server
    """The same with --one-time."""
    sdk: Server
    """The control: the SDK's own boundary, no sealer."""


@pytest.fixture(scope="module", params=list(SERVERS))
def servers(request: pytest.FixtureRequest, real_sealer: Sealer) -> Servers:
    script = SERVERS[request.param]
    auth = ("--tokens", TOKENS)
    specs = [
        (script, real_sealer.grpc_url, auth, 0),
        (script, real_sealer.grpc_url, (*auth, "--one-time"), 0),
        (script, real_sealer.grpc_url, (*auth, "--no-record-outcomes"), 0),
        (script, real_sealer.grpc_url, (*auth, "--one-time", "--no-record-outcomes"), 0),
        (script, NO_SEALER, (*auth, "--sdk-boundary"), 0),
    ]
    return Servers(*shared(request, specs))


# The attacks. Each sends its honest rounds first, then the attack's
# requests inside attempt(), which counts the handler calls they cost.


async def another_principal(c: Caller, s: Server) -> Outcome:
    """R3: alice's state presented with bob's bearer token."""
    r1 = await c.call(s.url, "book_seat", SEAT)
    out = await attempt(s, [c.call(s.url, "book_seat", SEAT, token=BOB, responses=CONFIRM, state=r1.state)])
    out.then = await c.call(s.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state)
    return out


async def other_arguments(c: Caller, s: Server) -> Outcome:
    """R5: the state of seat 1A presented on a booking of seat 9Z."""
    r1 = await c.call(s.url, "book_seat", SEAT)
    out = await attempt(s, [c.call(s.url, "book_seat", {"seat": "9Z"}, responses=CONFIRM, state=r1.state)])
    out.then = await c.call(s.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state)
    return out


async def another_tool(c: Caller, s: Server) -> Outcome:
    """R5: book_seat's state presented to book_table, a tool of the same shape."""
    r1 = await c.call(s.url, "book_seat", SEAT)
    out = await attempt(s, [c.call(s.url, "book_table", SEAT, responses=CONFIRM, state=r1.state)])
    out.then = await c.call(s.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state)
    return out


def tampered(change: Callable[[str], object]) -> Callable[[Caller, Server], Awaitable[Outcome]]:
    """R1, R2: the state changed by change before it is echoed."""

    async def attack(c: Caller, s: Server) -> Outcome:
        r1 = await c.call(s.url, "book_seat", SEAT)
        assert r1.state
        out = await attempt(s, [c.call(s.url, "book_seat", SEAT, responses=CONFIRM, state=change(r1.state))])
        out.then = await c.call(s.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state)
        return out

    return attack


def _flip(state: str) -> str:
    i = len(state) // 2
    return state[:i] + ("B" if state[i] == "A" else "A") + state[i + 1 :]


async def rewind(c: Caller, s: Server) -> Outcome:
    """After round 2, round 1's state again: the request rewound (a fork of it)."""
    r1 = await c.call(s.url, "book_seat", SEAT)
    r2 = await c.call(s.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state)
    out = await attempt(s, [c.call(s.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state)])
    out.original = r2
    out.then = await c.call(s.url, "book_seat", SEAT, responses=PAY, state=r2.state)
    assert out.then.complete
    return out


async def used_twice(c: Caller, s: Server) -> Outcome:
    """R6: the last round's state, which booked the seat, sent again."""
    r1 = await c.call(s.url, "book_seat", SEAT)
    r2 = await c.call(s.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state)
    r3 = await c.call(s.url, "book_seat", SEAT, responses=PAY, state=r2.state)
    assert r3.complete, r3
    out = await attempt(s, [c.call(s.url, "book_seat", SEAT, responses=PAY, state=r2.state)])
    out.original = r3
    return out


def answered(responses: dict[str, object] | None) -> Callable[[Caller, Server], Awaitable[Outcome]]:
    """Round 1 asked for ``confirm``; the retry answers responses instead."""

    async def attack(c: Caller, s: Server) -> Outcome:
        r1 = await c.call(s.url, "book_seat", SEAT)
        assert r1.asks == ["confirm"], r1
        out = await attempt(s, [c.call(s.url, "book_seat", SEAT, responses=responses, state=r1.state)])
        out.then = await c.call(s.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state)
        return out

    return attack


@dataclass(frozen=True)
class Attack:
    run: Callable[[Caller, Server], Awaitable[Outcome]]
    reason: str | None
    """The sealer's reason for refusing it (None: the middleware refuses it without asking the sealer)."""
    sdk: str
    """What the SDK's boundary does with it: "refused", or the resultType of the handler's reply when it lets it through."""
    one_time: bool = False
    """Sent to the --one-time server."""
    wire_only: bool = False
    """The SDK's client cannot send it."""
    replayed: bool = False
    """A round resent as it was: answered with its recorded answer where answers
    are recorded (the default), refused (reason) with --no-record-outcomes."""


ATTACKS = {
    "another_principal": Attack(another_principal, "PRINCIPAL_MISMATCH", "refused"),
    "other_arguments": Attack(other_arguments, "REQUEST_MISMATCH", "refused"),
    "another_tool": Attack(another_tool, "REQUEST_MISMATCH", "refused"),
    "tampered_suffix": Attack(tampered(lambda s: s + "-TAMPERED"), "INVALID_STATE", "refused"),
    "tampered_flipped": Attack(tampered(_flip), "INVALID_STATE", "refused"),
    "tampered_truncated": Attack(tampered(lambda s: s[:-1]), "INVALID_STATE", "refused"),
    "tampered_not_a_string": Attack(tampered(lambda s: [s]), None, "refused", wire_only=True),
    # Sent twice, the booking is made twice under the SDK's boundary. The
    # default (flows, latest round only) answers it as --one-time does: the
    # booking's own answer again, or with the switch off a refusal.
    "one_time_used_twice": Attack(used_twice, "ALREADY_CONSUMED", "complete", one_time=True, replayed=True),
    "last_round_used_twice": Attack(used_twice, "ALREADY_CONSUMED", "complete", replayed=True),
    # Rewound, round 2 is answered again: the request forks.
    "rewind_to_round_1": Attack(rewind, "ALREADY_CONSUMED", "input_required", replayed=True),
    "extra_input_key": Attack(answered({**CONFIRM, **PAY}), "INPUT_MISMATCH", "input_required"),
    "missing_input_key": Attack(answered(None), "INPUT_MISMATCH", "input_required"),
    "cased_input_key": Attack(answered({"Confirm": CONFIRM["confirm"]}), "INPUT_MISMATCH", "input_required"),
}

CASES = [pytest.param(name, kind, id=f"{name}-{kind}") for name, a in ATTACKS.items() for kind in CALLERS if not (a.wire_only and kind != "wire")]


@pytest.mark.parametrize("kind", CALLERS)
async def test_honest_booking_completes(servers: Servers, kind: str) -> None:
    """The baseline: three rounds complete on every server, one handler call each."""
    for s in (servers.sealed, servers.one_time, servers.sdk):
        async with caller(kind) as c:
            before = await s.handler_calls()
            r1 = await c.call(s.url, "book_seat", SEAT)
            r2 = await c.call(s.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state)
            r3 = await c.call(s.url, "book_seat", SEAT, responses=PAY, state=r2.state)
        assert (r1.asks, r2.asks) == (["confirm"], ["payment"])
        assert r1.state and r2.state and r1.state != r2.state
        assert r3.complete and r3.text == "booked book_seat 1A with card visa-4242"
        assert await s.handler_calls() - before == 3


def target(servers: Servers, a: Attack) -> Server:
    """The server an attack is refused by: a resent round where no answers are recorded."""
    if a.replayed:
        return servers.one_time_switched_off if a.one_time else servers.switched_off
    return servers.one_time if a.one_time else servers.sealed


@pytest.mark.parametrize(("attack", "kind"), CASES)
async def test_attack_refused_before_the_handler(servers: Servers, real_sealer: Sealer, attack: str, kind: str) -> None:
    a = ATTACKS[attack]
    before = sealer_reasons(real_sealer)
    async with caller(kind) as c:
        out = await a.run(c, target(servers, a))
    out.refused_before_the_handler()
    if a.reason is not None:
        await logged(real_sealer, before, a.reason)
    if out.then is not None:
        # The honest user's own round proceeds: the refused attack consumed nothing.
        assert out.then.asks == ["payment"] or out.then.complete, out.then


REPLAYED = [pytest.param(name, kind, id=f"{name}-{kind}") for name, a in ATTACKS.items() for kind in CALLERS if a.replayed]


@pytest.mark.parametrize(("attack", "kind"), REPLAYED)
async def test_round_resent_gets_its_answer_again(servers: Servers, real_sealer: Sealer, attack: str, kind: str) -> None:
    a = ATTACKS[attack]
    before = sealer_reasons(real_sealer)
    async with caller(kind) as c:
        out = await a.run(c, servers.one_time if a.one_time else servers.sealed)
    out.replayed()
    assert sealer_reasons(real_sealer) - before == Counter(), "the sealer refused a call"
    if out.then is not None:
        assert out.then.complete, out.then


@pytest.mark.parametrize(("attack", "kind"), CASES)
async def test_attack_control_sdk_boundary(servers: Servers, attack: str, kind: str) -> None:
    a = ATTACKS[attack]
    async with caller(kind) as c:
        out = await a.run(c, servers.sdk)
    if a.sdk == "refused":
        # The SDK's boundary stops this one too: both refuse, before the handler.
        out.refused_before_the_handler()
    else:
        # The SDK's boundary lets it through: the handler runs on it.
        out.proceeded(1)
        assert out.replies[0].result_type == a.sdk, out.replies[0]


RUNS, RETRIES = 20, 32


async def parallel_retries(s: Server, runs: int) -> list[Outcome]:
    """runs times: an honest round 1, then RETRIES retries of round 2 at once, all with its state."""
    outcomes = []
    async with WireCaller() as c:
        for _ in range(runs):
            r1 = await c.call(s.url, "book_seat", SEAT)
            out = await attempt(s, [c.call(s.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state) for _ in range(RETRIES)])
            if out.replies and all(r == out.replies[0] for r in out.replies):
                # The one that proceeded (whose answer any other got again)
                # is the request's only continuation: it books.
                out.then = await c.call(s.url, "book_seat", SEAT, responses=PAY, state=out.replies[0].state)
                assert out.then.complete, out.then
            outcomes.append(out)
    return outcomes


async def test_parallel_retries_one_runs_all_get_its_answer(servers: Servers, real_sealer: Sealer) -> None:
    before = sealer_reasons(real_sealer)
    for out in await parallel_retries(servers.sealed, RUNS):
        assert out.handler_calls == 1, f"{out.handler_calls} of {RETRIES} parallel retries ran the handler"
        assert out.refusals == [], [e.error for e in out.refusals]
        assert len(out.replies) == RETRIES and len(set(map(repr, out.replies))) == 1, out.replies
        assert out.then is not None
    assert sealer_reasons(real_sealer) - before == Counter(), "the sealer refused a call"


async def test_parallel_retries_at_most_one_proceeds(servers: Servers, real_sealer: Sealer) -> None:
    """With the switch off: one proceeds, every other is refused."""
    before = sealer_reasons(real_sealer)
    for out in await parallel_retries(servers.switched_off, RUNS):
        assert len(out.replies) <= 1, f"{len(out.replies)} of {RETRIES} parallel retries proceeded"
        assert out.handler_calls == len(out.replies)
        assert len(out.refusals) == RETRIES - len(out.replies)
        for e in out.refusals:
            assert_refused(e)
        # And the honest one is not starved: exactly one proceeds.
        assert len(out.replies) == 1
    # Each refused retry was the sealer's refusal of a round already opened.
    await logged(real_sealer, before, "ALREADY_CONSUMED", RUNS * (RETRIES - 1))


async def test_parallel_retries_control_sdk_boundary(servers: Servers) -> None:
    """Under the SDK's boundary every retry proceeds: RETRIES continuations of one round."""
    for out in await parallel_retries(servers.sdk, 3):
        out.proceeded(RETRIES)


# The MRTR members by their Python names. FastMCP reads a retry's params
# again with pydantic, which accepts field names as well as the wire's: a
# request_state member would reach ctx.request_state unopened. The
# middleware refuses params that carry either name.
FORGED = {"request_state": json.dumps({"tool": "book_seat", "seat": "1A", "step": 2}), "input_responses": PAY}


async def test_python_named_members_refused(servers: Servers) -> None:
    async with caller("wire") as c:
        assert isinstance(c, WireCaller)
        out = await attempt(servers.sealed, [c.call(servers.sealed.url, "book_seat", SEAT, extra=FORGED)])
    out.refused_before_the_handler()
    assert len(out.refusals) == 1


async def test_python_named_members_control_sdk_boundary(servers: Servers, request: pytest.FixtureRequest) -> None:
    async with caller("wire") as c:
        assert isinstance(c, WireCaller)
        out = await attempt(servers.sdk, [c.call(servers.sdk.url, "book_seat", SEAT, extra=FORGED)])
    out.proceeded(1)
    if request.node.callspec.params["servers"] == "FastMCP":
        # FastMCP hands the forged state and answers to the handler: the seat
        # is booked without a confirmation, on a card nobody was asked for.
        assert out.replies[0].complete, out.replies[0]
    else:
        # MCPServer reads params by their wire names only: round 1 again.
        assert out.replies[0].asks == ["confirm"], out.replies[0]


# Check, then open. A retry whose inputResponses the SDK refuses as invalid
# params after the boundary ran would have spent its round (latest-only or
# one-time) already: the honest retry after it would be refused
# ALREADY_CONSUMED. The middleware validates the params as the SDK will
# before it opens the state.
MALFORMED = {
    "unknown_action": {"confirm": {"action": "maybe"}},
    "not_a_result": {"confirm": 5},
    "content_not_flat": {"confirm": {"action": "accept", "content": {"ok": [{"a": 1}]}}},
    "not_a_map": ["confirm"],
}


@pytest.mark.parametrize("malformed", list(MALFORMED))
@pytest.mark.parametrize("one_time", [False, True], ids=["latest-only", "one-time"])
async def test_malformed_retry_spends_no_round(servers: Servers, real_sealer: Sealer, malformed: str, one_time: bool) -> None:
    s = servers.one_time if one_time else servers.sealed
    before = sealer_reasons(real_sealer)
    async with WireCaller() as c:
        r1 = await c.call(s.url, "book_seat", SEAT)
        out = await attempt(s, [c.call(s.url, "book_seat", SEAT, responses=MALFORMED[malformed], state=r1.state)])  # type: ignore[arg-type]
        assert out.replies == [] and out.handler_calls == 0, out
        (e,) = out.refusals
        # The SDK's own answer to params it cannot read.
        assert (e.code, e.message) == (INVALID_PARAMS, "Invalid request parameters"), repr(e.error)
        # The honest retry of the same round proceeds: the malformed one spent nothing.
        try:
            then = await c.call(s.url, "book_seat", SEAT, responses=CONFIRM, state=r1.state)
        except MCPError as refused:
            raise AssertionError(f"the honest retry after a malformed one was refused ({dict(sealer_reasons(real_sealer) - before)})") from refused
    assert then.asks == ["payment"], then
    assert sealer_reasons(real_sealer) - before == Counter(), "the sealer refused a call"
