"""Recorded outcomes without a sealer (README, "Recorded outcomes"): the
answer's encoding, which every adapter shares; the middleware's record of
what it sent and its replay of what was recorded; IN_PROGRESS answered as a
retryable failure; a failed record that changes nothing; and the wire of both
transports. A sealer in memory stands for the real one, whose answers
tests/integration/test_outcomes.py shows."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import logging
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from mcp_sealer import Opened, Outcome, Reason, Recorded, Sealed, SealerError, _answers, answers_digest, rest_client
from mcp_sealer._client import LoopBound, opened_of, recorded_of
from mcp_sealer._grpc import from_grpc
from mcp_sealer._rest import _grpc_timeout, from_rest
from mcp_sealer.gen.sealer.v1 import sealer_pb2 as pb
from mcp_sealer.mcp import OUTCOME_CONFLICT, REQUEST_IN_PROGRESS, SealedRequestState

NOW = dt.datetime.now(dt.timezone.utc)
PROTOCOL = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientInfo": {"name": "unit", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}
ASK = {"method": "elicitation/create", "params": {"mode": "form", "message": "Sure?", "requestedSchema": {"type": "object", "properties": {}}}}
CONFIRM = {"confirm": {"action": "accept", "content": {"ok": True}}}
PAID = {"resultType": "complete", "content": [{"type": "text", "text": "paid 42 to bob"}], "isError": False}
STATE = "AgSTATE-of-round-2"  # what the client echoes; never logged
SECRET_PAYLOAD = b"card=4242-4242"  # what the state carries; never logged


# The encoding.

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
OBJECTS = st.dictionaries(st.text(), JSON, max_size=6)


@given(OBJECTS)
def test_a_result_reads_back_as_it_was_sent(result: dict[str, Any]) -> None:
    data = _answers.encode_result(result)
    assert json.loads(data) == {"result": result}  # the convention, as any JSON reader sees it
    assert _answers.decode(data) == _answers.Answer(result=result)


@given(st.integers(-(2**31), 2**31 - 1), st.text(), JSON)
def test_an_error_reads_back_as_it_was_sent(code: int, message: str, data: Any) -> None:
    out = _answers.decode(_answers.encode_error(code, message, data))
    want = {"code": code, "message": message} | ({} if data is None else {"data": data})
    assert out == _answers.Answer(error=want)


@given(st.binary())
@settings(max_examples=300)
def test_any_bytes_decode_or_raise_value_error(data: bytes) -> None:
    try:
        out = _answers.decode(data)
    except ValueError:
        return
    assert (out.result is None) != (out.error is None)


@pytest.mark.parametrize(
    "doc",
    [
        b"",
        b"[]",
        b'{"result": 1}',
        b'{"result": {}, "error": {"code": 1, "message": "m"}}',
        b'{"result": {}, "id": 1}',
        b'{"jsonrpc": "2.0", "result": {}}',
        b'{"error": {"code": "1", "message": "m"}}',
        b'{"error": {"code": true, "message": "m"}}',
        b'{"error": {"code": 1}}',
        b'{"error": {"code": 1, "message": "m", "extra": 1}}',
        b'{"other": {}}',
        b"\xff",
        b"[" * 100_000,
    ],
)
def test_what_is_not_the_convention_is_refused(doc: bytes) -> None:
    with pytest.raises(ValueError, match="an outcome"):
        _answers.decode(doc)


def test_no_nan_in_an_outcome() -> None:
    with pytest.raises(ValueError, match="JSON"):
        _answers.encode_result({"x": float("nan")})


# The middleware.


class RecordingSealer:
    """Seals in memory; each open answers what the test set (recording, an
    outcome, an error); each record is kept, or fails with record_error."""

    url = "http://sealer.example:7443"

    def __init__(self) -> None:
        self.recording = True
        self.outcome: Outcome | None = None
        self.open_error: SealerError | None = None
        self.record_error: SealerError | None = None
        self.opens: list[dict[str, Any]] = []
        self.records: list[tuple[str, bytes]] = []
        self.seals = 0

    async def seal(self, **_: Any) -> Sealed:
        self.seals += 1
        return Sealed(f"Ag-sealed-{self.seals}", NOW)

    async def open(self, request_state: str, **kw: Any) -> Opened:
        self.opens.append(kw)
        if self.open_error is not None:
            raise self.open_error
        if self.outcome is not None:
            return Opened(b"", NOW, NOW, request_state, outcome=self.outcome)
        return Opened(SECRET_PAYLOAD, NOW, NOW, request_state, recording=self.recording and kw.get("record_outcome", False))

    async def record(self, request_state: str, outcome: bytes, *, timeout: float | None = None) -> Recorded:
        if self.record_error is not None:
            raise self.record_error
        self.records.append((request_state, outcome))
        return Recorded(NOW)

    async def close(self) -> None:
        pass


def ctx(params: dict[str, Any]) -> ServerRequestContext[Any, Any]:
    return ServerRequestContext(session=None, lifespan_context={}, protocol_version=PROTOCOL, method="tools/call", params=params, request_id=1)  # type: ignore[arg-type]


def retry() -> ServerRequestContext[Any, Any]:
    return ctx({"_meta": META, "name": "pay", "arguments": {"to": "bob"}, "inputResponses": CONFIRM, "requestState": STATE})


class Handler:
    """A handler that counts its runs and answers, or raises, what it is given."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.runs = 0

    async def __call__(self, c: ServerRequestContext[Any, Any]) -> Any:
        self.runs += 1
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def middleware(sealer: RecordingSealer, **options: Any) -> SealedRequestState:
    return SealedRequestState(sealer, allow_anonymous=True, backoff_seconds=0.001, **options)  # type: ignore[arg-type]


