"""What both transports share: the calls, the bindings, the results.

A client binds every state to the request it belongs to by the request
digest (FORMAT.md, "Request digest"), computed in process and sent as 32
bytes, as the Go and TypeScript clients do.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import ipaddress
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from google.protobuf import duration_pb2, struct_pb2, timestamp_pb2

from ._digest import request_digest, well_formed
from ._errors import NOT_THE_SEALER, Reason, SealerError, invalid_argument
from .gen.sealer.v1 import sealer_pb2 as pb

#: The deadline of each call, in seconds, unless the call or the client gives its own.
DEFAULT_TIMEOUT = 10.0
# The largest answer any sealer keeps as an outcome: 1 MiB (FORMAT.md, "Recorded outcomes").
MAX_OUTCOME = 1 << 20

#: A bearer token, or a function (sync or async) that returns one for each call.
Token = str | Callable[[], str] | Callable[[], Awaitable[str]]


@dataclass(frozen=True)
class Request:
    """The MCP request a state belongs to: its method and its params as the MCP
    server received them (only ``name``, ``arguments`` and ``uri`` count).

    The digest is computed in process and sent as 32 bytes; with
    ``digest_on_server`` the params are sent instead and the sealer digests
    them (the same digest, more bytes on the wire).
    """

    method: str
    params: Mapping[str, Any]
    digest_on_server: bool = False


def tool_call(name: str, arguments: Mapping[str, Any] | None = None) -> Request:
    """Binds to a tools/call request: its tool name and its arguments as received (None when absent)."""
    return Request("tools/call", {"name": name} if arguments is None else {"name": name, "arguments": arguments})


def prompt_get(name: str, arguments: Mapping[str, str] | None = None) -> Request:
    """Binds to a prompts/get request: its prompt name and its arguments (None when absent)."""
    return Request("prompts/get", {"name": name} if arguments is None else {"name": name, "arguments": arguments})


def resource_read(uri: str) -> Request:
    """Binds to a resources/read request: its uri."""
    return Request("resources/read", {"uri": uri})


#: A binding: the request, or a 32-byte digest of the caller's own.
Binding = Request | bytes


@dataclass(frozen=True)
class FlowRequest:
    """Makes a state one round of a flow (FORMAT.md, "Flows").

    ``continues`` is the state of the round before, exactly as the retry
    carried it and open accepted it (``flow_after`` sets it); empty starts a
    new flow. ``latest_only``: once a round opened, no state of it or of an
    earlier round opens again (no rewind, no fork). ``asked``: the keys of
    the inputRequests this round asks, which the retry must answer exactly
    (INPUT_MISMATCH); None leaves them unbound.
    """

    continues: str = ""
    latest_only: bool = False
    asked: Sequence[str] | None = None


@dataclass(frozen=True)
class Flow:
    """What the sealer says of a state's flow."""

    id: bytes  # 16 bytes, the same in every round
    round: int  # from 1
    deadline: _dt.datetime  # no state of the flow opens after it
    latest_only: bool


@dataclass(frozen=True)
class Sealed:
    """A new requestState."""

    request_state: str
    expires_at: _dt.datetime
    flow: Flow | None = None


@dataclass(frozen=True)
class Outcome:
    """The answer recorded for a state an open consumed (README, "Recorded
    outcomes"): the bytes its ``record`` gave, and when the sealer sealed them."""

    data: bytes = field(repr=False)
    recorded_at: _dt.datetime


@dataclass(frozen=True)
class Opened:
    """What an open returns. ``request_state`` is the state that opened, as given
    to open: what the next round continues (``flow_after``).

    With ``open(..., record_outcome=True)``: ``recording`` says this open
    consumed the state for an outcome, so the caller runs its handler and then
    ``record``s the answer it sent; ``outcome`` is set (and ``payload`` empty)
    when the state was consumed before and its outcome recorded, so the caller
    answers ``outcome.data`` as it is and runs nothing."""

    payload: bytes = field(repr=False)
    issued_at: _dt.datetime
    expires_at: _dt.datetime
    request_state: str = field(repr=False)
    flow: Flow | None = None
    outcome: Outcome | None = None
    recording: bool = False


