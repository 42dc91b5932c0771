"""The sealer as the requestState boundary of the official MCP SDK (``mcp`` 2.x:
``MCPServer`` and the low-level ``Server``) and of FastMCP.

    states = sealed_request_state(server, grpc_client("http://127.0.0.1:7443"))

takes the place of the SDK's ``RequestStateBoundary`` in the server's
middleware. It binds every state to the caller's principal, which it never
guesses: the SDK's authenticated identity on a server with the SDK's own
auth (``from_access_token``: never the OAuth client alone), else what
``principal=`` returns, else (``allow_anonymous=True``) ``ANONYMOUS`` for
all; with none of these it refuses to install.

Handlers keep the SDK's idiom: they return
``InputRequiredResult(input_requests=..., request_state="...")`` and read
``ctx.request_state`` on the retry. The middleware seals every outgoing
``request_state`` with the sealer, bound to the principal, to the request's
method, name and arguments (or uri), and to the keys of the
``input_requests`` it returns with; and opens every echoed state with the
retry's own principal, request and ``inputResponses`` keys before any handler
runs, so a handler only ever sees a state it sealed for this very request.

Every state is a round of a flow (FORMAT.md, "Flows"): a handler that asks
again on a retry whose state opened seals the next round of that flow, so
the rounds of one request share one deadline and a round limit; with
``latest_only`` (the default) a round once answered never opens again (no
rewind, no fork). ``one_time`` makes every state open at most once;
``states.input_required(...)`` sets it, or the TTL, for one round.

A retry's params are validated as the SDK will validate them before its
state is opened: a retry the SDK would refuse as invalid params never spends
its round. What the MCP client sees of a failure, with ``data.reason``:

- a refused state: -32602 "Invalid or expired requestState",
  ``invalid_request_state``, as the SDK answers it;
- the sealer unavailable (unreachable, too slow, its ledger or keys down):
  -32603 "requestState sealer unavailable", ``sealer_unavailable``, after
  retries within one ``deadline`` (5 s by default) for all of them;
- the way to the sealer wrong (credentials refused, TLS, an address that is
  not the sealer's): -32603 "requestState sealer misconfigured",
  ``sealer_misconfigured``, at once;
- a retry that came while the handler of the state's first open still ran,
  and waited for its answer in vain: -32603 "Request still in progress",
  ``in_progress`` (retry later: the answer will be there);
- a retry of a state whose open ran the handler with other
  ``inputResponses`` (the sealer's OUTCOME_CONFLICT): -32602 "invalid
  requestState: answered before for other inputResponses",
  ``outcome_conflict`` (start over: the recorded answer is not this
  retry's).

Neither the sealer's address, nor its message, nor its reason reaches the MCP
client: each failure is logged once on this module's logger, with the
sealer's address and the reason or cause. On an open the handler never runs;
on a seal the handler has run and its ``input_required`` result is dropped.

Recorded outcomes (README, "Recorded outcomes"): every open asks the sealer
to keep the state's answer (``record_outcomes``, on by default), which it
does for a one-time state or a latest-only round. The open that consumes
such a state runs the handler, and the answer sent, result or JSON-RPC error
(as ``{"result": ...}`` or ``{"error": ...}``, the one form of every
adapter), is then recorded in the background: a failed
record is logged and never holds up or changes the answer. A retry of that
state that passes every check (the same principal, request and input keys)
is answered with the recorded answer under its own id, and the handler does
not run again; any other retry is refused as before. Every open sends the
answers digest of the retry's ``inputResponses`` as received (``_meta`` of
each response aside: FORMAT.md, "The answers digest"), so that a retry
answering otherwise than the open that ran the handler (round 2 of a booking
retried with seat "1A" after it booked "12A") is refused with
``outcome_conflict``, never given that answer.

Lifetime: the client is built anywhere, at import time included, and binds
to the running event loop on first use (``SealerClient``);
``sealed_request_state`` wraps the server's lifespan, so that at start the
sealer is asked for one seal (does it answer, are the credentials accepted:
a failure is logged with the sealer's address and reason, and stops the
server unless ``check_at_start=False``), and at the end the client's
connections of that loop are closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, NoReturn, TypeVar

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.request_state import RequestStateBoundary, authenticated_principal
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, ErrorData, InputRequiredResult
from mcp_types.methods import INPUT_REQUIRED_METHODS, is_input_required, parse_client_request, validate_client_request
from pydantic import BaseModel, ValidationError

from . import _answers
from ._answers_digest import answers_digest
from ._client import Opened, Outcome, SealerClient, flow_after, input_keys
from ._digest import look_alike, request_digest
from ._errors import DEADLINE, Reason, SealerError

__all__ = [
    "ANONYMOUS",
    "DEFAULT_DEADLINE",
    "OUTCOME_CONFLICT",
    "REQUEST_IN_PROGRESS",
    "RESERVED_PREFIX",
    "SEALER_MISCONFIGURED",
    "SEALER_UNAVAILABLE",
    "SealedRequestState",
    "SealerUnready",
    "from_access_token",
    "sealed_request_state",
]

logger = logging.getLogger(__name__)

#: The prefix of the principals this package gives callers itself: a
#: principal function's result that starts with it is refused, so no caller
#: a principal function names can share them.
RESERVED_PREFIX = "mcp-sealer:"

#: The principal of unauthenticated callers where the author allowed them
#: (``allow_anonymous=True``): every such caller shares it, and no principal
#: function can return it.
ANONYMOUS = RESERVED_PREFIX + "anonymous"

#: The bound, in seconds, on each seal and each open of the middleware,
#: retries included.
DEFAULT_DEADLINE = 5.0

# The start-up check's seal: a principal no caller can have.
_CHECK_PRINCIPAL = RESERVED_PREFIX + "start-up-check"
_CHECK_BINDING = request_digest("tools/call", {"name": _CHECK_PRINCIPAL})

_NO_PRINCIPAL = (
    "sealed_request_state: say who the caller is: pass principal= (a function of the request context "
    "returning the caller's identity from your authentication), configure the SDK's own authentication "
    "on the server (token_verifier and auth on MCPServer, auth on FastMCP), or pass allow_anonymous=True "
    "if every unauthenticated caller may share one principal (and so each other's states)"
)

Principal = Callable[[ServerRequestContext[Any, Any]], "str | Awaitable[str | None] | None"]
T = TypeVar("T")


def from_access_token(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The principal function of the SDK's own authentication, the default
    there: the access token the SDK verified for the request, or None when
    it came without one (over stdio, say).

    A token whose verifier set a ``subject`` is the SDK's
    ``authenticated_principal`` (its client, issuer and subject). A token
    without one (client credentials, many introspection setups) is
    ``"token:"`` and the hex SHA-256 of the token, as the TypeScript codec's
    ``fromAuthInfo``: never its client id alone, which every user of one
    OAuth client shares, so that one of them could open another's state.
    Such a state does not open under a refreshed token; a principal function
    of your own can bind a stabler identity the verifier returns."""
    token = get_access_token()
    if token is None:
        return None
    if token.subject:
        return authenticated_principal(ctx)
    if not token.token:
        # Nothing names the caller: refused (a raising principal function fails closed).
        raise ValueError("the verified access token has neither a subject nor a token")
    return "token:" + hashlib.sha256(token.token.encode("utf-8")).hexdigest()


