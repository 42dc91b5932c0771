"""The seam on the SDK's low-level ``Server`` (which installs no boundary of
its own), driven in process by the SDK's client against a real sealer: the
rounds of one request, the state opened before the handler, and a sealer
that cannot answer failing the request closed, the handler never run."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from mcp import Client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

from mcp_sealer import SealerClient, grpc_client
from mcp_sealer.mcp import SealedRequestState, sealed_request_state

from .harness import Sealer

pytestmark = pytest.mark.integration

ASK = ElicitRequest(params=ElicitRequestFormParams(message="Sure?", requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}}))
YES = {"ok": {"action": "accept", "content": {"ok": True}}}


def lowlevel_server(sealer: SealerClient, **options: Any) -> tuple[Server[Any], Counter[str], SealedRequestState]:
    calls: Counter[str] = Counter()

    async def list_tools(ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="delete", input_schema={"type": "object"})])

    async def call_tool(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult | InputRequiredResult:
        calls[params.request_state or "round 1"] += 1
        if params.request_state is None:
            return states.input_required({"ok": ASK}, "asked once", one_time=True)
        if params.request_state == "asked once":
            return InputRequiredResult(input_requests={"ok": ASK}, request_state="asked twice")
        opened = states.opened()
        assert opened is not None and opened.flow is not None
        return CallToolResult(content=[TextContent(type="text", text=f"deleted in round {opened.flow.round + 1}")])

    server: Server[Any] = Server("lowlevel", on_list_tools=list_tools, on_call_tool=call_tool)
    assert not any(isinstance(m, RequestStateBoundary) for m in server.middleware)
    # The SDK's in-process client carries no identity: one principal for all, by choice.
    states = sealed_request_state(server, sealer, **{"allow_anonymous": True, **options})
    assert server.middleware.count(states) == 1
    return server, calls, states


@pytest.mark.parametrize("record_outcomes", [True, False], ids=["recording", "switched-off"])
async def test_lowlevel_rounds(real_sealer: Sealer, record_outcomes: bool) -> None:
    async with grpc_client(real_sealer.grpc_url) as sealer:
        server, calls, _ = lowlevel_server(sealer, record_outcomes=record_outcomes)
        async with Client(server, mode="2026-07-28") as client:
            s = client.session
            r1 = await s.call_tool("delete", {"path": "/a"}, allow_input_required=True)
            assert isinstance(r1, InputRequiredResult) and r1.request_state and r1.request_state.startswith("Ag")
            r2 = await s.call_tool("delete", {"path": "/a"}, input_responses=YES, request_state=r1.request_state, allow_input_required=True)
            assert isinstance(r2, InputRequiredResult) and r2.request_state and r2.request_state != r1.request_state
            # Round 1's state, one-time, opened once: sent again, it gets the
            # answer recorded for it (round 2's very state), the handler not
            # run again; with the switch off it is refused.
            if record_outcomes:
                again = await s.call_tool("delete", {"path": "/a"}, input_responses=YES, request_state=r1.request_state, allow_input_required=True)
                assert again == r2, again
            else:
                with pytest.raises(MCPError) as e:
                    await s.call_tool("delete", {"path": "/a"}, input_responses=YES, request_state=r1.request_state)
                assert e.value.code == -32602
            r3 = await s.call_tool("delete", {"path": "/a"}, input_responses=YES, request_state=r2.request_state)
            assert isinstance(r3, CallToolResult) and r3.content[0].text == "deleted in round 3"  # type: ignore[union-attr]
    assert calls == Counter({"round 1": 1, "asked once": 1, "asked twice": 1})


async def test_sealer_down_fails_closed(real_sealer: Sealer) -> None:
    async with grpc_client(real_sealer.grpc_url) as sealer:
        server, _, _ = lowlevel_server(sealer)
        async with Client(server, mode="2026-07-28") as client:
            r1 = await client.session.call_tool("delete", {"path": "/a"}, allow_input_required=True)
            assert isinstance(r1, InputRequiredResult)
    # The same state, to a server whose sealer cannot be reached (started
    # anyway: check_at_start=False): tried 3 times, then refused -32603
    # sealer_unavailable, the handler never run.
    async with grpc_client("http://127.0.0.1:9", timeout=1) as down:
        server, calls, _ = lowlevel_server(down, backoff_seconds=0.01, check_at_start=False)
        async with Client(server, mode="2026-07-28") as client:
            with pytest.raises(MCPError) as e:
                await client.session.call_tool("delete", {"path": "/a"}, input_responses=YES, request_state=r1.request_state)
            assert e.value.code == -32603
            assert e.value.error.data == {"reason": "sealer_unavailable"}, e.value.error
    # By default such a server does not start.
    async with grpc_client("http://127.0.0.1:9", timeout=1) as down:
        server, _, _ = lowlevel_server(down, backoff_seconds=0.01)
        with pytest.raises(BaseException, match="start-up check") as start:
            async with Client(server, mode="2026-07-28"):
                pass
        assert "http://127.0.0.1:9" in str(start.value) or "http://127.0.0.1:9" in repr(start.value.__cause__), start.value
    assert calls == Counter()