async def test_the_answer_sent_is_recorded_and_replayed() -> None:
    sealer, handler = RecordingSealer(), Handler(PAID)
    mw = middleware(sealer)
    sent = await mw(retry(), handler)
    await mw.flush()
    assert sent == PAID and handler.runs == 1
    assert sealer.opens[0]["record_outcome"] is True
    # The state as the retry carried it, and the answer as it went out.
    assert sealer.records == [(STATE, _answers.encode_result(PAID))]

    sealer.outcome = Outcome(sealer.records[0][1], NOW)
    again = await mw(retry(), handler)
    assert again == sent and handler.runs == 1, "the handler ran on a replayed state"
    await mw.flush()
    assert len(sealer.records) == 1, "a replay recorded again"


async def test_the_next_rounds_sealed_state_is_what_is_recorded() -> None:
    sealer = RecordingSealer()
    mw = middleware(sealer)
    asked = {"resultType": "input_required", "inputRequests": {"card": ASK}, "requestState": "plaintext step 3"}
    sent = await mw(retry(), Handler(asked))
    await mw.flush()
    assert sent["requestState"] == "Ag-sealed-1"
    recorded = _answers.decode(sealer.records[0][1])
    assert recorded.result == sent and "plaintext step 3" not in sealer.records[0][1].decode()


async def test_a_next_round_the_sealer_could_not_seal_records_none() -> None:
    # The handler ran and asked for more; sealing its state failed, a failure
    # that may pass: the client gets sealer_unavailable, and a retry of the
    # state is refused (none recorded) rather than answered that again.
    sealer = RecordingSealer()

    async def unavailable(**_: Any) -> Sealed:
        raise SealerError(Reason.LEDGER_UNAVAILABLE, "sealer: ledger unavailable", 14)

    sealer.seal = unavailable  # type: ignore[method-assign]
    mw = middleware(sealer)
    asked = {"resultType": "input_required", "inputRequests": {"card": ASK}, "requestState": "plaintext step 3"}
    with pytest.raises(MCPError) as failed:
        await mw(retry(), Handler(asked))
    await mw.flush()
    assert failed.value.data == {"reason": "sealer_unavailable"}
    assert sealer.records == [(STATE, b"")]


