"""What the MCP-level tests (test_mcp_attacks.py, test_fleet.py,
test_outcomes.py) share: the example servers started together, the handler
counts they report, two callers of one request (the SDK's own client and raw
JSON-RPC over HTTP), the sealer's reasons, a round-robin forwarder that
stands for a load balancer, and a network that loses answers.

Each example server runs with ``--calls``: ``GET /calls`` reports how many
times each handler ran, so a test tells a request its boundary refused from
one a handler served. ``--tokens`` has the SDK's own auth verify the bearer
tokens below, and the SDK's authenticated principal (the sealer's default)
is then ``alice`` or ``bob``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult, InputResponses, TextContent

from .harness import Proc, Sealer, start_server

# The example servers (uvicorn) close a connection idle for 5 s, and httpx
# keeps one as long: a request sent on it as it closes fails unanswered
# (ReadError). The test's clients let go of an idle connection first.
KEEPALIVE_EXPIRY = 1.0

SERVERS = {"MCPServer": "server.py", "FastMCP": "fastmcp_server.py"}
"""The example servers (examples/python) by the SDK they are built on."""

ALICE, BOB = "alice-token-7f3e9c", "bob-token-0b81d4"
TOKENS = f"alice={ALICE},bob={BOB}"
"""The --tokens flag: the two principals' bearer tokens."""

NO_SEALER = "http://127.0.0.1:9"
"""The --sealer of an --sdk-boundary server, which never calls it (nothing listens there)."""

PROTOCOL = "2026-07-28"
INVALID_PARAMS = -32602

SEAT = {"seat": "1A"}
CONFIRM = {"confirm": {"action": "accept", "content": {"ok": True}}}
"""The answer to round 1 of a booking tool."""
PAY = {"payment": {"action": "accept", "content": {"card": "visa-4242"}}}
"""The answer to round 2 of a booking tool."""


@dataclass
class Server:
    """An example MCP server process."""

    proc: Proc
    url: str

    @property
    def base(self) -> str:
        return self.url.removesuffix("/mcp")

    async def calls(self) -> Counter[str]:
        """How many times each handler ran since the server started."""
        async with httpx.AsyncClient() as h:
            r = await h.get(self.base + "/calls")
        r.raise_for_status()
        return Counter(r.json())

    async def payments(self) -> Counter[str]:
        """The payments the pay tool made since the server started, by payee."""
        async with httpx.AsyncClient() as h:
            r = await h.get(self.base + "/payments")
        r.raise_for_status()
        return Counter(r.json())

    async def handler_calls(self) -> int:
        """How many times any handler ran since the server started."""
        return sum((await self.calls()).values())

    def stop(self) -> None:
        self.proc.stop()


def start_servers(specs: Sequence[tuple[str, str, Sequence[str]]]) -> list[Server]:
    """Starts example servers (script, sealer URL, flags), all at once, each with --calls."""

    def one(spec: tuple[str, str, Sequence[str]]) -> Server:
        script, sealer_url, flags = spec
        proc, url = start_server(script, sealer_url, "--calls", *flags)
        return Server(proc, url)

    with ThreadPoolExecutor(len(specs)) as pool:
        futures = [pool.submit(one, s) for s in specs]
    servers, errors = [], []
    for f in futures:
        try:
            servers.append(f.result())
        except Exception as e:
            errors.append(e)
    if errors:
        for s in servers:
            s.stop()
        raise errors[0]
    return servers


Spec = tuple[str, str, tuple[str, ...], int]
"""An example server: its script, sealer URL and flags, and which copy of those (replicas differ by it)."""

_SHARED = pytest.StashKey[dict[Spec, Server]]()


