"""Issue 42, "failures an author can act on": the options and the
classification that came with the fix (the deadline option, the causes of a
failure on the way, the start-up check's opt-out, TLS options read at
construction). A sealer in memory stands for the real one. The test of each
defect itself, which fails on the code before the fix by its behaviour, is
in test_issue42_unit.py."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import grpc
import pytest
from fastmcp import FastMCP
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from mcp_sealer import TLS, Reason, Sealed, SealerError, grpc_client, rest_client
from mcp_sealer._errors import TLS_FAILURE
from mcp_sealer._grpc import from_grpc
from mcp_sealer.mcp import SEALER_UNAVAILABLE, SealedRequestState, SealerUnready, sealed_request_state

from .test_issue42_unit import self_signed

PROTOCOL = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientInfo": {"name": "unit", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}
ASK = {"method": "elicitation/create", "params": {"mode": "form", "message": "Sure?", "requestedSchema": {"type": "object", "properties": {}}}}


def ctx(params: dict[str, Any]) -> ServerRequestContext[Any, Any]:
    return ServerRequestContext(session=None, lifespan_context={}, protocol_version=PROTOCOL, method="tools/call", params=params, request_id=1)  # type: ignore[arg-type]


def tools_call() -> dict[str, Any]:
    return {"_meta": META, "name": "book", "arguments": {"seat": "1A"}}


async def ask_again(c: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """A handler that asks on every round: its result is sealed."""
    return {"resultType": "input_required", "inputRequests": {"confirm": ASK}, "requestState": "asked"}


class FailingSealer:
    """A sealer whose every seal fails with error (or hangs, with None). Counts the calls."""

    url = "http://sealer.example:7443"

    def __init__(self, error: SealerError | None) -> None:
        self.error = error
        self.calls = 0
        self.closed = 0

    async def seal(self, **_: Any) -> Sealed:
        self.calls += 1
        if self.error is None:
            await asyncio.Event().wait()  # hung
        raise self.error

    async def open(self, request_state: str, **kw: Any) -> Any:
        return await self.seal(**kw)

    async def close(self) -> None:
        self.closed += 1


BAD_TOKEN = SealerError(Reason.UNAUTHENTICATED, "sealer: unauthenticated: bearer token not recognized", 16)
TLS_BAD = SealerError(Reason.UNSPECIFIED, "sealer: TLS handshake failed", cause=TLS_FAILURE)


async def test_a_hung_sealer_costs_one_deadline() -> None:
    sealer = FailingSealer(None)
    mw = SealedRequestState(sealer, allow_anonymous=True, deadline=0.2, attempts=5)
    with pytest.raises(MCPError) as e:
        # Far more than the deadline, far less than 3 attempts of the client's 10 s.
        await asyncio.wait_for(mw(ctx(tools_call()), ask_again), 5)
    assert e.value.error.data == {"reason": SEALER_UNAVAILABLE}


def test_tls_and_4xx_never_retryable() -> None:
    for e in (
        TLS_BAD,
        SealerError(Reason.UNSPECIFIED, "sealer: HTTP 400 without a JSON body", 400, "http_status"),
        SealerError(Reason.UNSPECIFIED, "sealer: HTTP 404", 404, "http_status"),
        BAD_TOKEN,
    ):
        assert not e.retryable and e.misconfigured and not e.unavailable, e
    assert SealerError(Reason.UNSPECIFIED, "sealer: HTTP 503", 503, "http_status").retryable


def test_grpc_tls_failure_is_misconfigured() -> None:
    class Err(grpc.aio.AioRpcError):
        def __init__(self) -> None:
            super().__init__(
                grpc.StatusCode.UNAVAILABLE,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(),
                details="failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:7443: Ssl handshake failed: CERTIFICATE_VERIFY_FAILED",
            )

    e = from_grpc(Err())
    assert e.cause == TLS_FAILURE and not e.retryable and e.misconfigured, repr(e)
    assert "UNSPECIFIED" not in repr(e)


@pytest.mark.parametrize("form", ["path", "str path", "PEM str", "bytes"])
def test_tls_takes_paths_str_or_bytes(tmp_path: Path, form: str) -> None:
    cert, key = self_signed(tmp_path, "client")
    as_form = {
        "path": lambda p: p,
        "str path": lambda p: str(p),
        "PEM str": lambda p: p.read_text(),
        "bytes": lambda p: p.read_bytes(),
    }[form]
    tls = TLS(ca=as_form(cert), cert=as_form(cert), key=as_form(key))
    assert tls.ca == cert.read_bytes() and tls.key == key.read_bytes()
    # Both transports take it alike.
    grpc_client("https://localhost:7443", tls=tls)
    rest_client("https://localhost:7443", tls=tls)
    with pytest.raises(ValueError, match="cannot read"):
        TLS(ca=str(tmp_path / "missing.pem"))


@pytest.mark.parametrize("kind", ["MCPServer", "lowlevel", "FastMCP"])
async def test_start_up_check_can_be_opted_out(kind: str) -> None:
    # That the check runs at start, and stops the server: test_issue42_unit.py.
    make = {"MCPServer": lambda: MCPServer("s"), "lowlevel": lambda: Server("s"), "FastMCP": lambda: FastMCP("s")}[kind]
    server = make()
    sealer = FailingSealer(BAD_TOKEN)
    sealed_request_state(server, sealer, allow_anonymous=True, check_at_start=False)  # type: ignore[arg-type]
    lowlevel = server if isinstance(server, Server) else getattr(server, "_lowlevel_server", None) or server._mcp_server  # type: ignore[union-attr]
    async with lowlevel.lifespan(lowlevel):
        pass
    assert sealer.calls == 0 and sealer.closed == 1


async def test_start_up_check_says_where_and_why(caplog: pytest.LogCaptureFixture) -> None:
    server = MCPServer("s")
    sealed_request_state(server, FailingSealer(BAD_TOKEN), allow_anonymous=True)  # type: ignore[arg-type]
    lowlevel = server._lowlevel_server
    with caplog.at_level(logging.INFO, logger="mcp_sealer.mcp"), pytest.raises(SealerUnready, match="misconfigured: UNAUTHENTICATED"):
        async with lowlevel.lifespan(lowlevel):
            pass
    assert "http://sealer.example:7443" in caplog.text and "UNAUTHENTICATED" in caplog.text
