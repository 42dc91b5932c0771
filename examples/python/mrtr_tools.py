"""The tools and the prompt of the MCP conformance suite's input-required-result
scenarios (SEP-2322), two booking tools with arguments that the integration
tests attack, and a payment tool whose answers are recorded, free of any SDK
wiring: server.py (MCPServer) and
fastmcp_server.py (FastMCP) register the same functions.

A function sees one round of a request (``Round``): the client's
``inputResponses``, the plaintext ``requestState`` the previous round returned
(opened by the sealer before the handler runs), and the client capabilities
of the request's ``_meta``. It returns the answer's text, or an
``InputRequiredResult`` asking for more. Every state it returns is plaintext;
the sealer seals it on the way out and opens it on the retry, so a state that
was tampered with, replayed, or presented with another request never reaches
these functions (the middleware answers -32602 first).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequest,
    InputRequiredResult,
    InputResponses,
    ListRootsRequest,
    ListRootsResult,
    RequestParams,
    SamplingMessage,
    TextContent,
)

PREFIX = "test_input_required_result_"
PROMPT = PREFIX + "prompt"
PROMPT_DESCRIPTION = "asks for context with a sealed state"

Reply = str | InputRequiredResult
"""A tool's or the prompt's answer: the complete result's text, or a request for input."""


@dataclass(frozen=True)
class Round:
    """One round of a request, as a tool or the prompt sees it."""

    responses: InputResponses
    """The client's answers to the previous round's inputRequests ({} on the first round)."""
    state: str | None
    """The plaintext requestState the previous round returned, or None."""
    capabilities: Mapping[str, Any]
    """The client capabilities of this request's ``_meta`` (``io.modelcontextprotocol/clientCapabilities``)."""


def capabilities_of(meta: object) -> Mapping[str, Any]:
    """The client capabilities declared in a request's raw ``_meta``, or {}."""
    if not isinstance(meta, Mapping):
        return {}
    caps = meta.get("io.modelcontextprotocol/clientCapabilities")
    return caps if isinstance(caps, Mapping) else {}


# The input requests the tools ask.


def _elicit(message: str, field: str, kind: str = "string") -> ElicitRequest:
    schema = {
        "type": "object",
        "properties": {field: {"type": kind}},
        "required": [field],
    }
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _sample(text: str, max_tokens: int) -> CreateMessageRequest:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
    return CreateMessageRequest(params=CreateMessageRequestParams(messages=[message], max_tokens=max_tokens))


def _roots() -> ListRootsRequest:
    return ListRootsRequest(params=RequestParams())


def _ask(requests: dict[str, InputRequest], state: dict[str, Any] | None = None) -> InputRequiredResult:
    """An InputRequiredResult; a state, when given, is plaintext JSON for the sealer to seal."""
    plaintext = None if state is None else json.dumps(state, separators=(",", ":"), sort_keys=True)
    return InputRequiredResult(input_requests=requests, request_state=plaintext)


# Reading the answers.


def _accepted(r: Round, key: str) -> Mapping[str, Any] | None:
    """The content of an accepted elicitation answer under key, or None."""
    answer = r.responses.get(key)
    if isinstance(answer, ElicitResult) and answer.action == "accept" and answer.content is not None:
        return answer.content
    return None


def _text(r: Round, key: str, field: str) -> str:
    """A non-empty string field of an accepted elicitation answer, or ""."""
    value = (_accepted(r, key) or {}).get(field)
    return value if isinstance(value, str) else ""


def _sampled(r: Round, key: str) -> bool:
    return isinstance(r.responses.get(key), CreateMessageResult | CreateMessageResultWithTools)


def _roots_of(r: Round, key: str) -> int | None:
    """How many roots a roots/list answer under key holds, or None."""
    answer = r.responses.get(key)
    return len(answer.roots) if isinstance(answer, ListRootsResult) else None


def _state(r: Round, tool: str) -> dict[str, Any] | None:
    """The state this tool issued in the previous round, or None (no state, or another tool's)."""
    if r.state is None:
        return None
    try:
        state = json.loads(r.state)
    except ValueError:
        return None
    return state if isinstance(state, dict) and state.get("tool") == tool else None


# The tools.


def elicitation(r: Round) -> Reply:
    """No state: a valid user_name completes, anything else asks (again)."""
    name = _text(r, "user_name", "name")
    if name:
        return f"Hello, {name}!"
    return _ask({"user_name": _elicit("What is your name?", "name")})


def sampling(r: Round) -> Reply:
    if _sampled(r, "capital_question"):
        return "Sampling response received"
    return _ask({"capital_question": _sample("What is the capital of France?", 100)})


def list_roots(r: Round) -> Reply:
    n = _roots_of(r, "client_roots")
    if n is not None:
        return f"Client exposed {n} root(s)"
    return _ask({"client_roots": _roots()})


def request_state(r: Round) -> Reply:
    """A confirmation with a sealed state (also the tampered_state tool: a state that does not open never gets here)."""
    if _state(r, "request_state") is not None and _accepted(r, "confirm") is not None:
        return "state-ok: requestState opened and confirmation accepted"
    confirm = _elicit("Please confirm", "ok", "boolean")
    return _ask({"confirm": confirm}, {"tool": "request_state"})


