"""Recorded outcomes (README, "Recorded outcomes") against the real sealer:
first the client's ``open(record_outcome=True)`` and ``record`` over gRPC and
REST, then the middleware on the example servers (examples/python, MCPServer
and FastMCP, each with either client), whose ``pay`` tool pays in its second
round and counts the payments (``GET /payments``).

A network loses the answer to the paying round after the handler ran
(``AnswerCutter``); the client's retry with the same state gets that very
answer under its own id, and nothing is paid twice. 32 retries at once: one
payment, 32 identical answers. A retry by another principal, with other
arguments or other input keys is refused as before, learning nothing of the
answer. With ``--no-record-outcomes`` (the switch) the retry is refused
ALREADY_CONSUMED, as before the feature.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from mcp_sealer import FlowRequest, Reason, SealerClient, SealerError, grpc_client, rest_client, tool_call

from .harness import Sealer
from .mcp_harness import ALICE, BOB, KEEPALIVE_EXPIRY, PROTOCOL, SERVERS, TOKENS, AnswerCutter, Server, logged, sealer_reasons, shared

pytestmark = pytest.mark.integration

# The client.


@pytest.fixture(params=["grpc", "rest"])
async def client(request: pytest.FixtureRequest, real_sealer: Sealer) -> AsyncIterator[SealerClient]:
    make = grpc_client if request.param == "grpc" else rest_client
    async with make(real_sealer.grpc_url if request.param == "grpc" else real_sealer.rest_url) as c:
        yield c


def payment(payee: str = "bob", amount: int = 42) -> Any:
    return tool_call("pay", {"payee": payee, "amount": amount})


async def refused(reason: Reason, call: Any) -> SealerError:
    with pytest.raises(SealerError) as e:
        await call
    assert e.value.reason is reason, repr(e.value)
    return e.value


async def test_client_records_and_a_retry_gets_the_outcome(client: SealerClient) -> None:
    request = payment()
    sealed = await client.seal(principal="alice", request=request, payload=b"step 2", one_time=True)
    state = sealed.request_state
    first = await client.open(state, principal="alice", request=request, record_outcome=True)
    assert first.recording and first.outcome is None and first.payload == b"step 2"
    # Nothing recorded yet: a retry waits for it within its deadline, in vain
    # (5 s: the sealer answers with a tenth of it left, time enough for the
    # answer to arrive on a loaded machine).
    e = await refused(Reason.IN_PROGRESS, client.open(state, principal="alice", request=request, record_outcome=True, timeout=5))
    assert e.retryable and e.code in (10, 409), repr(e)  # gRPC ABORTED, HTTP 409
    kept = await client.record(state, b'{"result":{"paid":true}}')
    assert kept.kept_until > dt.datetime.now(dt.timezone.utc)
    again = await client.open(state, principal="alice", request=request, record_outcome=True)
    assert again.outcome is not None and again.outcome.data == b'{"result":{"paid":true}}'
    assert again.payload == b"" and not again.recording
    # Every other check still judges first, and says nothing of the outcome.
    await refused(Reason.PRINCIPAL_MISMATCH, client.open(state, principal="bob", request=request, record_outcome=True))
    await refused(Reason.REQUEST_MISMATCH, client.open(state, principal="alice", request=payment(amount=43), record_outcome=True))
    # Without record_outcome, the state is consumed as before; a second record loses.
    await refused(Reason.ALREADY_CONSUMED, client.open(state, principal="alice", request=request))
    await refused(Reason.ALREADY_CONSUMED, client.record(state, b'{"result":{"paid":false}}'))


async def test_client_latest_only_round_binds_its_input_keys(client: SealerClient) -> None:
    request = payment()
    sealed = await client.seal(principal="alice", request=request, payload=b"r1", flow=FlowRequest(latest_only=True, asked=["confirm"]))
    state = sealed.request_state
    first = await client.open(state, principal="alice", request=request, responded=["confirm"], record_outcome=True)
    assert first.recording and first.flow is not None and first.flow.round == 1
    await client.record(state, b'{"error":{"code":-32000,"message":"declined"}}')
    again = await client.open(state, principal="alice", request=request, responded=["confirm"], record_outcome=True)
    assert again.outcome is not None and again.outcome.data == b'{"error":{"code":-32000,"message":"declined"}}'
    await refused(Reason.INPUT_MISMATCH, client.open(state, principal="alice", request=request, responded=["confirm", "extra"], record_outcome=True))


# Over this sealer's limit; over what any sealer keeps, too large for a call to reach one.
@pytest.mark.parametrize("size", [64 * 1024 + 1, 3 << 20])
async def test_client_an_outcome_over_the_limit_is_refused_and_kept_as_none(client: SealerClient, size: int) -> None:
    request = payment()
    state = (await client.seal(principal="alice", request=request, one_time=True)).request_state
    assert (await client.open(state, principal="alice", request=request, record_outcome=True)).recording
    await refused(Reason.INVALID_ARGUMENT, client.record(state, b"x" * size))
    # Retries are refused at once, never kept waiting for an outcome that will not come.
    await refused(Reason.ALREADY_CONSUMED, client.open(state, principal="alice", request=request, record_outcome=True, timeout=5))


# The middleware, on the example servers.

_ids = itertools.count(1)


@dataclass
class Answer:
    """A JSON-RPC answer: its id, and its result or error."""

    id: int
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    body: bytes

    @property
    def text(self) -> str:
        assert self.result is not None, self.error
        return " ".join(c["text"] for c in self.result.get("content", []) if c.get("type") == "text")


async def post(
    http: httpx.AsyncClient, url: str, arguments: dict[str, Any], *, token: str = ALICE, responses: dict[str, Any] | None = None, state: str | None = None
) -> Answer:
    """One tools/call round of pay, as raw JSON-RPC over the stateless 2026-07-28 wire."""
    params: dict[str, Any] = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientInfo": {"name": "sealer-outcome-test", "version": "1.0.0"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        },
        "name": "pay",
        "arguments": arguments,
    }
    if responses is not None:
        params["inputResponses"] = responses
    if state is not None:
        params["requestState"] = state
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "pay",
        "Authorization": f"Bearer {token}",
    }
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": "tools/call", "params": params}
    r = await http.post(url, json=body, headers=headers)
    return answer_of(r.content)


def answer_of(body: bytes) -> Answer:
    msg = json.loads(body)
    return Answer(msg["id"], msg.get("result"), msg.get("error"), body)


CONFIRM = {"confirm": {"action": "accept", "content": {"ok": True}}}
REFUSAL = {"code": -32602, "message": "Invalid or expired requestState", "data": {"reason": "invalid_request_state"}}


def carries_state(body: bytes) -> bool:
    return b'"requestState"' in body


@dataclass
class Servers:
    recording: Server
    """Answers recorded (the default), the sealer over gRPC."""
    recording_rest: Server
    """The same, the sealer over REST."""
    switched_off: Server
    """--no-record-outcomes."""


@pytest.fixture(scope="module", params=list(SERVERS))
def servers(request: pytest.FixtureRequest, real_sealer: Sealer) -> Servers:
    script, auth = SERVERS[request.param], ("--tokens", TOKENS)
    specs = [
        # The first is the attack tests' sealed server: shared, not started twice.
        (script, real_sealer.grpc_url, auth, 0),
        (script, real_sealer.rest_url, (*auth, "--rest"), 0),
        (script, real_sealer.grpc_url, (*auth, "--no-record-outcomes"), 0),
    ]
    return Servers(*shared(request, specs))


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=64, keepalive_expiry=KEEPALIVE_EXPIRY)) as h:
        yield h


def pick(servers: Servers, transport: str) -> Server:
    return servers.recording if transport == "grpc" else servers.recording_rest


async def first_round(http: httpx.AsyncClient, s: Server, args: dict[str, Any]) -> str:
    r1 = await post(http, s.url, args)
    assert r1.result is not None and r1.result["resultType"] == "input_required", r1.body
    state: str = r1.result["requestState"]
    return state


async def paid_after_a_lost_answer(http: httpx.AsyncClient, s: Server, args: dict[str, Any]) -> tuple[str, bytes]:
    """Round 1, then round 2 through a network that loses its answer after the
    handler paid; returns round 2's state and the answer that was lost."""
    state = await first_round(http, s, args)
    async with AnswerCutter(s.url, carries_state) as cutter:
        with pytest.raises(httpx.HTTPError):
            await post(http, cutter.url, args, responses=CONFIRM, state=state)
    (lost,) = cutter.lost
    assert (await s.payments())[args["payee"]] == 1, "the lost round did not pay"
    return state, lost


