"""The middleware's decisions that need no sealer: who the principal is
(issue 40, finding 7), how often it is asked (issue 44), and that params the
SDK will refuse never open a state (issue 40, finding 10). A sealer in
memory stands for the real one, whose refusals the integration tests show."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastmcp import FastMCP
from fastmcp.server.auth.providers.jwt import StaticTokenVerifier
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams, CallToolResult
from pydantic import AnyHttpUrl, ValidationError

from mcp_sealer import Opened, Outcome, Reason, Recorded, Sealed, SealerError
from mcp_sealer import mcp as sealer_mcp
from mcp_sealer.mcp import SealedRequestState, sealed_request_state

NOW = dt.datetime.now(dt.timezone.utc)
PROTOCOL = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientInfo": {"name": "unit", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}
ASK = {"method": "elicitation/create", "params": {"mode": "form", "message": "Sure?", "requestedSchema": {"type": "object", "properties": {}}}}
CONFIRM = {"confirm": {"action": "accept", "content": {"ok": True}}}


class MemorySealer:
    """Seals in memory: a state opens for the principal it was sealed for. Records every call's principal."""

    def __init__(self) -> None:
        self.states: dict[str, tuple[str, bytes]] = {}
        self.calls: list[tuple[str, str]] = []

    async def seal(self, *, principal: str, payload: bytes = b"", **_: Any) -> Sealed:
        self.calls.append(("seal", principal))
        state = f"S{len(self.states)}"
        self.states[state] = (principal, payload)
        return Sealed(state, NOW)

    async def open(self, request_state: str, *, principal: str, **_: Any) -> Opened:
        self.calls.append(("open", principal))
        sealed_for, payload = self.states[request_state]
        if sealed_for != principal:
            raise SealerError(Reason.PRINCIPAL_MISMATCH, "sealer: principal mismatch")
        return Opened(payload, NOW, NOW, request_state)

    async def close(self) -> None:
        pass


def ctx(params: dict[str, Any]) -> ServerRequestContext[Any, Any]:
    return ServerRequestContext(session=None, lifespan_context={}, protocol_version=PROTOCOL, method="tools/call", params=params, request_id=1)  # type: ignore[arg-type]


def tools_call(responses: object = None, state: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"_meta": META, "name": "book", "arguments": {"seat": "1A"}}
    if responses is not None:
        params["inputResponses"] = responses
    if state is not None:
        params["requestState"] = state
    return params