@dataclasses.dataclass
class _Round:
    """What the middleware knows of the request being handled: the state it
    opened, and what the handler asked of the round it returns."""

    binding: bytes | SealerError
    opened: Opened | None = None
    # The caller's principal, or why it has none: asked once a round.
    principal: str | None = None
    no_principal: str | None = None
    one_time: bool | None = None
    ttl_seconds: float | None = None


_current: contextvars.ContextVar[_Round] = contextvars.ContextVar("mcp_sealer_round")

# The Python (pydantic field) names of requestState and inputResponses.
_SHADOW_MEMBERS = ("request_state", "input_responses")


def _binding_of(method: str, params: Mapping[str, Any]) -> bytes | SealerError:
    """The request digest of the request as received, or why the digest refuses it."""
    try:
        return request_digest(method, params)
    except SealerError as e:
        return e


def _reject(method: str, why: str) -> NoReturn:
    """Refuses a state as the SDK's boundary does: the same wire error for every cause."""
    logger.warning("requestState rejected on %s: %s", method, why)
    raise MCPError(code=INVALID_PARAMS, message="Invalid or expired requestState", data={"reason": "invalid_request_state"})


#: ``data.reason`` of the -32603 answered when the sealer could not answer.
SEALER_UNAVAILABLE = "sealer_unavailable"
#: ``data.reason`` of the -32603 answered when the way to the sealer is wrong.
SEALER_MISCONFIGURED = "sealer_misconfigured"
#: ``data.reason`` of the -32603 answered to a retry that came while the
#: handler of its state's first open still ran (the sealer's IN_PROGRESS).
REQUEST_IN_PROGRESS = "in_progress"
#: ``data.reason`` of the -32602 answered to a retry whose state an open
#: consumed with other inputResponses (the sealer's OUTCOME_CONFLICT).
OUTCOME_CONFLICT = "outcome_conflict"