@pytest.mark.parametrize("transport", ["grpc", "rest"])
async def test_a_lost_answer_is_sent_again_never_paid_again(servers: Servers, http: httpx.AsyncClient, transport: str) -> None:
    s = pick(servers, transport)
    args = {"payee": f"payee-{uuid.uuid4().hex[:8]}", "amount": 42}
    calls = (await s.calls())["pay"]
    state, lost = await paid_after_a_lost_answer(http, s, args)
    lost_answer = answer_of(lost)
    assert lost_answer.text.startswith(f"paid 42 to {args['payee']}: payment "), lost
    for _ in range(2):
        retry = await post(http, s.url, args, responses=CONFIRM, state=state)
        # The very answer that was lost, under the retry's own id.
        assert (retry.result, retry.error) == (lost_answer.result, lost_answer.error), retry.body
        assert retry.id != lost_answer.id
    assert (await s.payments())[args["payee"]] == 1
    assert (await s.calls())["pay"] - calls == 2, "a handler ran on a retry"


async def test_parallel_retries_pay_once_and_answer_alike(servers: Servers, http: httpx.AsyncClient) -> None:
    s = servers.recording
    args = {"payee": f"payee-{uuid.uuid4().hex[:8]}", "amount": 7}
    state = await first_round(http, s, args)
    calls = (await s.calls())["pay"]
    retries = await asyncio.gather(*(post(http, s.url, args, responses=CONFIRM, state=state) for _ in range(32)))
    assert {json.dumps(r.result, sort_keys=True) for r in retries} == {json.dumps(retries[0].result, sort_keys=True)}, [r.body for r in retries]
    assert all(r.error is None for r in retries) and retries[0].text.startswith(f"paid 7 to {args['payee']}")
    assert len({r.id for r in retries}) == 32
    assert (await s.payments())[args["payee"]] == 1
    assert (await s.calls())["pay"] - calls == 1