@pytest.mark.parametrize(
    ("raised", "want"),
    [
        (MCPError(-32000, "card declined", {"retry": False}), (-32000, "card declined", {"retry": False})),
        (MCPError(-32602, "bad amount"), (-32602, "bad amount", None)),
        # What the SDK's 2026-07-28 transport answers for any other exception.
        (RuntimeError("db password=hunter2"), (-32603, "Internal server error", None)),
    ],
)
async def test_a_handlers_error_is_recorded_and_replayed(raised: Exception, want: tuple[int, str, Any]) -> None:
    sealer, handler = RecordingSealer(), Handler(raised)
    mw = middleware(sealer)
    with pytest.raises(MCPError) as first:
        await mw(retry(), handler)
    await mw.flush()
    assert (first.value.code, first.value.message, first.value.data) == want
    assert b"hunter2" not in sealer.records[0][1]

    sealer.outcome = Outcome(sealer.records[0][1], NOW)
    with pytest.raises(MCPError) as replayed:
        await mw(retry(), handler)
    assert replayed.value.error == first.value.error and handler.runs == 1


async def test_a_failed_record_changes_nothing_and_says_no_secret(caplog: pytest.LogCaptureFixture) -> None:
    sealer, handler = RecordingSealer(), Handler(PAID)
    sealer.record_error = SealerError(Reason.LEDGER_UNAVAILABLE, "sealer: ledger unavailable", 14)
    mw = middleware(sealer)
    with caplog.at_level(logging.INFO, logger="mcp_sealer.mcp"):
        sent = await mw(retry(), handler)
        await mw.flush()
    assert sent == PAID and handler.runs == 1
    assert "not recorded" in caplog.text and "LEDGER_UNAVAILABLE" in caplog.text and "http://sealer.example:7443" in caplog.text, caplog.text
    for secret in (STATE, SECRET_PAYLOAD.decode(), "paid 42", "anonymous"):
        assert secret not in caplog.text, f"the log holds {secret!r}"


async def test_a_record_that_hangs_never_holds_the_answer() -> None:
    sealer = RecordingSealer()
    hung = asyncio.Event()

    async def record(*_: Any, **__: Any) -> Recorded:
        await hung.wait()
        raise AssertionError("unreachable")

    sealer.record = record  # type: ignore[method-assign]
    mw = middleware(sealer, deadline=0.2)
    assert await mw(retry(), Handler(PAID)) == PAID  # before the record ends
    await mw.flush()  # ends within the deadline


async def test_switched_off_nothing_is_asked_or_recorded() -> None:
    sealer = RecordingSealer()
    mw = middleware(sealer, record_outcomes=False)
    assert await mw(retry(), Handler(PAID)) == PAID
    await mw.flush()
    assert sealer.opens[0]["record_outcome"] is False and sealer.records == []


async def test_a_state_not_kept_for_an_outcome_records_nothing() -> None:
    # A state that neither opens once nor is a latest-only round: the sealer
    # ignores record_outcome and says nothing of recording.
    sealer = RecordingSealer()
    sealer.recording = False
    mw = middleware(sealer)
    assert await mw(retry(), Handler(PAID)) == PAID
    await mw.flush()
    assert sealer.records == []


async def test_an_outcome_that_is_no_answer_fails_closed() -> None:
    sealer, handler = RecordingSealer(), Handler(PAID)
    sealer.outcome = Outcome(b"<html>", NOW)
    with pytest.raises(MCPError) as e:
        await middleware(sealer)(retry(), handler)
    assert e.value.code == -32603 and handler.runs == 0


async def test_in_progress_is_answered_retryable_and_bare() -> None:
    sealer, handler = RecordingSealer(), Handler(PAID)
    sealer.open_error = SealerError(Reason.IN_PROGRESS, "sealer: the outcome of this state is still being recorded", 10)
    with pytest.raises(MCPError) as e:
        await middleware(sealer)(retry(), handler)
    assert (e.value.code, e.value.data) == (-32603, {"reason": REQUEST_IN_PROGRESS})
    assert "sealer" not in e.value.message.lower() and "IN_PROGRESS" not in e.value.message
    assert handler.runs == 0
    # Retried within the deadline, as every retryable failure.
    assert len(sealer.opens) == 3


# IN_PROGRESS on both transports.