class _Failed(MCPError):
    """A request failed closed by the middleware (a state it could not seal
    or open), not answered by the handler: never recorded as an outcome."""


def _fail(method: str, what: str, err: BaseException, sealer: object = None) -> NoReturn:
    """Fails a request closed: the cause logged once, the MCP client told only
    which of the documented failures it is."""
    where = getattr(sealer, "url", "") or "the sealer"
    if isinstance(err, SealerError):
        if err.unavailable:
            logger.error("requestState %s failed on %s: sealer at %s unavailable: %s (%s)", what, method, where, err.why, err)
            raise _Failed(code=INTERNAL_ERROR, message="requestState sealer unavailable", data={"reason": SEALER_UNAVAILABLE})
        logger.error("requestState %s failed on %s: sealer at %s misconfigured: %s (%s)", what, method, where, err.why, err)
        raise _Failed(code=INTERNAL_ERROR, message="requestState sealer misconfigured", data={"reason": SEALER_MISCONFIGURED})
    logger.error("requestState %s failed on %s: %s", what, method, err)
    raise _Failed(code=INTERNAL_ERROR, message="Internal error")


def _replay(method: str, outcome: Outcome) -> HandlerResult:
    """The answer recorded for a retry's state, to send under the retry's id:
    its result, or its error raised."""
    try:
        answer = _answers.decode(outcome.data)
    except ValueError as e:
        logger.error("a retry on %s: the outcome recorded for its state is not an answer (%s)", method, e)
        raise MCPError(code=INTERNAL_ERROR, message="Internal error") from None
    logger.info("a retry on %s answered with the answer recorded at %s; the handler did not run", method, outcome.recorded_at.isoformat())
    if answer.error is not None:
        raise MCPError(code=answer.error["code"], message=answer.error["message"], data=answer.error.get("data"))
    return answer.result


def _wire(result: HandlerResult) -> dict[str, Any]:
    """result as the SDK puts it on the wire (``mcp.server.runner._dump_result``),
    which the middleware returns and records, so that both are one."""
    if result is None:
        return {}
    if isinstance(result, BaseModel):
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dict(result)


def _outcome_of(method: str, encode: Callable[[], bytes]) -> bytes:
    """The outcome encode makes, or none (empty: retries are refused) for an
    answer that is not JSON, which no retry could be answered with."""
    try:
        return encode()
    except (TypeError, ValueError) as e:
        logger.error("the answer to %s is not JSON (%s): recorded as none", method, e)
        return b""


class SealerUnready(RuntimeError):
    """The start-up check failed: the sealer did not answer, or refused the credentials."""