async def ask_again(c: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """A handler that asks (again) on every round."""
    return {"resultType": "input_required", "inputRequests": {"confirm": ASK}, "requestState": "asked"}


def tools_server() -> Server[Any]:
    """A low-level server that serves tools/call (the middleware answers before it runs)."""

    async def call_tool(c: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        raise AssertionError("not reached: the tests call the middleware")

    return Server("tools", on_call_tool=call_tool)


# signed_in's subject when none is given: the client id.
_CLIENT_ID: Any = object()


@contextmanager
def signed_in(client_id: str | None, *, token: str = "t", subject: str | None = _CLIENT_ID) -> Iterator[None]:  # noqa: S107
    """The SDK's own auth context, as its AuthContextMiddleware sets it (None:
    unauthenticated); the token's subject is its client id unless given."""
    sub = client_id if subject is _CLIENT_ID else subject
    user = None if client_id is None else AuthenticatedUser(AccessToken(token=token, client_id=client_id, subject=sub, scopes=[]))
    reset = auth_context_var.set(user)
    try:
        yield
    finally:
        auth_context_var.reset(reset)


async def two_rounds(mw: SealedRequestState, sealer: MemorySealer) -> str:
    """Round 1, then its retry (which opens and seals the next round); returns round 2's state."""
    r1 = await mw(ctx(tools_call()), ask_again)
    r2 = await mw(ctx(tools_call(CONFIRM, r1["requestState"])), ask_again)
    state: str = r2["requestState"]
    return state


# Finding 7: principal by decision, never by default.


def servers_without_auth() -> dict[str, Callable[[], object]]:
    return {
        "MCPServer": lambda: MCPServer("no-auth"),
        "lowlevel": lambda: Server("no-auth"),
        "FastMCP": lambda: FastMCP("no-auth"),
    }


def servers_with_sdk_auth() -> dict[str, Callable[[], object]]:
    class Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            return None

    return {
        "MCPServer": lambda: MCPServer(
            "auth", token_verifier=Verifier(), auth=AuthSettings(issuer_url=AnyHttpUrl("http://127.0.0.1/"), resource_server_url=None)
        ),
        "FastMCP": lambda: FastMCP("auth", auth=StaticTokenVerifier(tokens={"t": {"client_id": "alice", "scopes": []}})),
    }


def chain_of(server: object) -> list[Any]:
    lowlevel = getattr(server, "_mcp_server", None)
    chain: list[Any] = (lowlevel if lowlevel is not None else server).middleware  # type: ignore[attr-defined]
    return chain


@pytest.mark.parametrize("kind", list(servers_without_auth()))
def test_install_refused_without_a_principal(kind: str) -> None:
    server = servers_without_auth()[kind]()
    before = list(chain_of(server))
    with pytest.raises(ValueError, match="principal") as e:
        sealed_request_state(server, MemorySealer())
    assert "allow_anonymous" in str(e.value)
    # Nothing installed, nothing removed: the SDK's own boundary (if any) stays.
    assert chain_of(server) == before
    with pytest.raises(ValueError, match="principal"):
        SealedRequestState(MemorySealer())


@pytest.mark.parametrize("kind", list(servers_with_sdk_auth()))
async def test_sdk_auth_binds_the_authenticated_identity(kind: str) -> None:
    server = servers_with_sdk_auth()[kind]()
    sealer = MemorySealer()
    mw = sealed_request_state(server, sealer)
    assert [m for m in chain_of(server) if isinstance(m, RequestStateBoundary | SealedRequestState)] == [mw]
    with signed_in("alice"):
        state = await two_rounds(mw, sealer)
    alice = '["alice",null,"alice"]'
    assert sealer.calls == [("seal", alice), ("open", alice), ("seal", alice)]
    # Bob presents alice's state: another principal, refused.
    with signed_in("bob"), pytest.raises(MCPError) as e:
        await mw(ctx(tools_call(CONFIRM, state)), ask_again)
    assert e.value.code == -32602
    # No identity, no anonymous opt-in: nothing sealed or opened for it.
    sealer.calls.clear()
    with signed_in(None):
        with pytest.raises(MCPError) as e:
            await mw(ctx(tools_call()), ask_again)
        assert e.value.code == -32603
        with pytest.raises(MCPError) as e:
            await mw(ctx(tools_call(CONFIRM, state)), ask_again)
        assert e.value.code == -32602
    assert sealer.calls == []


# Issue 50: a verified token without a subject is bound to itself, never to
# the OAuth client id that every user of the client shares.

# "token:" and the hex SHA-256 of "alice-token", as the TypeScript codec's
# fromAuthInfo gives it (clients/typescript/test/principal.test.mjs).
ALICE_TOKEN_PRINCIPAL = "token:9c220f200955d76c0a38d308225e0ef10c5f971acaf2f8d1d8f732affa5bd1dc"  # noqa: S105


@pytest.mark.parametrize("kind", list(servers_with_sdk_auth()))
async def test_sdk_auth_without_subject_binds_the_token(kind: str) -> None:
    sealer = MemorySealer()
    mw = sealed_request_state(servers_with_sdk_auth()[kind](), sealer)
    with signed_in("app", token="alice-token", subject=None):  # noqa: S106
        state = await two_rounds(mw, sealer)
    assert sealer.calls == [("seal", ALICE_TOKEN_PRINCIPAL), ("open", ALICE_TOKEN_PRINCIPAL), ("seal", ALICE_TOKEN_PRINCIPAL)]
    # Bob, a user of the same OAuth client, presents alice's state: refused.
    with signed_in("app", token="bob-token", subject=None), pytest.raises(MCPError) as e:  # noqa: S106
        await mw(ctx(tools_call(CONFIRM, state)), ask_again)
    assert e.value.code == -32602
    assert sealer.calls[-1] == ("open", "token:" + hashlib.sha256(b"bob-token").hexdigest())
    # The same token on its retry: the same principal.
    with signed_in("app", token="alice-token", subject=None):  # noqa: S106
        await mw(ctx(tools_call(CONFIRM, state)), ask_again)


def test_from_access_token() -> None:
    c = ctx(tools_call())
    cases: list[tuple[str, dict[str, Any], str | None]] = [
        ("no token", {"client_id": None}, None),
        ("a subject: the SDK's client, issuer and subject", {"client_id": "app", "subject": "alice"}, '["app",null,"alice"]'),
        ("no subject: the token's hash", {"client_id": "app", "token": "alice-token", "subject": None}, ALICE_TOKEN_PRINCIPAL),
        ("an empty subject is none", {"client_id": "app", "token": "alice-token", "subject": ""}, ALICE_TOKEN_PRINCIPAL),
    ]
    for name, signed, want in cases:
        with signed_in(**signed):
            got = sealer_mcp.from_access_token(c)
        assert got == want, f"{name}: got {got}, want {want}"
    with signed_in("app", token="", subject=None), pytest.raises(ValueError, match="neither"):
        sealer_mcp.from_access_token(c)


async def test_allow_anonymous_is_a_principal_no_function_returns() -> None:
    sealer = MemorySealer()
    mw = sealed_request_state(tools_server(), sealer, allow_anonymous=True)
    anonymous = sealer_mcp.ANONYMOUS
    assert anonymous.startswith(sealer_mcp.RESERVED_PREFIX)
    with signed_in(None):
        await two_rounds(mw, sealer)
    with signed_in("alice"):
        await mw(ctx(tools_call()), ask_again)
    assert sealer.calls == [("seal", anonymous), ("open", anonymous), ("seal", anonymous), ("seal", '["alice",null,"alice"]')]


@pytest.mark.parametrize("returns", ["anonymous-constant", "reserved-prefix", "none"])
async def test_principal_function_cannot_name_the_anonymous_caller(returns: str) -> None:
    """A principal function whose result would be (or could be mistaken for)
    the unauthenticated callers' principal is refused: bob registering the
    user name "mcp-sealer:anonymous" (or an API-key lookup that finds no key)
    never shares the anonymous callers' states."""
    value = {"anonymous-constant": sealer_mcp.ANONYMOUS, "reserved-prefix": "mcp-sealer:bob", "none": None}[returns]
    sealer = MemorySealer()
    alice = sealed_request_state(tools_server(), sealer, principal=lambda _: "alice")
    honest = await alice(ctx(tools_call()), ask_again)
    mw = sealed_request_state(tools_server(), sealer, principal=lambda _: value)
    sealer.calls.clear()
    with pytest.raises(MCPError) as e:
        await mw(ctx(tools_call()), ask_again)
    assert e.value.code == -32603
    with pytest.raises(MCPError) as e:
        await mw(ctx(tools_call(CONFIRM, honest["requestState"])), ask_again)
    assert e.value.code == -32602
    assert sealer.calls == [], f"the sealer was called with {sealer.calls}"


async def test_principal_function_runs_once_per_round() -> None:
    runs: list[str] = []

    async def principal(c: ServerRequestContext[Any, Any]) -> str:
        runs.append(c.method)
        return "alice"

    sealer = MemorySealer()
    mw = sealed_request_state(tools_server(), sealer, principal=principal)
    await two_rounds(mw, sealer)
    # Round 1 seals; round 2 opens and seals: one run each.
    assert len(runs) == 2, f"the principal function ran {len(runs)} times in 2 rounds"


class OutcomeSealer(MemorySealer):
    """A MemorySealer whose opens consume each state for its outcome, as the
    sealer opens a latest-only round, and keep what is recorded: a state
    opened again answers its outcome."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: dict[str, bytes] = {}

    async def open(self, request_state: str, *, principal: str, **kw: Any) -> Opened:
        opened = await super().open(request_state, principal=principal, **kw)
        if request_state in self.outcomes:
            return Opened(b"", NOW, NOW, request_state, outcome=Outcome(self.outcomes[request_state], NOW))
        return dataclasses.replace(opened, recording=True)

    async def record(self, request_state: str, outcome: bytes, **_: Any) -> Recorded:
        self.outcomes[request_state] = outcome
        return Recorded(NOW)


async def test_principal_function_runs_once_per_request_that_records() -> None:
    """A round whose state opens for its outcome runs the handler inside the
    record and seals the next round there: the state opened and the state
    sealed still bind one run of the principal function, and a retry
    answered with the recorded answer runs it once too."""
    runs = 0

    def principal(_: ServerRequestContext[Any, Any]) -> str:
        nonlocal runs
        runs += 1
        return "alice"

    sealer = OutcomeSealer()
    mw = sealed_request_state(tools_server(), sealer, principal=principal)
    per_request: list[int] = []

    async def request(state: str | None = None) -> dict[str, Any]:
        nonlocal runs
        runs = 0
        answer: dict[str, Any] = await mw(ctx(tools_call(None if state is None else CONFIRM, state)), ask_again)
        await mw.flush()
        per_request.append(runs)
        return answer

    first = await request()
    second = await request(first["requestState"])
    replayed = await request(first["requestState"])
    await request(second["requestState"])
    assert replayed == second, "the retry was not answered with the recorded answer"
    assert [c for c, _ in sealer.calls] == ["seal", "open", "seal", "open", "open", "seal"]
    assert per_request == [1, 1, 1, 1], f"the principal function ran {per_request} times in each of 4 requests, want once each"


# Finding 10: check, then open.

MALFORMED = {
    "unknown_action": {"confirm": {"action": "maybe"}},
    "not_a_result": {"confirm": 5},
    "content_not_flat": {"confirm": {"action": "accept", "content": {"ok": [{"a": 1}]}}},
    "not_a_map": ["confirm"],
}


@pytest.mark.parametrize("installed", [True, False], ids=["sealed_request_state", "constructed"])
@pytest.mark.parametrize("malformed", list(MALFORMED))
async def test_malformed_retry_never_opens(malformed: str, installed: bool) -> None:
    sealer = MemorySealer()
    options: dict[str, Any] = {"principal": lambda _: "alice"}
    mw = sealed_request_state(tools_server(), sealer, **options) if installed else SealedRequestState(sealer, **options)  # type: ignore[arg-type]
    r1 = await mw(ctx(tools_call()), ask_again)
    sealer.calls.clear()
    # The SDK's own answer: its pydantic ValidationError, which it sends as
    # -32602 "Invalid request parameters".
    with pytest.raises(ValidationError):
        await mw(ctx(tools_call(MALFORMED[malformed], r1["requestState"])), ask_again)
    assert sealer.calls == [], "a malformed retry reached the sealer"
    await mw(ctx(tools_call(CONFIRM, r1["requestState"])), ask_again)
    assert [c for c, _ in sealer.calls] == ["open", "seal"]


# The MRTR members by their Python names (FastMCP's pydantic reads them),
# and their look-alikes under the digest's rule for salient names.


@pytest.mark.parametrize(
    ("member", "refused"),
    [
        ("request_state", True),
        ("input_responses", True),
        ("REQUEST_STATE", True),
        ("Input_Responses", True),
        ("request_\u017ftate", True),  # U+017F, long s
        ("\uff52\uff45\uff51\uff55\uff45\uff53\uff54\uff3f\uff53\uff54\uff41\uff54\uff45", True),  # fullwidth
        ("request_\ufb06ate", True),  # U+FB06, the ligature st
        ("request-state", False),
        ("request_states", False),
        ("requestState", False),
        ("_meta", False),
    ],
)
async def test_python_named_members_and_look_alikes_refused(member: str, refused: bool) -> None:
    sealer = MemorySealer()
    mw = sealed_request_state(tools_server(), sealer, principal=lambda _: "alice")
    params = {**tools_call(), member: None}
    if refused:
        with pytest.raises(MCPError) as e:
            await mw(ctx(params), ask_again)
        assert e.value.code == -32602
        assert sealer.calls == [], f"the sealer was called with {sealer.calls}"
    else:
        await mw(ctx(params), ask_again)
        assert sealer.calls == [("seal", "alice")]
