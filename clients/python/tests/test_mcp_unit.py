"""The middleware's decisions that need no sealer: params the SDK will
refuse never open a state (issue 40, finding 10). A sealer in memory stands
for the real one, whose refusals the integration tests show."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp_types import CallToolRequestParams, CallToolResult
from pydantic import ValidationError

from mcp_sealer import Opened, Reason, Sealed, SealerError
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
