"""mcp_sealer: the sealer's Python client, and its seam for the official MCP SDK and FastMCP.

The sealer seals and opens the ``requestState`` of MCP Multi Round-Trip
Requests: bound to the principal, the originating request and a short
expiry, optionally opening once, rounds of one request bound as a flow.

    from mcp_sealer import grpc_client
    from mcp_sealer.mcp import sealed_request_state

    sealed_request_state(server, grpc_client("http://127.0.0.1:7443"))

on a server with the SDK's own auth; elsewhere pass ``principal=`` (or
``allow_anonymous=True``).

Everything public is here, and ``mcp_sealer.mcp`` for the SDK; the modules
whose names start with ``_`` are the implementation, and may change in any
release. A client is built by ``grpc_client`` or ``rest_client``, and
either is a ``SealerClient``.
"""

from __future__ import annotations

from . import _grpc, _rest
from ._answers_digest import answers_digest, answers_digest_json
from ._client import (
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
from ._digest import INPUT_REQUIRED_METHODS, MAX_DEPTH, MAX_SAFE_INTEGER, MAX_VALUES, check_param_name, request_digest, salient_params
from ._errors import Reason, SealerError
from ._tls import TLS

__all__ = [
    "DEFAULT_TIMEOUT",
    "INPUT_REQUIRED_METHODS",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "MAX_VALUES",
    "TLS",
    "Binding",
    "Flow",
    "FlowRequest",
    "Opened",
    "Outcome",
    "Reason",
    "Recorded",
    "Request",
    "Sealed",
    "SealerClient",
    "SealerError",
    "Token",
    "answers_digest",
    "answers_digest_json",
    "check_param_name",
    "flow_after",
    "grpc_client",
    "input_keys",
    "prompt_get",
    "request_digest",
    "resource_read",
    "rest_client",
    "salient_params",
    "tool_call",
]


def grpc_client(url: str, *, token: Token | None = None, tls: TLS | None = None, timeout: float = DEFAULT_TIMEOUT) -> SealerClient:
    """A client of the sealer's gRPC API at ``url`` (http://host:port, or https:// for TLS).

    ``token`` is a bearer token (or a function returning one for each call),
    sent over http:// only to loopback (else ValueError: use https://);
    ``timeout`` the deadline of each call in seconds unless the call gives its own.
    """
    return _grpc.GrpcClient(url, token=token, tls=tls, timeout=timeout)


def rest_client(url: str, *, token: Token | None = None, tls: TLS | None = None, timeout: float = DEFAULT_TIMEOUT) -> SealerClient:
    """A client of the sealer's REST API at ``url`` (http://host:port, or https:// for TLS),
    with the same options and the same refusal of a token over http:// off loopback."""
    return _rest.RestClient(url, token=token, tls=tls, timeout=timeout)
