"""mcp_sealer: the sealer's Python client, and its seam for the official MCP SDK and FastMCP.

The sealer seals and opens the ``requestState`` of MCP Multi Round-Trip
Requests: bound to the principal, the originating request and a short
expiry, optionally opening once, rounds of one request bound as a flow.

    from mcp_sealer import grpc_client
    from mcp_sealer.mcp import sealed_request_state

    sealed_request_state(server, grpc_client("http://127.0.0.1:7443"))

on a server with the SDK's own auth; elsewhere pass ``principal=`` (or
``allow_anonymous=True``).
"""

from __future__ import annotations

from ._grpc import GrpcClient
from ._rest import RestClient
from .client import (
    DEFAULT_TIMEOUT,
    Binding,
    Flow,
    FlowRequest,
    Opened,
    Outcome,
    Recorded,
    Request,
    Sealed,
    SealerClient,
    Token,
    flow_after,
    input_keys,
    prompt_get,
    resource_read,
    tool_call,
)
from .digest import request_digest
from .errors import Reason, SealerError
from .tls import TLS

__all__ = [
    "DEFAULT_TIMEOUT",
    "TLS",
    "Binding",
    "Flow",
    "FlowRequest",
    "GrpcClient",
    "Opened",
    "Outcome",
    "Reason",
    "Recorded",
    "Request",
    "RestClient",
    "Sealed",
    "SealerClient",
    "SealerError",
    "Token",
    "flow_after",
    "grpc_client",
    "input_keys",
    "prompt_get",
    "request_digest",
    "resource_read",
    "rest_client",
    "tool_call",
]


def grpc_client(url: str, *, token: Token | None = None, tls: TLS | None = None, timeout: float = DEFAULT_TIMEOUT) -> GrpcClient:
    """A client of the sealer's gRPC API at ``url`` (http://host:port, or https:// for TLS).

    ``token`` is a bearer token (or a function returning one for each call),
    sent over http:// only to loopback (else ValueError: use https://);
    ``timeout`` the deadline of each call in seconds unless the call gives its own.
    """
    return GrpcClient(url, token=token, tls=tls, timeout=timeout)


def rest_client(url: str, *, token: Token | None = None, tls: TLS | None = None, timeout: float = DEFAULT_TIMEOUT) -> RestClient:
    """A client of the sealer's REST API at ``url`` (http://host:port, or https:// for TLS),
    with the same options and the same refusal of a token over http:// off loopback."""
    return RestClient(url, token=token, tls=tls, timeout=timeout)