class SealedRequestState:
    """A server middleware that seals and opens ``requestState`` with the sealer.

    Install it with ``sealed_request_state``, which also removes the SDK's own
    boundary. ``principal`` says who the request comes from: a function of the
    request context (it may be async) returning the caller's identity, or None
    for an unauthenticated caller; it runs at most once a round, and a result
    that starts with ``RESERVED_PREFIX`` is refused. An unauthenticated caller
    is refused unless ``allow_anonymous``, which makes every such caller
    ``ANONYMOUS``. Without ``principal`` (only with ``allow_anonymous``, else
    ValueError) ``from_access_token`` is asked.

    ``deadline`` (seconds) bounds each seal, each open and each record, every
    attempt and backoff included: a hung sealer costs a request at most that
    long (a record costs it nothing: it runs beside the answer, in a task of
    its own).
    ``record_outcomes`` (default True) records the answer to every state that
    opens once (one-time, or a latest-only round) so that a retry of it gets
    the same answer, the handler not run again, unless its inputResponses
    differ from those the handler ran with (``OUTCOME_CONFLICT``); False
    opens without, and a retry of a state consumed is refused
    (ALREADY_CONSUMED).
    ``attempts`` and ``backoff_seconds`` shape the retries of a failure that
    may pass (``SealerError.retryable``) within it. ``check_at_start``: see
    ``check``.
    """

    def __init__(
        self,
        sealer: SealerClient,
        *,
        principal: Principal | None = None,
        allow_anonymous: bool = False,
        ttl_seconds: float | None = None,
        one_time: bool = False,
        flows: bool = True,
        latest_only: bool = True,
        attempts: int = 3,
        backoff_seconds: float = 0.05,
        deadline: float = DEFAULT_DEADLINE,
        check_at_start: bool = True,
        record_outcomes: bool = True,
    ) -> None:
        if ttl_seconds is not None and not ttl_seconds > 0:
            raise ValueError("ttl_seconds must be a positive number of seconds")
        if principal is None and not allow_anonymous:
            raise ValueError(_NO_PRINCIPAL)
        if not deadline > 0:
            raise ValueError("deadline must be a positive number of seconds")
        self.sealer = sealer
        self._principal: Principal = principal if principal is not None else from_access_token
        self._allow_anonymous = allow_anonymous
        self._ttl = ttl_seconds
        self._one_time = one_time
        self._flows = flows
        self._latest_only = latest_only
        self._attempts = max(1, attempts)
        self._backoff = backoff_seconds
        self._deadline = deadline
        self.check_at_start = check_at_start
        self._record_outcomes = record_outcomes
        # The records on their way to the sealer, each beside the answer it
        # records: kept here so that none is collected unfinished, and
        # awaited at the server's end (flush).
        self._records: set[asyncio.Task[None]] = set()
        # The low-level server whose handlers will read the params (set by
        # sealed_request_state): their params types are checked before a
        # state is opened.
        self._server: Server[Any] | None = None

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        # A notification has no handler to protect and no result to seal:
        # opening its state would only spend a round.
        if ctx.method not in INPUT_REQUIRED_METHODS or ctx.request_id is None:
            return await call_next(ctx)
        params: Mapping[str, Any] = ctx.params or {}
        # The MRTR members by their Python names: FastMCP reads the retry's
        # params again with pydantic, which takes field names as well as the
        # wire's, so a request_state there would reach ctx.request_state
        # without ever being opened. A look-alike of one (the digest's rule
        # for salient names) is refused too, for a decoder that folds names.
        for member in params:
            for name in _SHADOW_MEMBERS:
                if member == name or (isinstance(member, str) and look_alike(member, name)):
                    _reject(ctx.method, f"a params member {member[:64]!r}, the Python name of an MRTR member or a look-alike of it")
        # The binding is taken before any handler runs: the state sealed at
        # the end binds the request as received, whatever a handler does to
        # the params it is given.
        round_ = _Round(binding=_binding_of(ctx.method, params))
        wire = params.get("requestState")
        # An explicit JSON null counts as absent, as in the SDK: stripping
        # the member is in any client's power.
        if wire is not None:
            if isinstance(round_.binding, SealerError):
                _reject(ctx.method, f"params the digest refuses ({round_.binding})")
            round_.opened = await self._open(ctx, round_, round_.binding, params, wire)
            if round_.opened.outcome is not None:
                return _replay(ctx.method, round_.opened.outcome)
            if round_.opened.recording:
                return await self._recorded(ctx.method, round_.opened, self._serve(ctx, call_next, round_))
        return await self._serve(ctx, call_next, round_)

    async def _serve(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, round_: _Round) -> HandlerResult:
        """Runs the handler, given the plaintext of the state opened, and seals the state it returns."""
        if round_.opened is not None:
            try:
                plaintext = round_.opened.payload.decode("utf-8")
            except UnicodeDecodeError:
                _reject(ctx.method, "the payload is not text (sealed by something other than this middleware)")
            ctx = dataclasses.replace(ctx, params={**(ctx.params or {}), "requestState": plaintext})
        token = _current.set(round_)
        try:
            result = await call_next(ctx)
        finally:
            _current.reset(token)
        return await self._seal_result(ctx, result, round_)

    async def _recorded(self, method: str, opened: Opened, answer: Awaitable[HandlerResult]) -> HandlerResult:
        """Awaits the answer to a state opened for an outcome and records it as
        it goes out: the result, or the JSON-RPC error the SDK sends for what
        was raised (the handler may have acted before it failed)."""
        try:
            result = await answer
            if isinstance(result, ErrorData):
                raise MCPError.from_error_data(result)
        except _Failed:
            # The next round's state could not be sealed, a failure that may
            # pass: none is recorded, so that a retry is refused at once and
            # the client starts the request over, rather than getting this
            # failure again for as long as the state's entry lives.
            self._record_later(method, opened, b"")
            raise
        except Exception as e:
            error = handler_exception_to_error_data(e)
            if error is None:
                # Answered as the 2026-07-28 HTTP transport answers it, here
                # on every transport: the answer recorded is the answer sent.
                logger.exception("the handler of %s raised", method)
                error = ErrorData(code=INTERNAL_ERROR, message="Internal server error")
                self._record_later(method, opened, _outcome_of(method, functools.partial(_answers.encode_error, error.code, error.message)))
                raise MCPError.from_error_data(error) from None
            self._record_later(method, opened, _outcome_of(method, functools.partial(_answers.encode_error, error.code, error.message, error.data)))
            raise
        except BaseException:
            # Cancelled: no answer goes out, so none is recorded, and a retry
            # is refused at once instead of waiting for one.
            self._record_later(method, opened, b"")
            raise
        sent = _wire(result)
        self._record_later(method, opened, _outcome_of(method, functools.partial(_answers.encode_result, sent)))
        return sent

    def _record_later(self, method: str, opened: Opened, outcome: bytes) -> None:
        """Records outcome for the state opened in a task of its own: the answer
        goes out without waiting for it."""
        try:
            task = asyncio.get_running_loop().create_task(self._record(method, opened.request_state, outcome))
        except RuntimeError:  # the loop is closing: nothing can be sent
            logger.error("the answer to %s was not recorded: the event loop is closing", method)
            return
        self._records.add(task)
        task.add_done_callback(self._records.discard)

    async def _record(self, method: str, state: str, outcome: bytes) -> None:
        where = getattr(self.sealer, "url", "") or "the sealer"
        try:
            await self._retrying(lambda timeout: self.sealer.record(state, outcome, timeout=timeout))
        except SealerError as e:
            # The answer is sent all the same: a retry of its state is
            # refused (or waits out the sealer's outcome-wait first), never
            # served twice.
            logger.error("the answer to %s (%d bytes) was not recorded: the sealer at %s: %s (%s)", method, len(outcome), where, e.why, e)
        except Exception:
            logger.exception("the answer to %s was not recorded", method)

    async def flush(self) -> None:
        """Waits until the answers on their way to the sealer are recorded (or
        failed, each within ``deadline``): done at the server's end; a test
        calls it before it counts what was recorded."""
        loop = asyncio.get_running_loop()
        while pending := [t for t in self._records if t.get_loop() is loop]:
            await asyncio.gather(*pending, return_exceptions=True)

    async def _open(self, ctx: ServerRequestContext[Any, Any], round_: _Round, digest: bytes, params: Mapping[str, Any], wire: object) -> Opened:
        # Every state the sealer writes is base64url: anything else is
        # refused here, as the SDK would, not sent.
        if not isinstance(wire, str) or not wire.isascii():
            _reject(ctx.method, "a requestState that is not an ASCII string")
        self._check_params(ctx, params)
        principal = await self._principal_of(ctx, round_, lambda why: _reject(ctx.method, why))
        answers = None
        if self._record_outcomes:
            # The answers the handler acts on: the inputResponses its params
            # are made from, as received.
            try:
                answers = answers_digest(params.get("inputResponses"))
            except SealerError as e:
                _reject(ctx.method, f"inputResponses the answers digest refuses ({e})")
        try:
            return await self._retrying(
                lambda timeout: self.sealer.open(
                    wire,
                    principal=principal,
                    request=digest,
                    responded=input_keys(params.get("inputResponses")),
                    record_outcome=self._record_outcomes,
                    answers=answers,
                    timeout=timeout,
                )
            )
        except SealerError as e:
            if e.reason is Reason.OUTCOME_CONFLICT:
                logger.warning("requestState open on %s: answered before for other inputResponses (OUTCOME_CONFLICT); answered outcome_conflict", ctx.method)
                raise MCPError(
                    code=INVALID_PARAMS, message="invalid requestState: answered before for other inputResponses", data={"reason": OUTCOME_CONFLICT}
                ) from None
            # INVALID_ARGUMENT on an open is the state's own fault (its size,
            # its encoding): the client's to start over, never a sealer fault.
            if e.rejected or e.reason is Reason.INVALID_ARGUMENT:
                _reject(ctx.method, e.reason.name)
            if e.reason is Reason.IN_PROGRESS:
                logger.warning("requestState open on %s: its first open's handler still runs (IN_PROGRESS); answered in_progress", ctx.method)
                raise MCPError(code=INTERNAL_ERROR, message="Request still in progress", data={"reason": REQUEST_IN_PROGRESS}) from None
            _fail(ctx.method, "open", e, self.sealer)

    def _check_params(self, ctx: ServerRequestContext[Any, Any], params: Mapping[str, Any]) -> None:
        """Validates the params as the SDK will once the middleware chain ran:
        the wire surface of the request, then the params type of its handler
        (with the SDK's own models). A retry the SDK would refuse as invalid
        params is refused here with the SDK's own error, before its state is
        opened: opening would spend its round (latest-only, one-time) and the
        honest retry after it would be refused."""
        try:
            if self._server is None:
                parse_client_request(ctx.method, ctx.protocol_version, params)
                return
            validate_client_request(ctx.method, ctx.protocol_version, params)
            entry = self._server.get_request_handler(ctx.method)
            if entry is None:
                raise KeyError(ctx.method)
            entry.params_type.model_validate(params, by_name=False)
        except KeyError:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=ctx.method) from None
        except ValidationError:
            # Raised as it is: the SDK answers it -32602 "Invalid request
            # parameters", as it would a moment later.
            logger.info("params of %s refused before their requestState was opened", ctx.method)
            raise

    async def _seal_result(self, ctx: ServerRequestContext[Any, Any], result: HandlerResult, round_: _Round) -> HandlerResult:
        # Spec-path results arrive as wire mappings; a short-circuiting
        # middleware may return a model.
        if not is_input_required(result):
            return result
        if isinstance(result, Mapping):
            state, asked = result.get("requestState"), result.get("inputRequests")
        else:
            state, asked = result.request_state, result.input_requests
        if state is None:
            return result
        if not isinstance(state, str):
            _fail(ctx.method, "seal", TypeError("the handler's request_state is not a str"))
        sealed = await self._seal(ctx, state, asked, round_)
        if isinstance(result, Mapping):
            return {**result, "requestState": sealed}
        return result.model_copy(update={"request_state": sealed})

    async def _seal(self, ctx: ServerRequestContext[Any, Any], state: str, asked: object, round_: _Round) -> str:
        if isinstance(round_.binding, SealerError):
            _fail(ctx.method, "seal", ValueError(str(round_.binding)))
        digest = round_.binding
        principal = await self._principal_of(ctx, round_, lambda why: _fail(ctx.method, "seal", ValueError(why)))
        flow = None
        if self._flows:
            # A round that asks nothing binds no keys at all: its retry may
            # answer none (input_keys(None) is []).
            flow = flow_after(round_.opened, latest_only=self._latest_only, asked=input_keys(asked))
        one_time = self._one_time if round_.one_time is None else round_.one_time
        ttl = self._ttl if round_.ttl_seconds is None else round_.ttl_seconds
        try:
            sealed = await self._retrying(
                lambda timeout: self.sealer.seal(
                    principal=principal,
                    request=digest,
                    payload=state.encode("utf-8"),
                    ttl=ttl,
                    one_time=one_time,
                    flow=flow,
                    timeout=timeout,
                )
            )
        except UnicodeEncodeError as e:
            _fail(ctx.method, "seal", e)
        except SealerError as e:
            # A flow past its deadline or out of rounds: the client starts over.
            if e.rejected:
                _reject(ctx.method, e.reason.name)
            _fail(ctx.method, "seal", e, self.sealer)
        return sealed.request_state

    async def _principal_of(self, ctx: ServerRequestContext[Any, Any], round_: _Round, fail: Callable[[str], NoReturn]) -> str:
        """The caller's principal: the principal function runs once a round,
        and the state opened and the state sealed bind the same answer."""
        if round_.principal is None and round_.no_principal is None:
            round_.principal, round_.no_principal = await self._ask_principal(ctx)
        if round_.principal is None:
            fail(round_.no_principal or "no principal")
        return round_.principal

    async def _ask_principal(self, ctx: ServerRequestContext[Any, Any]) -> tuple[str | None, str | None]:
        """The principal, or None and why there is none."""
        try:
            p = self._principal(ctx)
            if inspect.isawaitable(p):
                p = await p
        except Exception:  # deny on error: a raising principal function fails closed
            logger.exception("the principal function raised on %s", ctx.method)
            return None, "principal function error"
        if p is None:
            if self._allow_anonymous:
                return ANONYMOUS, None
            return None, "an unauthenticated caller, and allow_anonymous is not set"
        if not isinstance(p, str) or p == "":
            return None, "the principal function returned no principal"
        if p.startswith(RESERVED_PREFIX):
            return None, f"the principal function returned a principal in the reserved prefix {RESERVED_PREFIX!r}"
        return p, None

    async def _retrying(self, call: Callable[[float], Awaitable[T]]) -> T:
        """Calls call(timeout) until it succeeds, fails for good, runs out of
        attempts or of the deadline, each attempt given what is left of it."""
        loop = asyncio.get_running_loop()
        end = loop.time() + self._deadline
        for i in range(1, self._attempts + 1):
            left = end - loop.time()
            try:
                if left <= 0:
                    raise SealerError(Reason.UNSPECIFIED, "sealer: deadline exceeded", cause=DEADLINE)
                # The transport's own deadline too: a call never outlives left.
                return await asyncio.wait_for(call(left), left)
            except asyncio.TimeoutError:
                err = SealerError(Reason.UNSPECIFIED, "sealer: deadline exceeded", cause=DEADLINE)
                if i >= self._attempts or end - loop.time() <= 0:
                    raise err from None
            except SealerError as e:
                if not e.retryable or i >= self._attempts:
                    raise
            pause = min(self._backoff * 2 ** (i - 1), end - loop.time())
            if pause <= 0:
                raise SealerError(Reason.UNSPECIFIED, "sealer: deadline exceeded", cause=DEADLINE)
            await asyncio.sleep(pause)
        raise AssertionError("unreachable")

    async def check(self) -> None:
        """Asks the sealer for one seal, as at start: does it answer within the
        deadline, are the credentials accepted, is it the sealer. A failure is
        logged (error) with the sealer's address and reason, then raises
        ``SealerUnready``; success is logged (info) with the address.

        The state sealed is bound to a reserved principal no caller can have
        and is dropped: it opens for no one."""
        where = getattr(self.sealer, "url", "") or "the sealer"
        try:
            await self._retrying(lambda timeout: self.sealer.seal(principal=_CHECK_PRINCIPAL, request=_CHECK_BINDING, ttl=None, timeout=timeout))
        except SealerError as e:
            kind = "unavailable" if e.unavailable else "misconfigured"
            logger.error("the sealer at %s failed the start-up check: %s: %s (%s)", where, kind, e.why, e)
            raise SealerUnready(f"the sealer at {where} failed the start-up check: {kind}: {e.why} ({e})") from None
        logger.info("the sealer at %s answers and accepts this server's credentials", where)

    def input_required(
        self,
        input_requests: Mapping[str, Any],
        request_state: str,
        *,
        one_time: bool | None = None,
        ttl_seconds: float | None = None,
    ) -> InputRequiredResult:
        """The ``input_required`` result asking ``input_requests``, carrying
        ``request_state`` for the next round; the middleware seals it when the
        handler returns it, with ``one_time`` and ``ttl_seconds`` for this round
        if given. Call it from a handler the middleware is serving."""
        round_ = _current.get(None)
        if round_ is None:
            raise RuntimeError("input_required called outside a request this middleware serves")
        round_.one_time, round_.ttl_seconds = one_time, ttl_seconds
        return InputRequiredResult(input_requests=dict(input_requests), request_state=request_state)

    def opened(self) -> Opened | None:
        """The state the middleware opened for the request being handled (its flow
        and times; the payload is the handler's ``ctx.request_state``), or None."""
        round_ = _current.get(None)
        return round_.opened if round_ is not None else None


