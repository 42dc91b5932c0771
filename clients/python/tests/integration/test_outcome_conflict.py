"""A retry with other answers never gets the answer recorded for its round
(issue 50, 5b; README, "Recorded outcomes"), against the real sealer, on a
server of the official SDK (``MCPServer``) driven by the SDK's own client.

Round 2 of a booking books the seat its ``inputResponses`` answer and its
answer is lost: the retry of that round with seat "1A" after it booked
"12A" is refused with the conflict error, never told "booked 12A", and
nothing is booked again; the retry with "12A" (and one whose response
carries a ``_meta`` of its own) gets the recorded answer. The Go SDK's twin
is client/gosdk/conflict_test.go.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    InputResponses,
    TextContent,
)

from mcp_sealer import SealerClient, grpc_client, rest_client
from mcp_sealer.mcp import sealed_request_state

from .harness import Sealer

pytestmark = pytest.mark.integration

ASK_SEAT = ElicitRequest(params=ElicitRequestFormParams(message="Which seat?", requested_schema={"type": "object", "properties": {"seat": {"type": "string"}}}))
CONFLICT = (INVALID_PARAMS, "invalid requestState: answered before for other inputResponses", {"reason": "outcome_conflict"})


def booking_server(sealer: SealerClient) -> tuple[MCPServer, list[str]]:
    """A server of one tool, book: round 1 asks for a seat (a latest-only
    round, the default), round 2 books the seat answered; its answers are
    recorded (the default). Returns it and the seats booked."""
    server = MCPServer("airline", version="1")
    booked: list[str] = []

    async def book(flight: str, ctx: Context) -> str | InputRequiredResult:
        if ctx.request_state is None:
            return states.input_required({"seat": ASK_SEAT}, "asked for a seat")
        answer = (ctx.input_responses or {}).get("seat")
        if not isinstance(answer, ElicitResult) or answer.action != "accept" or not answer.content:
            raise MCPError(INVALID_PARAMS, "no seat")
        booked.append(str(answer.content["seat"]))
        return f"booked {booked[-1]} on {flight}, booking {len(booked)}"

    server.add_tool(book, name="book", structured_output=False)
    # The SDK's in-process client carries no identity: one principal for all, by choice.
    states = sealed_request_state(server, sealer, allow_anonymous=True)
    return server, booked


def seat(s: str, **extra: Any) -> InputResponses:
    return {"seat": ElicitResult(action="accept", content={"seat": s}, **extra)}


def text_of(r: object) -> str:
    assert isinstance(r, CallToolResult) and not r.is_error, r
    return " ".join(c.text for c in r.content if isinstance(c, TextContent))


@pytest.fixture(params=["grpc", "rest"])
async def sealer(request: pytest.FixtureRequest, real_sealer: Sealer) -> AsyncIterator[SealerClient]:
    make: Callable[[str], SealerClient] = grpc_client if request.param == "grpc" else rest_client
    async with make(real_sealer.grpc_url if request.param == "grpc" else real_sealer.rest_url) as c:
        yield c


async def test_a_retry_with_another_seat_gets_the_conflict_never_the_answer(sealer: SealerClient) -> None:
    server, booked = booking_server(sealer)
    args = {"flight": "LH 400"}
    async with Client(server, mode="2026-07-28") as client:

        async def round2(answers: InputResponses) -> CallToolResult | MCPError:
            try:
                return await client.session.call_tool("book", args, input_responses=answers, request_state=state)
            except MCPError as e:
                return e

        round1 = await client.session.call_tool("book", args, allow_input_required=True)
        assert isinstance(round1, InputRequiredResult) and round1.request_state, round1
        state = round1.request_state
        want = "booked 12A on LH 400, booking 1"
        assert text_of(await round2(seat("12A"))) == want
        # That answer is lost on the way back; the client retries round 2,
        # now with seat 1A.
        got = await round2(seat("1A"))
        assert isinstance(got, MCPError), f"the retry with seat 1A got {text_of(got)!r}, want the conflict error"
        assert (got.code, got.message, got.data) == CONFLICT, got.error
        assert booked == ["12A"], "the handler ran for the retry with seat 1A"
        # The control: the retry with the seat the round ran with gets its
        # answer, and so does one whose response carries a _meta of its
        # own (protocol metadata, not an answer); nothing is booked again.
        assert text_of(await round2(seat("12A"))) == want
        assert text_of(await round2(seat("12A", _meta={"io.example/trace": "t-2"}))) == want
        assert booked == ["12A"]