def test_in_progress_over_grpc() -> None:
    info = error_details_pb2.ErrorInfo(reason="IN_PROGRESS", domain="sealer.mcp")
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=grpc.StatusCode.ABORTED.value[0], message="sealer: in progress", details=[detail])

    class Err(grpc.aio.AioRpcError):
        def __init__(self) -> None:
            super().__init__(
                grpc.StatusCode.ABORTED,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString())),
                details="sealer: in progress",
            )

    e = from_grpc(Err())
    assert e.reason is Reason.IN_PROGRESS and e.retryable and not e.rejected, repr(e)


def test_in_progress_over_rest() -> None:
    info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "IN_PROGRESS", "domain": "sealer.mcp"}
    body = {"code": 10, "message": "sealer: in progress", "details": [info]}
    e = from_rest(409, body)
    assert e.reason is Reason.IN_PROGRESS and e.retryable and e.code == 409, repr(e)


# The replies.


def test_an_outcome_is_read_from_the_reply() -> None:
    res = pb.OpenResponse(outcome=pb.Outcome(data=b'{"result":{}}'))
    res.issued_at.GetCurrentTime()
    res.expires_at.GetCurrentTime()
    res.outcome.recorded_at.GetCurrentTime()
    opened = opened_of(res, "S")
    assert opened.outcome is not None and opened.outcome.data == b'{"result":{}}' and not opened.recording
    # An outcome answers a retry: with a payload, or consuming, it is no sealer's reply.
    for bad in (pb.OpenResponse(payload=b"p"), pb.OpenResponse(recording=True)):
        bad.MergeFrom(res)
        with pytest.raises(SealerError, match="not the sealer's"):
            opened_of(bad, "S")
    res.outcome.ClearField("recorded_at")
    with pytest.raises(SealerError, match="not the sealer's"):
        opened_of(res, "S")
    with pytest.raises(SealerError, match="not the sealer's"):
        recorded_of(pb.RecordResponse())


async def test_rest_record_and_open_on_the_wire() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/v1/record":
            return httpx.Response(200, json={"keptUntil": "2030-01-01T00:00:00Z"})
        return httpx.Response(200, json={"issuedAt": "2030-01-01T00:00:00Z", "expiresAt": "2030-01-01T00:00:00Z", "recording": True})

    client = rest_client("http://127.0.0.1:7080")
    client._http = LoopBound(lambda: httpx.AsyncClient(base_url="http://127.0.0.1:7080", transport=httpx.MockTransport(answer)))
    async with client:
        recorded = await client.record(STATE, b"\x00\xff outcome", timeout=2.5)
        opened = await client.open(STATE, principal="alice", request=b"\x00" * 32, record_outcome=True, timeout=3)
    assert recorded.kept_until == dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    assert opened.recording
    record, open_ = seen
    assert json.loads(record.content) == {"requestState": STATE, "outcome": base64.b64encode(b"\x00\xff outcome").decode()}
    assert json.loads(open_.content)["recordOutcome"] is True
    # The deadline goes along, as gRPC sends it: the gateway bounds its wait by it.
    assert (record.headers["grpc-timeout"], open_.headers["grpc-timeout"]) == ("2500m", "3000m")
    # Below a millisecond it rounds up: a deadline the gateway can keep.
    assert _grpc_timeout(0.0004) == "1m"


# Answers: a retry with other inputResponses (issue 50, 5b).


async def test_every_recording_open_sends_the_answers_digest_of_its_input_responses() -> None:
    sealer = RecordingSealer()
    mw = middleware(sealer)
    await mw(retry(), Handler(PAID))
    # The same answers with a _meta of the response's own: the same digest.
    traced = {"confirm": {**CONFIRM["confirm"], "_meta": {"io.example/trace": "t-2"}}}
    await mw(ctx({"_meta": META, "name": "pay", "arguments": {"to": "bob"}, "inputResponses": traced, "requestState": STATE}), Handler(PAID))
    await mw(ctx({"_meta": META, "name": "pay", "arguments": {"to": "bob"}, "requestState": STATE}), Handler(PAID))
    await mw.flush()
    assert [o["answers"] for o in sealer.opens] == [answers_digest(CONFIRM), answers_digest(CONFIRM), answers_digest(None)]
    assert answers_digest(CONFIRM) != answers_digest({"confirm": {"action": "accept", "content": {"ok": False}}})
    # Switched off, no outcome is asked for, and no answers are sent.
    sealer = RecordingSealer()
    await middleware(sealer, record_outcomes=False)(retry(), Handler(PAID))
    assert sealer.opens[0]["answers"] is None