def multiple_inputs(r: Round) -> Reply:
    name, roots = _text(r, "user_name", "name"), _roots_of(r, "client_roots")
    if _state(r, "multiple_inputs") is not None and name and _sampled(r, "greeting") and roots is not None:
        return f"Hello {name}, {roots} root(s) visible"
    requests: dict[str, InputRequest] = {
        "user_name": _elicit("What is your name?", "name"),
        "greeting": _sample("Generate a greeting", 50),
        "client_roots": _roots(),
    }
    return _ask(requests, {"tool": "multiple_inputs"})


def multi_round(r: Round) -> Reply:
    """Two rounds of input, the progress kept in the sealed state only: a new state each round."""
    state = _state(r, "multi_round")
    if state is None:
        return _ask(
            {"step1": _elicit("Step 1: What is your name?", "name")},
            {"tool": "multi_round", "round": 1},
        )
    if state.get("round") == 1:
        name = _text(r, "step1", "name")
        step2 = _elicit("Step 2: What is your favorite color?", "color")
        return _ask({"step2": step2}, {"tool": "multi_round", "round": 2, "name": name})
    return f"Multi-round complete: {state.get('name')} likes {_text(r, 'step2', 'color')}"


def capabilities(r: Round) -> Reply:
    """Asks only for what the client declared it can answer (no state)."""
    if r.responses:
        return "Capability-aware input requests fulfilled"
    requests: dict[str, InputRequest] = {}
    if "elicitation" in r.capabilities:
        requests["user_name"] = _elicit("What is your name?", "name")
    if "sampling" in r.capabilities:
        requests["greeting"] = _sample("Generate a short greeting", 50)
    if "roots" in r.capabilities:
        requests["client_roots"] = _roots()
    if not requests:
        return "No declared client capability supports an in-band input request"
    return _ask(requests)


def prompt(r: Round) -> Reply:
    """The prompt: asks for context with a sealed state, then renders it as a user message."""
    context = _accepted(r, "user_context")
    if _state(r, "prompt") is not None and context is not None:
        return f"Context: {context.get('context')}"
    ask = _elicit("What context should the prompt use?", "context")
    return _ask({"user_context": ask}, {"tool": "prompt"})


TOOLS: dict[str, tuple[str, Callable[[Round], Reply]]] = {
    PREFIX + "elicitation": ("asks for the caller's name (no state)", elicitation),
    PREFIX + "sampling": ("asks for an LLM completion (no state)", sampling),
    PREFIX + "list_roots": ("asks for the client's roots (no state)", list_roots),
    PREFIX + "request_state": (
        "asks for a confirmation with a sealed state",
        request_state,
    ),
    PREFIX + "tampered_state": ("rejects a state that does not open", request_state),
    PREFIX + "multiple_inputs": (
        "asks for three inputs at once with a sealed state",
        multiple_inputs,
    ),
    PREFIX + "multi_round": ("two rounds, a new sealed state in each", multi_round),
    PREFIX + "capabilities": ("asks only for what the client can answer", capabilities),
}
"""The conformance tools by name: (description, function)."""


# The booking tools: not the conformance suite's, the attack tests'
# (clients/python/tests/integration). Two tools of one shape, each taking a
# seat: three rounds, the progress in the state only.


def book(tool: str, seat: str, r: Round) -> Reply:
    """Round 1 asks to confirm the seat (key ``confirm``), round 2 for a card
    (key ``payment``), round 3 books. Every state names the tool, the seat
    and the step it asked."""

    def ask(step: int, key: str, request: ElicitRequest) -> InputRequiredResult:
        return _ask({key: request}, {"tool": tool, "seat": seat, "step": step})

    state = _state(r, tool) or {}
    step = state.get("step")
    if step == 2:
        card = _text(r, "payment", "card")
        if card:
            return f"booked {tool} {state.get('seat')} with card {card}"
        return ask(2, "payment", _elicit(f"Which card pays for {seat}?", "card"))
    if step == 1 and (_accepted(r, "confirm") or {}).get("ok") is True:
        return ask(2, "payment", _elicit(f"Which card pays for {seat}?", "card"))
    return ask(1, "confirm", _elicit(f"Book {seat}?", "ok", "boolean"))


BOOKING_TOOLS: dict[str, str] = {
    "book_seat": "books a seat in three rounds (confirm, card, booked)",
    "book_table": "books a table in three rounds (confirm, card, booked)",
}
"""The booking tools by name: their description; ``book(name, seat, round)`` serves each."""


# The payment tool: not the conformance suite's, the recorded outcomes' tests
# (README, "Recorded outcomes"; e2e/python_outcomes_test.go). Its second
# round acts: it pays, once per request however often the answer is lost
# and the round retried, for the retry gets the recorded answer.

PAY_TOOL = "pay"
PAY_DESCRIPTION = "pays an amount to a payee in two rounds (confirm, paid)"

PAYMENTS: Counter[str] = Counter()
"""The payments made, by payee: how often the handler acted (GET /payments
with --calls). A retry answered with the recorded answer never counts."""


def pay(payee: str, amount: int, r: Round) -> Reply:
    """Round 1 asks to confirm the payment (key ``confirm``); round 2 pays if
    confirmed, and answers with the payment's number among all made, so that a
    second payment would answer differently from the first."""
    if _state(r, PAY_TOOL) is None:
        return _ask({"confirm": _elicit(f"Pay {amount} to {payee}?", "ok", "boolean")}, {"tool": PAY_TOOL})
    if (_accepted(r, "confirm") or {}).get("ok") is not True:
        return f"not paid: {amount} to {payee} was not confirmed"
    PAYMENTS[payee] += 1
    return f"paid {amount} to {payee}: payment {PAYMENTS.total()}"
