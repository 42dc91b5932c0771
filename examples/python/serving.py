"""What server.py and fastmcp_server.py share besides the tools: the command
line, the sealer client, and serving an ASGI app with uvicorn on a port it
binds itself (port 0 picks a free one), announcing
``listening on http://HOST:PORT/mcp`` on standard error once it accepts
connections.
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Callable

import uvicorn
from mcp_sealer import GrpcClient, RestClient, SealerClient, grpc_client, rest_client
from starlette.types import ASGIApp

App = Callable[[str, SealerClient], ASGIApp]
"""Builds the server's ASGI app for a listening host and a sealer client."""


def parse_args(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--addr", default="127.0.0.1:3001", help="host:port to listen on (port 0: a free one)")
    p.add_argument("--sealer", default="http://127.0.0.1:7443", help="the sealer's gRPC URL (its HTTP URL with --rest)")
    p.add_argument("--rest", action="store_true", help="call the sealer over REST instead of gRPC")
    p.add_argument("--one-time", action="store_true", help="seal one-time states: each opens once")
    return p.parse_args()


def sealer_client(args: argparse.Namespace) -> GrpcClient | RestClient:
    """The sealer client the flags name: gRPC by default, REST with --rest."""
    return rest_client(args.sealer) if args.rest else grpc_client(args.sealer)


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
    async with sealer_client(args) as sealer:
        config = uvicorn.Config(app(host, sealer), log_level="warning", lifespan="on")
        await _Server(config).serve(sockets=[sock])