async def test_outcome_conflict_is_answered_as_such_never_run_never_retried(caplog: pytest.LogCaptureFixture) -> None:
    sealer, handler = RecordingSealer(), Handler(PAID)
    sealer.open_error = SealerError(Reason.OUTCOME_CONFLICT, "sealer: ledger: answered otherwise", 6)
    with caplog.at_level(logging.INFO, logger="mcp_sealer.mcp"), pytest.raises(MCPError) as e:
        await middleware(sealer)(retry(), handler)
    want = (-32602, "invalid requestState: answered before for other inputResponses", {"reason": OUTCOME_CONFLICT})
    assert (e.value.code, e.value.message, e.value.data) == want
    assert OUTCOME_CONFLICT == "outcome_conflict"
    assert handler.runs == 0 and len(sealer.opens) == 1 and sealer.records == []
    assert "OUTCOME_CONFLICT" in caplog.text and STATE not in caplog.text


async def test_input_responses_with_no_answers_digest_are_refused_before_the_sealer() -> None:
    sealer, handler = RecordingSealer(), Handler(PAID)
    lone = {"confirm": {"action": "accept", "content": {"note": "\ud800"}}}
    with pytest.raises(MCPError) as e:
        await middleware(sealer)(ctx({"_meta": META, "name": "pay", "arguments": {"to": "bob"}, "inputResponses": lone, "requestState": STATE}), handler)
    assert (e.value.code, e.value.data) == (-32602, {"reason": "invalid_request_state"})
    assert sealer.opens == [] and handler.runs == 0


def test_outcome_conflict_over_both_transports_is_a_rejection_never_retried() -> None:
    info = error_details_pb2.ErrorInfo(reason="OUTCOME_CONFLICT", domain="sealer.mcp")
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=grpc.StatusCode.ALREADY_EXISTS.value[0], message="sealer: conflict", details=[detail])

    class Err(grpc.aio.AioRpcError):
        def __init__(self) -> None:
            super().__init__(
                grpc.StatusCode.ALREADY_EXISTS,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString())),
                details="sealer: conflict",
            )

    rest_info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "OUTCOME_CONFLICT", "domain": "sealer.mcp"}
    rest = {"code": 6, "message": "sealer: conflict", "details": [rest_info]}
    for e in (from_grpc(Err()), from_rest(409, rest)):
        assert e.reason is Reason.OUTCOME_CONFLICT and e.rejected and not e.retryable and not e.unavailable, repr(e)


async def test_answers_on_the_wire() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"issuedAt": "2030-01-01T00:00:00Z", "expiresAt": "2030-01-01T00:00:00Z", "recording": True})

    client = rest_client("http://127.0.0.1:7080")
    client._http = LoopBound(lambda: httpx.AsyncClient(base_url="http://127.0.0.1:7080", transport=httpx.MockTransport(answer)))
    digest = answers_digest(CONFIRM)
    async with client:
        await client.open(STATE, principal="alice", request=b"\x00" * 32, record_outcome=True, answers=digest)
        await client.open(STATE, principal="alice", request=b"\x00" * 32, record_outcome=True)
        for bad in (b"", b"\x00" * 31, digest.hex()):
            with pytest.raises(SealerError, match="32-byte"):
                await client.open(STATE, principal="alice", request=b"\x00" * 32, record_outcome=True, answers=bad)  # type: ignore[arg-type]
    with_answers, without = (json.loads(r.content) for r in seen)
    assert with_answers["answers"] == base64.b64encode(digest).decode() and "answers" not in without
    assert len(seen) == 2, "an open with a malformed digest was sent"