def shared(request: pytest.FixtureRequest, specs: Sequence[Spec]) -> list[Server]:
    """The servers of specs, started (those not yet running, all at once) for
    the rest of the session: the attack and fleet tests share a server of
    the same spec, which spares starting it twice. Handler counts are read as
    differences, so sharing leaves them exact."""
    config = request.config
    if _SHARED not in config.stash:
        running: dict[Spec, Server] = {}
        config.stash[_SHARED] = running

        def stop_all() -> None:
            for s in running.values():
                s.stop()

        config.add_cleanup(stop_all)
    running = config.stash[_SHARED]
    missing = [s for s in dict.fromkeys(specs) if s not in running]
    if missing:
        running.update(zip(missing, start_servers([(script, url, flags) for script, url, flags, _ in missing]), strict=True))
    return [running[s] for s in specs]


# One round's reply, whichever client carried it.


@dataclass
class Reply:
    """A tools/call result: input_required (with the keys it asks and its state) or complete."""

    result_type: str
    state: str | None = None
    asks: list[str] = field(default_factory=list)
    text: str = ""

    @property
    def complete(self) -> bool:
        return self.result_type == "complete"


class Caller(Protocol):
    """Sends one tools/call round to an MCP server."""

    name: str

    async def call(
        self, url: str, tool: str, arguments: dict[str, Any], *, token: str = ALICE, responses: dict[str, Any] | None = None, state: object = None
    ) -> Reply:
        """One round: raises MCPError when the server answers a JSON-RPC error."""
        ...


class SdkCaller:
    """The SDK's own client (``mcp.Client``, its ``ClientSession.call_tool``), over
    Streamable HTTP with a bearer token, driving the rounds by hand. One session
    per server and token, kept open for the test."""

    name = "sdk-client"

    def __init__(self) -> None:
        self._stack = AsyncExitStack()
        self._sessions: dict[tuple[str, str], ClientSession] = {}

    async def __aenter__(self) -> SdkCaller:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def _session(self, url: str, token: str) -> ClientSession:
        if (url, token) not in self._sessions:
            # Every principal's session at once, from the task of the
            # server's first call: a session must be closed by the task that
            # opened it, never one of attempt()'s.
            for t in (ALICE, BOB):
                http = await self._stack.enter_async_context(
                    httpx2.AsyncClient(headers={"Authorization": f"Bearer {t}"}, timeout=30, limits=httpx2.Limits(keepalive_expiry=KEEPALIVE_EXPIRY))
                )
                client = await self._stack.enter_async_context(Client(streamable_http_client(url, http_client=http), mode=PROTOCOL))
                self._sessions[(url, t)] = client.session
        return self._sessions[(url, token)]

    async def call(
        self, url: str, tool: str, arguments: dict[str, Any], *, token: str = ALICE, responses: dict[str, Any] | None = None, state: object = None
    ) -> Reply:
        if state is not None and not isinstance(state, str):
            raise TypeError("the SDK's client sends a requestState only as a string")
        session = await self._session(url, token)
        answers: InputResponses | None = None
        if responses is not None:
            answers = {k: ElicitResult.model_validate(v) for k, v in responses.items()}
        result = await session.call_tool(tool, arguments, input_responses=answers, request_state=state, allow_input_required=True)
        if isinstance(result, InputRequiredResult):
            return Reply("input_required", result.request_state, sorted(result.input_requests or {}))
        assert isinstance(result, CallToolResult), result
        assert not result.is_error, result
        return Reply("complete", text=" ".join(c.text for c in result.content if isinstance(c, TextContent)))