def sealed_request_state(server: object, sealer: SealerClient, **options: Any) -> SealedRequestState:
    """Installs a ``SealedRequestState`` (``options`` are its keyword arguments)
    on ``server`` — an ``MCPServer``, a low-level ``Server`` or a ``FastMCP`` —
    in the place of the SDK's ``RequestStateBoundary``, which it removes, so
    that no state is sealed twice or under the SDK's own per-process key.
    Returns the middleware, whose ``input_required`` handlers may call.

    Who the caller is must be decided: ``principal=``, or a server with the
    SDK's own authentication (``MCPServer`` with ``token_verifier`` and
    ``auth``, ``FastMCP`` with ``auth``), whose authenticated identity is
    then the principal (``from_access_token``), or ``allow_anonymous=True``.
    Otherwise it raises ValueError and installs nothing."""
    if options.get("principal") is None and _sdk_authenticates(server):
        options["principal"] = from_access_token
    mw = SealedRequestState(sealer, **options)
    mw._server = _lowlevel_of(server)
    if mw._server is not None:
        _wrap_lifespan(mw._server, mw)
    chain = _middleware_of(server)
    at = next((i for i, m in enumerate(chain) if isinstance(m, RequestStateBoundary)), None)
    chain[:] = [m for m in chain if not isinstance(m, RequestStateBoundary | SealedRequestState)]
    if at is None:
        # The low-level Server installs no boundary: place it where the SDK
        # would, after its built-ins (OpenTelemetry) and before the user's.
        at = sum(1 for m in chain if type(m).__module__.startswith(("mcp.", "fastmcp.")))
    chain.insert(min(at, len(chain)), mw)
    return mw