@pytest.mark.parametrize(
    ("attack", "reason"),
    [("another_principal", "PRINCIPAL_MISMATCH"), ("other_arguments", "REQUEST_MISMATCH"), ("other_input_keys", "INPUT_MISMATCH")],
)
async def test_any_other_retry_is_refused_and_learns_nothing(servers: Servers, http: httpx.AsyncClient, real_sealer: Sealer, attack: str, reason: str) -> None:
    s = servers.recording
    args = {"payee": f"payee-{uuid.uuid4().hex[:8]}", "amount": 42}
    state, lost = await paid_after_a_lost_answer(http, s, args)
    calls, before = (await s.calls())["pay"], sealer_reasons(real_sealer)
    retry = {
        "another_principal": lambda: post(http, s.url, args, token=BOB, responses=CONFIRM, state=state),
        "other_arguments": lambda: post(http, s.url, {**args, "amount": 43}, responses=CONFIRM, state=state),
        "other_input_keys": lambda: post(http, s.url, args, responses={**CONFIRM, "card": CONFIRM["confirm"]}, state=state),
    }[attack]
    got = await retry()
    assert got.result is None and got.error == REFUSAL, got.body
    assert b"paid" not in got.body and args["payee"].encode() not in got.body
    await logged(real_sealer, before, reason)
    assert (await s.calls())["pay"] == calls and (await s.payments())[args["payee"]] == 1
    # The refusal spent nothing: the honest retry still gets the answer.
    honest = await post(http, s.url, args, responses=CONFIRM, state=state)
    assert honest.result == answer_of(lost).result


async def test_switched_off_a_retry_is_refused_as_before(servers: Servers, http: httpx.AsyncClient, real_sealer: Sealer) -> None:
    s = servers.switched_off
    args = {"payee": f"payee-{uuid.uuid4().hex[:8]}", "amount": 42}
    state, _ = await paid_after_a_lost_answer(http, s, args)
    before = sealer_reasons(real_sealer)
    retry = await post(http, s.url, args, responses=CONFIRM, state=state)
    assert retry.error == REFUSAL, retry.body
    await logged(real_sealer, before, "ALREADY_CONSUMED")
    assert (await s.payments())[args["payee"]] == 1