class WireCaller:
    """Raw JSON-RPC over HTTP (httpx): the stateless 2026-07-28 wire the
    conformance suite speaks, every member as the test writes it (a state of
    any JSON type, any inputResponses keys)."""

    name = "wire"

    def __init__(self) -> None:
        self._http = httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=64, keepalive_expiry=KEEPALIVE_EXPIRY))
        self._ids = itertools.count(1)

    async def __aenter__(self) -> WireCaller:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    async def call(
        self,
        url: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        token: str = ALICE,
        responses: dict[str, Any] | None = None,
        state: object = None,
        extra: dict[str, Any] | None = None,
    ) -> Reply:
        """One round; extra adds members to params as they are (any name)."""
        params: dict[str, Any] = {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                "io.modelcontextprotocol/clientInfo": {"name": "sealer-attack-test", "version": "1.0.0"},
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            },
            "name": tool,
            "arguments": arguments,
        }
        if responses is not None:
            params["inputResponses"] = responses
        if state is not None:
            params["requestState"] = state
        params.update(extra or {})
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL,
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
            "Authorization": f"Bearer {token}",
        }
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": "tools/call", "params": params}
        r = await self._http.post(url, json=body, headers=headers)
        assert r.headers.get("content-type", "").startswith("application/json"), (r.status_code, r.text)
        msg = r.json()
        assert msg.get("id") == body["id"], msg
        if "error" in msg:
            e = msg["error"]
            raise MCPError(e["code"], e["message"], e.get("data"))
        result = msg["result"]
        if result.get("resultType") == "input_required":
            return Reply("input_required", result.get("requestState"), sorted(result.get("inputRequests") or {}))
        assert result.get("resultType") == "complete" and not result.get("isError"), result
        return Reply("complete", text=" ".join(c["text"] for c in result["content"] if c.get("type") == "text"))


@asynccontextmanager
async def caller(kind: str) -> AsyncIterator[Caller]:
    c: SdkCaller | WireCaller = SdkCaller() if kind == "sdk-client" else WireCaller()
    async with c:
        yield c


def assert_refused(e: BaseException) -> None:
    """e is the refusal of a requestState, as the SDK's boundary and the sealer's middleware both send it."""
    assert isinstance(e, MCPError), repr(e)
    assert (e.code, e.message, e.data) == (INVALID_PARAMS, "Invalid or expired requestState", {"reason": "invalid_request_state"}), repr(e.error)


# What happened to the requests of an attack.


@dataclass
class Outcome:
    """The attack's requests: those a handler answered, those refused, and the
    handler calls the server counted while they ran."""

    replies: list[Reply]
    refusals: list[MCPError]
    handler_calls: int
    then: Reply | None = None
    """The honest round sent after the attack, when the attack leaves one to send."""
    original: Reply | None = None
    """The answer the attacked round got first, when the attack resends a round."""

    def refused_before_the_handler(self) -> None:
        assert self.replies == [], f"the attack proceeded: {self.replies}"
        for e in self.refusals:
            assert_refused(e)
        assert self.handler_calls == 0, f"a handler ran {self.handler_calls} time(s) on a refused state"

    def replayed(self) -> None:
        """Every request got the answer recorded for its state, the original's,
        and no handler ran: a round resent is answered again, never served again."""
        assert self.refusals == [], f"refused: {[e.error for e in self.refusals]}"
        assert self.replies and self.original is not None
        assert all(r == self.original for r in self.replies), f"{self.replies} differ from the original {self.original}"
        assert self.handler_calls == 0, f"a handler ran {self.handler_calls} time(s) on a state consumed"

    def proceeded(self, n: int) -> None:
        assert self.refusals == [], f"refused: {[e.error for e in self.refusals]}"
        assert len(self.replies) == n
        assert self.handler_calls == n, f"{len(self.replies)} replies, {self.handler_calls} handler calls"


async def attempt(server: Server, calls: Iterable[Awaitable[Reply]]) -> Outcome:
    """Sends calls at once and counts the handler calls they cost."""
    before = await server.handler_calls()
    results = await asyncio.gather(*calls, return_exceptions=True)
    after = await server.handler_calls()
    replies, refusals = [], []
    for r in results:
        if isinstance(r, MCPError):
            refusals.append(r)
        elif isinstance(r, BaseException):
            raise r
        else:
            replies.append(r)
    return Outcome(replies, refusals, after - before)


def sealer_reasons(s: Sealer) -> Counter[str]:
    """The reasons of the calls the sealer refused, as it logged them."""
    out: Counter[str] = Counter()
    for line in list(s.lines):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("msg") == "call failed" and rec.get("reason"):
            out[rec["reason"]] += 1
    return out