@dataclass(frozen=True)
class Recorded:
    """What a record returns: when the state's ledger entry, and with it the
    outcome, goes away."""

    kept_until: _dt.datetime


C = TypeVar("C", bound="SealerClient")
R = TypeVar("R")


class LoopBound(Generic[R]):
    """A connection (a grpc.aio channel, an httpx client) made on first use in
    the running event loop, and made again on first use in another one.

    A client is typically built at import time, with no loop running, and
    used in the loop that ``server.run(...)`` starts later: a grpc.aio channel
    made at import binds the import-time loop and every call fails "attached to
    a different loop", and an httpx pool keeps connections of a closed loop.
    So nothing is connected until a call runs; the connection of a loop that
    is gone is dropped, never awaited (its loop cannot run it)."""

    def __init__(self, make: Callable[[], R]) -> None:
        self._make = make
        self._loop: asyncio.AbstractEventLoop | None = None
        self._value: R | None = None

    def get(self) -> R:
        """The connection of the running loop."""
        loop = asyncio.get_running_loop()
        if self._value is None or self._loop is not loop:
            self._value, self._loop = self._make(), loop
        return self._value

    def take(self) -> R | None:
        """The connection of the running loop, forgotten (the caller closes
        it), or None when there is none."""
        value, loop = self._value, self._loop
        self._value = self._loop = None
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        return value if loop is running else None


class SealerClient:
    """A client of the sealer, over gRPC or REST: built by ``grpc_client`` or
    ``rest_client``, and the type to annotate either with. Safe for
    concurrent use by the tasks of one event loop; it may be built anywhere,
    at import time included: it connects on first use, in the running loop.

    The calls are made here, the same over both transports: the proto
    requests built, sent by the transport's ``_seal``, ``_open`` and
    ``_record``, the replies checked. A stand-in for tests subclasses it
    and overrides the calls it needs."""

    #: The sealer's scheme://host:port, for log lines (never a credential).
    url: str = ""

    async def seal(
        self,
        *,
        principal: str,
        request: Binding,
        payload: bytes = b"",
        ttl: float | None = None,
        one_time: bool = False,
        flow: FlowRequest | None = None,
        timeout: float | None = None,
    ) -> Sealed:
        """Returns a new requestState bound to the principal and the request."""
        res = await self._seal(seal_request_proto(principal, request, payload, ttl, one_time, flow), timeout)
        return sealed_of(res, flow is not None)

    async def open(
        self,
        request_state: str,
        *,
        principal: str,
        request: Binding,
        responded: Sequence[str] | None = None,
        record_outcome: bool = False,
        answers: bytes | None = None,
        timeout: float | None = None,
    ) -> Opened:
        """Checks a state against the retry presenting it and returns what was sealed;
        a refused state raises a SealerError whose ``rejected`` is true.

        ``record_outcome``: a one-time or latest-only state this open consumes
        is kept for an outcome (``Opened.recording``: the caller records it
        with ``record``), and a later retry of it that passes every check gets
        that outcome (``Opened.outcome``) instead of ALREADY_CONSUMED, or
        IN_PROGRESS when it waited for it in vain. Ignored for other states.

        ``answers``: with ``record_outcome``, the answers digest of the
        retry's inputResponses (``answers_digest``, 32 bytes; None sends
        none). The open that consumes the state keeps it, and a later open
        with other answers, or with none where it had some and the reverse,
        is OUTCOME_CONFLICT (rejected), never given the outcome."""
        res = await self._open(open_request_proto(request_state, principal, request, responded, record_outcome, answers), timeout)
        return opened_of(res, request_state)

    async def record(self, request_state: str, outcome: bytes, *, timeout: float | None = None) -> Recorded:
        """Records ``outcome``, the answer sent, for ``request_state`` exactly as an
        open with ``record_outcome`` consumed it (``Opened.recording``). The first
        record of a state wins (a later one is ALREADY_CONSUMED); an outcome over
        the sealer's limit (64 KiB by default) is INVALID_ARGUMENT, and retries
        of the state are then refused; empty bytes record that none will come.
        An outcome over ``MAX_OUTCOME``, which no sealer keeps and which may not
        even reach one, is recorded as none, then raises INVALID_ARGUMENT."""
        too_large = len(outcome) > MAX_OUTCOME
        res = await self._record(pb.RecordRequest(request_state=request_state, outcome=b"" if too_large else bytes(outcome)), timeout)
        if too_large:
            raise invalid_argument(f"sealer: an outcome of {len(outcome)} bytes, over the {MAX_OUTCOME} any sealer keeps: recorded as none")
        return recorded_of(res)

    async def _seal(self, msg: pb.SealRequest, timeout: float | None) -> pb.SealResponse:
        raise NotImplementedError

    async def _open(self, msg: pb.OpenRequest, timeout: float | None) -> pb.OpenResponse:
        raise NotImplementedError

    async def _record(self, msg: pb.RecordRequest, timeout: float | None) -> pb.RecordResponse:
        raise NotImplementedError

    async def close(self) -> None:
        """Closes the connections."""
        raise NotImplementedError

    async def __aenter__(self: C) -> C:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def input_keys(m: object) -> list[str] | None:
    """The keys of an inputRequests or inputResponses mapping, for ``FlowRequest.asked``
    and ``open(responded=...)``: [] for None (no inputResponses at all). Anything but
    a mapping has no keys to tell and gives None: not known, which opens no state
    whose round asked keys."""
    if m is None:
        return []
    if not isinstance(m, Mapping):
        return None
    return [str(k) for k in m]