def _wrap_lifespan(lowlevel: Server[Any], mw: SealedRequestState) -> None:
    """Makes the low-level server's lifespan (which MCPServer, FastMCP and the
    streamable-HTTP session manager all enter) check the sealer at start, when
    ``mw.check_at_start``, and close the client's connections at the end. A
    second install replaces the first's wrapper, never stacks on it."""
    inner = getattr(lowlevel.lifespan, "_mcp_sealer_inner", lowlevel.lifespan)

    @contextlib.asynccontextmanager
    async def lifespan(app: Server[Any]) -> AsyncIterator[Any]:
        if mw.check_at_start:
            await mw.check()
        try:
            async with inner(app) as state:
                yield state
        finally:
            await mw.flush()
            await mw.sealer.close()

    lifespan._mcp_sealer_inner = inner  # type: ignore[attr-defined]
    lowlevel.lifespan = lifespan


def _sdk_authenticates(server: object) -> bool:
    """Whether server has the SDK's own authentication configured, which
    requires a bearer token on its HTTP transport and puts the verified
    identity where ``from_access_token`` reads it. The low-level
    ``Server`` takes its auth only when its app is built: never judged so."""
    if isinstance(server, MCPServer):
        return server.settings.auth is not None
    # FastMCP (not imported: an optional dependency) keeps its provider in .auth.
    return getattr(server, "_mcp_server", None) is not None and getattr(server, "auth", None) is not None


def _middleware_of(server: object) -> list[Any]:
    # FastMCP keeps the SDK's low-level server (and its middleware) apart
    # from its own middleware list.
    lowlevel = getattr(server, "_mcp_server", None)
    chain = getattr(lowlevel if lowlevel is not None else server, "middleware", None)
    if not isinstance(chain, list):
        raise TypeError("sealed_request_state: server must be an MCPServer, a low-level mcp Server or a FastMCP")
    return chain


def _lowlevel_of(server: object) -> Server[Any] | None:
    """The low-level server that runs server's handlers, or None when it cannot
    be found (then the params are checked against the SDK's own models of
    each method, which the built-in handlers use)."""
    if isinstance(server, Server):
        return server
    # Neither MCPServer nor FastMCP names it publicly.
    for name in ("_lowlevel_server", "_mcp_server"):
        lowlevel = getattr(server, name, None)
        if isinstance(lowlevel, Server):
            return lowlevel
    return None