async def logged(s: Sealer, before: Counter[str], reason: str, n: int = 1, timeout: float = 5.0) -> None:
    """Waits until the sealer logged n more refusals for reason than before."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while sealer_reasons(s)[reason] - before[reason] < n:
        assert loop.time() < deadline, f"the sealer logged no {reason}; it logged {dict(sealer_reasons(s) - before)}"
        await asyncio.sleep(0.02)


# A load balancer.


class Forwarder:
    """A round-robin HTTP forwarder in front of replicas: each tools/call POST
    goes to the next replica, whatever round it carries (any round on any
    replica); other requests (the SDK's client lists the tools after a
    complete result) take turns of their own, so that they do not shift the
    rounds. Its own uvicorn, on a loop of its own, in a thread."""

    def __init__(self, upstreams: Sequence[str]) -> None:
        self.upstreams = list(upstreams)
        self.served: list[tuple[int, str]] = []
        """(replica index, Mcp-Method) of every POST forwarded, in order."""
        self._turns: dict[bool, Iterator[int]] = {k: itertools.cycle(range(len(self.upstreams))) for k in (True, False)}
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/mcp"
        self._server = uvicorn.Server(uvicorn.Config(self._app, interface="asgi3", lifespan="off", log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)
        self._http: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __enter__(self) -> Forwarder:
        self._thread.start()
        for _ in range(500):
            if self._server.started:
                return self
            threading.Event().wait(0.01)
        raise AssertionError("the forwarder did not start")

    def __exit__(self, *exc: object) -> None:
        if self._http is not None and self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._http.aclose(), self._loop).result(10)
        self._server.should_exit = True
        self._thread.join(10)
        self._sock.close()

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        if scope["method"] != "POST":
            await send({"type": "http.response.start", "status": 405, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        hop = {b"host", b"content-length", b"connection", b"transfer-encoding"}
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"] if k.lower() not in hop]
        method = dict((k.lower(), v) for k, v in headers).get("mcp-method", "")
        i = next(self._turns[method == "tools/call"])
        self.served.append((i, method))
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=30, limits=httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY))
            self._loop = asyncio.get_running_loop()
        r = await self._http.post(self.upstreams[i], content=body, headers=headers)
        out = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in r.headers.items() if k.lower().encode() not in hop]
        out.append((b"content-length", str(len(r.content)).encode()))
        await send({"type": "http.response.start", "status": r.status_code, "headers": out})
        await send({"type": "http.response.body", "body": r.content})


# A network that loses answers.


class AnswerCutter:
    """Stands between an MCP client and an MCP server over HTTP and loses
    answers as a network does: for a request ``cut`` picks (it sees the
    body), it forwards the request, reads the whole answer (so the handler has
    run and answered), keeps it in ``lost``, then closes the client's
    connection without a byte of it. Every other request passes through. A
    server on the test's own event loop; the e2e tests' Go twin is
    ``cutAnswers`` (e2e/cutanswer_test.go)."""

    def __init__(self, upstream: str, cut: Callable[[bytes], bool]) -> None:
        self.upstream = upstream
        self.cut = cut
        self.lost: list[bytes] = []
        """The answers cut, as the server sent them."""
        self.passed = 0
        self.url = ""
        self._server: asyncio.Server | None = None
        self._http = httpx.AsyncClient(timeout=30, limits=httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY))

    async def __aenter__(self) -> AnswerCutter:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        await self._http.aclose()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                fields = [line.split(":", 1) for line in head[1:] if ":" in line]
                headers = {k.strip().lower(): v.strip() for k, v in fields}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                hop = {"host", "content-length", "connection", "transfer-encoding"}
                r = await self._http.post(self.upstream, content=body, headers={k: v for k, v in headers.items() if k not in hop})
                if self.cut(body):
                    self.lost.append(r.content)
                    return  # the connection closes: the answer is lost
                self.passed += 1
                out = [f"HTTP/1.1 {r.status_code} {r.reason_phrase}", f"content-length: {len(r.content)}"]
                out += [f"{k}: {v}" for k, v in r.headers.items() if k.lower() not in hop]
                writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + r.content)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed its connection
        finally:
            writer.close()