def flow_after(opened: Opened | None, latest_only: bool = True, asked: Sequence[str] | None = None) -> FlowRequest:
    """The flow of the round after ``opened``: its continuation when it has a flow,
    else a new flow (the request's first round, or a state sealed without one)."""
    continues = opened.request_state if opened is not None and opened.flow is not None else ""
    return FlowRequest(continues=continues, latest_only=latest_only, asked=asked)


# The proto messages of a call, the same over gRPC and REST.


def binding_proto(b: Binding) -> pb.Binding:
    if isinstance(b, bytes):
        if len(b) != 32:
            raise invalid_argument("a digest is 32 bytes")
        return pb.Binding(digest=b)
    if not isinstance(b, Request):
        raise invalid_argument("request must be a Request or a 32-byte digest")
    if b.digest_on_server:
        params = struct_pb2.Struct()
        try:
            params.update(b.params)
        except (TypeError, ValueError) as e:
            raise invalid_argument("params must be JSON") from e
        return pb.Binding(method=b.method, params=params)
    return pb.Binding(digest=request_digest(b.method, b.params))


def _keys_proto(keys: Sequence[str] | None, what: str) -> pb.InputKeys | None:
    if keys is None:
        return None
    if isinstance(keys, str) or not all(isinstance(k, str) and well_formed(k) for k in keys):
        raise invalid_argument(f"{what} must be strings of valid Unicode")
    return pb.InputKeys(keys=list(keys))


def _duration(ttl: float | None) -> duration_pb2.Duration | None:
    if ttl is None:
        return None
    ms = round(ttl * 1000)
    if not ttl > 0 or ms <= 0:
        raise invalid_argument("ttl must be a positive number of seconds (whole milliseconds)")
    return duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def seal_request_proto(principal: str, request: Binding, payload: bytes, ttl: float | None, one_time: bool, flow: FlowRequest | None) -> pb.SealRequest:
    msg = pb.SealRequest(principal=principal, request=binding_proto(request), payload=bytes(payload), one_time=one_time)
    d = _duration(ttl)
    if d is not None:
        msg.ttl.CopyFrom(d)
    if flow is not None:
        msg.flow.CopyFrom(pb.FlowRequest(continues=flow.continues, latest_only=flow.latest_only))
        asked = _keys_proto(flow.asked, "asked")
        if asked is not None:
            msg.flow.asked.CopyFrom(asked)
    return msg


def open_request_proto(
    request_state: str, principal: str, request: Binding, responded: Sequence[str] | None, record_outcome: bool = False, answers: bytes | None = None
) -> pb.OpenRequest:
    msg = pb.OpenRequest(request_state=request_state, principal=principal, request=binding_proto(request), record_outcome=record_outcome)
    if answers is not None:
        if not isinstance(answers, bytes) or len(answers) != 32:
            raise invalid_argument("answers is a 32-byte answers digest")
        msg.answers = answers
    keys = _keys_proto(responded, "responded")
    if keys is not None:
        msg.responded.CopyFrom(keys)
    return msg


