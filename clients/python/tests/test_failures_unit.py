"""Issue 42, "failures an author can act on": what the MCP client and the
server's log see of each way the sealer can fail, the one deadline bounding a
hung sealer, the start-up check, and TLS options as paths, str or bytes. A
sealer in memory (or a socket that answers like a TLS port) stands for the
real one; tests/integration shows the real one."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fastmcp import FastMCP
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from mcp_sealer import TLS, Reason, Sealed, SealerError, grpc_client, rest_client
from mcp_sealer._grpc import from_grpc
from mcp_sealer.errors import TLS_FAILURE
from mcp_sealer.mcp import SEALER_MISCONFIGURED, SEALER_UNAVAILABLE, SealedRequestState, SealerUnready, sealed_request_state

NOW = dt.datetime.now(dt.timezone.utc)
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


UNAVAILABLE = SealerError(Reason.UNSPECIFIED, "sealer: unreachable", cause="unreachable")
LEDGER_DOWN = SealerError(Reason.LEDGER_UNAVAILABLE, "sealer: ledger unavailable", 14)
BAD_TOKEN = SealerError(Reason.UNAUTHENTICATED, "sealer: unauthenticated: bearer token not recognized", 16)
TLS_BAD = SealerError(Reason.UNSPECIFIED, "sealer: TLS handshake failed", cause=TLS_FAILURE)


@pytest.mark.parametrize(
    ("error", "reason"),
    [(UNAVAILABLE, SEALER_UNAVAILABLE), (LEDGER_DOWN, SEALER_UNAVAILABLE), (BAD_TOKEN, SEALER_MISCONFIGURED), (TLS_BAD, SEALER_MISCONFIGURED)],
)
async def test_failures_reach_the_client_distinct_and_bare(error: SealerError, reason: str, caplog: pytest.LogCaptureFixture) -> None:
    sealer = FailingSealer(error)
    mw = SealedRequestState(sealer, allow_anonymous=True, backoff_seconds=0.001)
    with caplog.at_level(logging.INFO, logger="mcp_sealer.mcp"), pytest.raises(MCPError) as e:
        await mw(ctx(tools_call()), ask_again)
    got = e.value.error
    assert got.code == -32603
    assert isinstance(got.data, dict) and got.data.get("reason") == reason, f"got {got.data}, want reason {reason}"
    wire = f"{got.message} {got.data}"
    for secret in ("sealer.example", "7443", "bearer", "unauthenticated", "TLS"):
        assert secret not in wire, f"the MCP client sees {secret!r}: {wire}"
    # Only what may pass is tried again.
    assert sealer.calls == (3 if error.retryable else 1)
    # The log says where and why, never UNSPECIFIED.
    assert "UNSPECIFIED" not in caplog.text
    assert "http://sealer.example:7443" in caplog.text and error.why in caplog.text, caplog.text


async def test_a_hung_sealer_costs_one_deadline() -> None:
    sealer = FailingSealer(None)
    mw = SealedRequestState(sealer, allow_anonymous=True, deadline=0.2, attempts=5)
    with pytest.raises(MCPError) as e:
        # Far more than the deadline, far less than 3 attempts of the client's 10 s.
        await asyncio.wait_for(mw(ctx(tools_call()), ask_again), 5)
    assert e.value.error.data == {"reason": SEALER_UNAVAILABLE}


def test_default_deadline_is_well_under_30s() -> None:
    mw = SealedRequestState(FailingSealer(None), allow_anonymous=True)
    assert mw._deadline <= 10


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


@contextmanager
def answering(reply: bytes) -> Iterator[int]:
    """A socket that answers every connection with reply, as Go's TLS listener answers plaintext HTTP."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()


async def test_rest_http_to_a_tls_port_is_not_retryable() -> None:
    reply = b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
    with answering(reply) as port:
        async with rest_client(f"http://127.0.0.1:{port}", timeout=2) as c:
            with pytest.raises(SealerError) as e:
                await c.seal(principal="alice", request=b"\x00" * 32)
    assert e.value.code == 400 and not e.value.retryable and e.value.misconfigured, repr(e.value)


def _self_signed(tmp: Path, name: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - dt.timedelta(days=1))
        .not_valid_after(NOW + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / f"{name}.pem", tmp / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_path, key_path


@pytest.mark.parametrize("form", ["path", "str path", "PEM str", "bytes"])
def test_tls_takes_paths_str_or_bytes(tmp_path: Path, form: str) -> None:
    cert, key = _self_signed(tmp_path, "client")
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


async def test_rest_tls_failure_is_misconfigured(tmp_path: Path) -> None:
    import ssl

    server_cert, server_key = _self_signed(tmp_path, "server")
    other_ca, _ = _self_signed(tmp_path, "other")
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(server_cert, server_key)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve() -> None:
        try:
            conn, _ = srv.accept()
            with conn, sctx.wrap_socket(conn, server_side=True) as s:
                s.recv(1)
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        for make in (rest_client, grpc_client):
            async with make(f"https://localhost:{srv.getsockname()[1]}", tls=TLS(ca=other_ca), timeout=3) as c:
                with pytest.raises(SealerError) as e:
                    await c.seal(principal="alice", request=b"\x00" * 32)
            assert e.value.cause == TLS_FAILURE and not e.value.retryable and e.value.misconfigured, (make.__name__, repr(e.value))
            if make is rest_client:
                threading.Thread(target=serve, daemon=True).start()
    finally:
        srv.close()


@pytest.mark.parametrize("kind", ["MCPServer", "lowlevel", "FastMCP"])
async def test_start_up_check_is_fatal_unless_opted_out(kind: str, caplog: pytest.LogCaptureFixture) -> None:
    make = {"MCPServer": lambda: MCPServer("s"), "lowlevel": lambda: Server("s"), "FastMCP": lambda: FastMCP("s")}[kind]
    server = make()
    sealer = FailingSealer(BAD_TOKEN)
    sealed_request_state(server, sealer, allow_anonymous=True)  # type: ignore[arg-type]
    lowlevel = server if isinstance(server, Server) else getattr(server, "_lowlevel_server", None) or server._mcp_server  # type: ignore[union-attr]
    with caplog.at_level(logging.INFO, logger="mcp_sealer.mcp"), pytest.raises(SealerUnready, match="misconfigured: UNAUTHENTICATED"):
        async with lowlevel.lifespan(lowlevel):
            raise AssertionError("the server started with a sealer that refuses its credentials")
    assert "http://sealer.example:7443" in caplog.text and "UNAUTHENTICATED" in caplog.text
    assert sealer.closed == 0  # it never started: nothing to close

    server = make()
    sealer = FailingSealer(BAD_TOKEN)
    sealed_request_state(server, sealer, allow_anonymous=True, check_at_start=False)  # type: ignore[arg-type]
    lowlevel = server if isinstance(server, Server) else getattr(server, "_lowlevel_server", None) or server._mcp_server  # type: ignore[union-attr]
    async with lowlevel.lifespan(lowlevel):
        pass
    assert sealer.calls == 0 and sealer.closed == 1
