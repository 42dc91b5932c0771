"""What server.py and fastmcp_server.py share besides the tools: the command
line, the sealer client, the count of handler calls and of payments, and serving an ASGI app
with uvicorn on a port it binds itself (port 0 picks a free one), announcing
``listening on http://HOST:PORT/mcp`` on standard error once it accepts
connections.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import json
import socket
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import uvicorn
from mcp_sealer import SealerClient, grpc_client, rest_client
from starlette.types import ASGIApp, Receive, Scope, Send

import mrtr_tools

App = Callable[[str, "SealerClient | None"], ASGIApp]
"""Builds the server's ASGI app for a listening host and a sealer client
(None with --sdk-boundary: the SDK's own boundary seals the states)."""

CALLS: Counter[str] = Counter()
"""How many times each tool's or prompt's handler ran, by name (GET /calls
with --calls). A state the boundary refuses never reaches a handler, so
never counts."""


def tokens(value: str) -> dict[str, str]:
    """``alice=TOKEN_A,bob=TOKEN_B``: the principal of each bearer token, by token."""
    out: dict[str, str] = {}
    for item in value.split(","):
        name, sep, token = item.strip().partition("=")
        if not sep or not name or not token or token in out:
            raise argparse.ArgumentTypeError(f"want NAME=TOKEN[,NAME=TOKEN...] with distinct tokens, got {value!r}")
        out[token] = name
    return out


API_KEY_OWNER: contextvars.ContextVar[str | None] = contextvars.ContextVar("api_key_owner", default=None)
"""With --api-keys: the owner of the request's API key, set by the app's own
ASGI middleware (outside the SDK's auth) while the request is served."""


def api_key_owner(_ctx: object) -> str | None:
    """The principal of a request with --api-keys: its API key's owner."""
    return API_KEY_OWNER.get()


def principal_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options of sealed_request_state that say who the caller is, which it
    never guesses: with --api-keys the key's owner, from this app's own
    middleware (principal=); with --tokens nothing, for the SDK's own auth
    makes its authenticated identity the principal; with neither, no auth at
    all, so every caller is one anonymous principal, by choice."""
    if args.api_keys:
        return {"principal": api_key_owner}
    if args.tokens:
        return {}
    return {"allow_anonymous": True}


def _with_api_keys(app: ASGIApp, keys: dict[str, str]) -> ASGIApp:
    """app behind an API key (``Authorization: Bearer KEY``), checked here and
    not by the SDK: a request without a known key is answered 401."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        auth = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        scheme, _, key = auth.partition(" ")
        owner = keys.get(key) if scheme.lower() == "bearer" else None
        if owner is None:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        token = API_KEY_OWNER.set(owner)
        try:
            await app(scope, receive, send)
        finally:
            API_KEY_OWNER.reset(token)

    return guarded


def parse_args(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--addr", default="127.0.0.1:3001", help="host:port to listen on (port 0: a free one)")
    p.add_argument("--sealer", default="http://127.0.0.1:7443", help="the sealer's gRPC URL (its HTTP URL with --rest)")
    p.add_argument("--rest", action="store_true", help="call the sealer over REST instead of gRPC")
    p.add_argument("--one-time", action="store_true", help="seal one-time states: each opens once")
    p.add_argument(
        "--no-record-outcomes",
        dest="record_outcomes",
        action="store_false",
        help="record no answers: a retry of a state consumed is refused instead of answered with its recorded answer",
    )
    p.add_argument(
        "--sdk-boundary",
        action="store_true",
        help="no sealer: keep the SDK's own RequestStateBoundary (a key of this process; the tests' control); --sealer is ignored",
    )
    auth = p.add_mutually_exclusive_group()
    auth.add_argument(
        "--tokens",
        type=tokens,
        default=None,
        metavar="NAME=TOKEN,...",
        help="require a bearer token through the SDK's auth; each token's principal is its NAME (the states are bound to it)",
    )
    auth.add_argument(
        "--api-keys",
        type=tokens,
        default=None,
        metavar="NAME=KEY,...",
        help="require an API key (Authorization: Bearer KEY) checked by this app's own ASGI middleware, outside the SDK's auth",
    )
    p.add_argument(
        "--calls",
        action="store_true",
        help="serve GET /calls and GET /payments: how many times each handler ran, and the payments made by payee (for tests)",
    )
    return p.parse_args()


def sealer_client(args: argparse.Namespace) -> SealerClient:
    """The sealer client the flags name: gRPC by default, REST with --rest."""
    return rest_client(args.sealer) if args.rest else grpc_client(args.sealer)


def counted(name: str) -> None:
    """Counts one call of the handler of the tool or prompt name."""
    CALLS[name] += 1


def _with_calls(app: ASGIApp) -> ASGIApp:
    """app, and GET /calls answering CALLS, GET /payments mrtr_tools.PAYMENTS, as JSON objects."""
    counts = {"/calls": CALLS, "/payments": mrtr_tools.PAYMENTS}

    async def serve_calls(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in counts:
            await app(scope, receive, send)
            return
        body = json.dumps(dict(counts[scope["path"]]), sort_keys=True).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return serve_calls


def _split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


class _Server(uvicorn.Server):
    """uvicorn, announcing the URL once it accepts connections."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and sockets:
            host, port = sockets[0].getsockname()[:2]
            where = f"[{host}]" if ":" in host else host
            print(f"listening on http://{where}:{port}/mcp", file=sys.stderr, flush=True)


async def serve(args: argparse.Namespace, app: App) -> None:
    """Serves app at args.addr until SIGINT or SIGTERM, then closes the sealer client."""
    host, port = _split(args.addr)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family)
    async with contextlib.AsyncExitStack() as stack:
        sealer: SealerClient | None = None if args.sdk_boundary else await stack.enter_async_context(sealer_client(args))
        asgi = app(host, sealer)
        if args.api_keys:
            asgi = _with_api_keys(asgi, args.api_keys)
        if args.calls:
            asgi = _with_calls(asgi)
        config = uvicorn.Config(asgi, log_level="warning", lifespan="on")
        await _Server(config).serve(sockets=[sock])