def sealed_of(res: pb.SealResponse, asked_flow: bool) -> Sealed:
    if not res.request_state or not res.HasField("expires_at"):
        raise _not_the_sealers()
    flow = _flow_of(res.flow) if res.HasField("flow") else None
    # A release without flows ignores the request and seals a plain state:
    # never hand that out as a round of a flow.
    if asked_flow and flow is None:
        raise SealerError(Reason.UNSPECIFIED, "sealer: the sealer sealed no flow (a release without flows?)", cause=NOT_THE_SEALER)
    return Sealed(request_state=res.request_state, expires_at=_time(res.expires_at), flow=flow)


def opened_of(res: pb.OpenResponse, request_state: str) -> Opened:
    # Every open the sealer answers has both times: a reply without them
    # (another service's 200, a proxy's page) never passes for an open.
    if not res.HasField("issued_at") or not res.HasField("expires_at"):
        raise _not_the_sealers()
    outcome = None
    if res.HasField("outcome"):
        # An outcome answers a retry, which consumes nothing and has no payload.
        if not res.outcome.HasField("recorded_at") or res.recording or res.payload:
            raise _not_the_sealers()
        outcome = Outcome(data=res.outcome.data, recorded_at=_time(res.outcome.recorded_at))
    return Opened(
        payload=res.payload,
        issued_at=_time(res.issued_at),
        expires_at=_time(res.expires_at),
        request_state=request_state,
        flow=_flow_of(res.flow) if res.HasField("flow") else None,
        outcome=outcome,
        recording=res.recording,
    )


def recorded_of(res: pb.RecordResponse) -> Recorded:
    if not res.HasField("kept_until"):
        raise _not_the_sealers()
    return Recorded(kept_until=_time(res.kept_until))


def _not_the_sealers() -> SealerError:
    return SealerError(Reason.UNSPECIFIED, "sealer: the reply is not the sealer's", cause=NOT_THE_SEALER)


def _flow_of(f: pb.Flow) -> Flow:
    if len(f.id) != 16 or f.round < 1 or not f.HasField("deadline"):
        raise SealerError(Reason.UNSPECIFIED, "sealer: malformed flow in the sealer's reply", cause=NOT_THE_SEALER)
    return Flow(id=f.id, round=f.round, deadline=_time(f.deadline), latest_only=f.latest_only)


def _time(t: timestamp_pb2.Timestamp) -> _dt.datetime:
    return t.ToDatetime(tzinfo=_dt.timezone.utc)


def base_url(url: str, tls: object | None, token: object | None = None) -> tuple[str, bool]:
    """The scheme and host:port of a sealer URL, and whether it is TLS. A path
    is refused (the API's paths are fixed), and so are TLS options with
    http://, which would send the token, the principals and the payloads in
    the clear, and a token with http:// to a host off loopback."""
    u = urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname or u.port is None or u.path not in ("", "/") or u.query or u.fragment:
        raise ValueError("the sealer's URL must be http://host:port or https://host:port, with no path")
    if u.scheme == "http" and tls is not None:
        raise ValueError("TLS options need an https:// URL")
    if u.scheme == "http" and token is not None and not is_loopback(u.hostname):
        raise ValueError(
            f"refusing to send a bearer token over plaintext http:// to {u.hostname}, which is not loopback: "
            "use https:// (with tls=TLS(...)) for a sealer on another host"
        )
    return f"{u.scheme}://{u.netloc}", u.scheme == "https"


def is_loopback(host: str) -> bool:
    """Whether host is this machine by its spelling alone: 127.0.0.0/8, ::1
    (also IPv4-mapped) or the name localhost. Other names are not resolved: a
    name may point elsewhere tomorrow."""
    if host.lower() == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


async def token_of(token: Token | None) -> str | None:
    if token is None or isinstance(token, str):
        return token
    t = token()
    if isinstance(t, Awaitable):
        return await t
    return t
