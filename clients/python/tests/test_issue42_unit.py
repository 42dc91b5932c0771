"""Issue 42, one test per defect, each failing on the code before the fix
(2e4327a) by the defect's behaviour, not by a missing name: this file imports
only names that existed then, and reaches the behaviour through the public
clients (``grpc_client``, ``rest_client``, ``TLS``) and the middleware's entry
point (``sealed_request_state``) with their defaults. The two defects that
need the real sealer are tests/integration/test_client.py
(``test_tls_pem_as_path_str_or_bytes``) and tests/integration/test_readme.py
(``test_module_level_client_in_server_run_loop``).

A sealer in memory stands in for the sealer's own answers (a ledger down, a
token refused); the failures on the way to it are real sockets: a closed
port, a listener that never answers, a TLS server whose CA the client does
not trust, a TLS port answering plaintext HTTP with 400.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

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

import mcp_sealer
from mcp_sealer import TLS, Reason, Sealed, SealerClient, SealerError, grpc_client, rest_client
from mcp_sealer import mcp as sealer_mcp
from mcp_sealer.mcp import sealed_request_state

PROTOCOL = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientInfo": {"name": "unit", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}
ASK = {"method": "elicitation/create", "params": {"mode": "form", "message": "Sure?", "requestedSchema": {"type": "object", "properties": {}}}}
# What the MCP client is told, by data.reason (mcp_sealer.mcp.SEALER_UNAVAILABLE
# and SEALER_MISCONFIGURED, written out: the names came with the fix).
UNAVAILABLE = "sealer_unavailable"
MISCONFIGURED = "sealer_misconfigured"


def alice(_: ServerRequestContext[Any, Any]) -> str:
    return "alice"


def ctx() -> ServerRequestContext[Any, Any]:
    """Round 1 of a tools/call: no requestState yet."""
    params = {"_meta": META, "name": "book", "arguments": {"seat": "1A"}}
    return ServerRequestContext(session=None, lifespan_context={}, protocol_version=PROTOCOL, method="tools/call", params=params, request_id=1)  # type: ignore[arg-type]


async def ask(c: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """A handler that asks: its result is sealed."""
    return {"resultType": "input_required", "inputRequests": {"confirm": ASK}, "requestState": "asked"}


class FailingSealer:
    """A sealer whose every seal fails with error. Counts the calls."""

    url = "http://sealer.example:7443"

    def __init__(self, error: SealerError) -> None:
        self.error = error
        self.calls = 0
        self.closed = 0

    async def seal(self, **_: Any) -> Sealed:
        self.calls += 1
        raise self.error

    async def open(self, request_state: str, **kw: Any) -> Any:
        return await self.seal(**kw)

    async def close(self) -> None:
        self.closed += 1


def ledger_down() -> SealerError:
    return SealerError(Reason.LEDGER_UNAVAILABLE, "sealer: ledger unavailable", 14)


def token_refused() -> SealerError:
    return SealerError(Reason.UNAUTHENTICATED, "sealer: unauthenticated: bearer token not recognized", 16)


def closed_port() -> int:
    """A loopback port nothing listens on: connections to it are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@contextmanager
def listening(serve: Callable[[socket.socket], None]) -> Iterator[int]:
    """A loopback listener that hands every connection to serve, each in a thread of its own."""
    srv = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()


def answering(reply: bytes) -> Callable[[socket.socket], None]:
    """Answers a connection with reply, then reads what is left of the request
    before closing: a close with unread bytes would reset the connection,
    which the client would take for an unreachable sealer."""

    def serve(conn: socket.socket) -> None:
        with conn, suppress(OSError):
            conn.settimeout(10)
            conn.recv(65536)
            conn.sendall(reply)
            conn.shutdown(socket.SHUT_WR)
            while conn.recv(65536):
                pass

    return serve


# What Go's TLS listener answers a plaintext HTTP request with.
PLAINTEXT_TO_TLS = b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"


# An empty HTTP/2 SETTINGS frame: the gRPC client then sends its call, which is never answered.
_H2_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def hung(conn: socket.socket) -> None:
    """A sealer that accepts, speaks HTTP/2's first frame, then never answers."""
    with conn, suppress(OSError):
        conn.sendall(_H2_SETTINGS)
        while conn.recv(65536):
            pass


def self_signed(tmp: Path, name: str) -> tuple[Path, Path]:
    """A self-signed CA certificate for localhost, and its key: their PEM files in tmp."""
    now = dt.datetime.now(dt.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / f"{name}.pem", tmp / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_path, key_path


def tls_server(tmp: Path) -> Callable[[socket.socket], None]:
    """A TLS server whose certificate no CA the clients are given signed."""
    cert, key = self_signed(tmp, "server")
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(cert, key)
    sctx.set_alpn_protocols(["h2", "http/1.1"])

    def serve(conn: socket.socket) -> None:
        with conn, suppress(OSError), sctx.wrap_socket(conn, server_side=True) as s:
            s.recv(1)

    return serve


def untrusting(tmp: Path) -> TLS:
    """TLS options trusting a CA that did not sign tls_server's certificate (as bytes: a
    PEM str or a path is issue 42's other defect)."""
    other_ca, _ = self_signed(tmp, "other")
    return TLS(ca=other_ca.read_bytes(), server_name="localhost")


def failing(failure: str, tmp: Path, stack: ExitStack) -> tuple[SealerClient | FailingSealer, str]:
    """A sealer that fails so, and its address as the log names it."""
    if failure == "ledger down":
        return FailingSealer(ledger_down()), FailingSealer.url
    if failure == "token refused":
        return FailingSealer(token_refused()), FailingSealer.url
    if failure == "unreachable":
        port = closed_port()
        return grpc_client(f"http://127.0.0.1:{port}"), f"127.0.0.1:{port}"
    if failure == "TLS verification failed":
        port = stack.enter_context(listening(tls_server(tmp)))
        return rest_client(f"https://127.0.0.1:{port}", tls=untrusting(tmp)), f"127.0.0.1:{port}"
    port = stack.enter_context(listening(answering(PLAINTEXT_TO_TLS)))
    return rest_client(f"http://127.0.0.1:{port}"), f"127.0.0.1:{port}"


# Issue 42: "every sealer failure reached the MCP client as the same -32603
# Internal error [...]; the server log said requestState seal (UNSPECIFIED)
# failed". Before the fix: data None, and UNSPECIFIED in the log.
@pytest.mark.parametrize(
    ("failure", "want", "why"),
    [
        ("unreachable", UNAVAILABLE, "unreachable"),
        ("ledger down", UNAVAILABLE, "LEDGER_UNAVAILABLE"),
        ("token refused", MISCONFIGURED, "UNAUTHENTICATED"),
        ("TLS verification failed", MISCONFIGURED, "tls"),
        ("HTTP 400 from a TLS port", MISCONFIGURED, "HTTP 400"),
    ],
)
async def test_issue42_each_failure_reaches_the_client_as_its_kind(failure: str, want: str, why: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with ExitStack() as stack:
        sealer, where = failing(failure, tmp_path, stack)
        mw = sealed_request_state(MCPServer("s"), sealer, principal=alice, backoff_seconds=0.001)  # type: ignore[arg-type]
        try:
            with caplog.at_level(logging.INFO, logger="mcp_sealer.mcp"), pytest.raises(MCPError) as e:
                await asyncio.wait_for(mw(ctx(), ask), 60)
        finally:
            await sealer.close()
    got = e.value.error
    problems = []
    if got.code != -32603 or not isinstance(got.data, dict) or got.data.get("reason") != want:
        problems.append(f"the MCP client got {got.code} {got.message!r} data={got.data!r}, want -32603 with data.reason {want!r}")
    wire = f"{got.message} {got.data}"
    for secret in (where, "bearer", "unauthenticated", "TLS", "400"):
        if secret in wire:
            problems.append(f"the MCP client sees {secret!r}: {wire}")
    if "UNSPECIFIED" in caplog.text:
        problems.append(f"the log says UNSPECIFIED: {caplog.text.strip()!r}")
    if where not in caplog.text or why not in caplog.text:
        problems.append(f"the log does not name both the sealer at {where} and {why!r}: {caplog.text.strip()!r}")
    # Only what may pass is tried again.
    if isinstance(sealer, FailingSealer) and sealer.calls != (3 if sealer.error.retryable else 1):
        problems.append(f"the sealer was asked {sealer.calls} times")
    assert not problems, "; ".join(problems)


# Issue 42: "[...] after up to 30 s for a hung sealer (3 attempts x 10 s)".
# Before the fix: the call took 30 s, each attempt the client's 10 s.
async def test_issue42_a_hung_sealer_is_bounded_by_one_deadline() -> None:
    with listening(hung) as port:
        sealer = grpc_client(f"http://127.0.0.1:{port}")  # the client's default timeout, 10 s
        mw = sealed_request_state(MCPServer("s"), sealer, principal=alice)  # the middleware's defaults
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            with pytest.raises(MCPError) as e:
                await asyncio.wait_for(mw(ctx(), ask), 60)
        finally:
            await sealer.close()
        took = loop.time() - start
    assert e.value.error.code == -32603, e.value.error
    # One-sided and far from either figure: one 5 s deadline, against the 30 s before.
    assert took < 15, f"a hung sealer held the request {took:.1f} s, want well under 15 s (one deadline of 5 s, not 3 attempts of 10 s)"


# Issue 42: "REST reported a TLS verification failure as `sealer: unreachable`
# with retryable=True, and an HTTP 400 from a TLS port as retryable". The
# same TLS failure over gRPC was retryable too. Before the fix: retryable=True.
@pytest.mark.parametrize(("make", "failure"), [(rest_client, "TLS verification"), (grpc_client, "TLS verification"), (rest_client, "HTTP 400 from a TLS port")])
async def test_issue42_failures_that_cannot_pass_are_not_retryable(make: Callable[..., SealerClient], failure: str, tmp_path: Path) -> None:
    if failure == "TLS verification":
        serve, scheme, tls = tls_server(tmp_path), "https", untrusting(tmp_path)
    else:
        serve, scheme, tls = answering(PLAINTEXT_TO_TLS), "http", None
    with listening(serve) as port:
        async with make(f"{scheme}://127.0.0.1:{port}", tls=tls, timeout=5) as c:
            with pytest.raises(SealerError) as e:
                await c.seal(principal="alice", request=b"\x00" * 32)
    err = e.value
    assert not err.retryable, f"{make.__name__}, {failure}: got retryable=True ({err!r}), want False: retrying cannot help"
    if failure == "TLS verification":
        assert "unreachable" not in str(err) and "tls" in str(err).lower(), f"{make.__name__}: got {str(err)!r}, want a message that says TLS"
    else:
        assert err.code == 400, f"got code {err.code}, want 400"


# Issue 42: "a wrong token or a missing sealer was found only at the first
# tool call, never at start". Before the fix: the server started, the sealer
# never asked.
@pytest.mark.parametrize("kind", ["MCPServer", "lowlevel", "FastMCP"])
@pytest.mark.parametrize("failure", ["token refused", "no sealer"])
async def test_issue42_the_sealer_is_checked_at_start(kind: str, failure: str) -> None:
    makers: dict[str, Callable[[], Any]] = {"MCPServer": lambda: MCPServer("s"), "lowlevel": lambda: Server("s"), "FastMCP": lambda: FastMCP("s")}
    server = makers[kind]()
    sealer: SealerClient | FailingSealer
    if failure == "token refused":
        sealer, where, why = FailingSealer(token_refused()), FailingSealer.url, "UNAUTHENTICATED"
    else:
        port = closed_port()
        sealer, where, why = grpc_client(f"http://127.0.0.1:{port}"), f"127.0.0.1:{port}", "unreachable"
    sealed_request_state(server, sealer, principal=alice, backoff_seconds=0.001)  # type: ignore[arg-type]
    # What each server enters when it starts: the low-level server's lifespan.
    lowlevel = server if isinstance(server, Server) else getattr(server, "_lowlevel_server", None) or server._mcp_server
    started, failed = False, None
    try:
        async with lowlevel.lifespan(lowlevel):
            started = True
    except Exception as e:
        failed = e
    finally:
        await sealer.close()
    asked = f", the sealer asked {sealer.calls} times" if isinstance(sealer, FailingSealer) else ""
    assert not started, f"{kind} started with {failure}{asked}: found only at the first tool call"
    assert failed is not None and where in str(failed) and why in str(failed), f"got {failed!r}, want an error naming the sealer at {where} and {why!r}"


# Issue 42: '"the handler does not run" was true for opens only: on a failed
# seal the round-1 handler had run and its result was dropped'. The behaviour
# stays (the handler's result is what is sealed); what the package says of it
# is what changed. Before the fix: the docs said, of every failure, that the
# handler never runs.
_NOT_RUN = re.compile(r"handler (never runs|does not run|did not run|is not run)|no handler runs", re.I)


def _claims(text: str) -> tuple[list[str], bool]:
    """The clauses of text that say a handler does not run without saying of
    which call (an open, a retry, a round sent again), and whether text says that on a seal the
    handler has run."""
    clauses = re.split(r"(?<=[.;])\s+", " ".join(text.split()))
    unqualified = [c for c in clauses if _NOT_RUN.search(c) and not re.search(r"\bopen|\bretr|\bagain\b", c, re.I)]
    says_seal = any(re.search(r"\bseal\b.*\bhandler has (already )?run", c, re.I) for c in clauses)
    return unqualified, says_seal


def package_docs() -> dict[str, str]:
    """The docs of the package under test: its module's, and the README beside its source."""
    docs = {"mcp_sealer.mcp": sealer_mcp.__doc__ or ""}
    readme = Path(mcp_sealer.__file__).resolve().parents[2] / "README.md"
    if readme.is_file():
        docs["README.md"] = readme.read_text(encoding="utf-8")
    return docs


async def test_issue42_a_failed_seal_ran_the_handler_and_the_docs_say_so() -> None:
    runs = 0

    async def counting(c: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        nonlocal runs
        runs += 1
        return await ask(c)

    sealer = FailingSealer(ledger_down())
    mw = sealed_request_state(MCPServer("s"), sealer, principal=alice, backoff_seconds=0.001)  # type: ignore[arg-type]
    with pytest.raises(MCPError) as e:
        await mw(ctx(), counting)
    assert e.value.error.code == -32603 and sealer.calls >= 1, e.value.error
    assert runs == 1, f"the handler ran {runs} times on a failed seal, want once"
    for name, text in package_docs().items():
        unqualified, says_seal = _claims(text)
        assert not unqualified, f"{name} says the handler does not run, of any failure, but on a failed seal it ran: {unqualified}"
        assert says_seal, f"{name} does not say that on a failed seal the handler has run"


def test_issue42_doc_claims_are_read_as_meant() -> None:
    # The reading of the docs above, on the sentences before and after the fix.
    assert _claims("A sealer that cannot answer is tried, then the request fails closed (-32603, the handler never runs).") == (
        ["A sealer that cannot answer is tried, then the request fails closed (-32603, the handler never runs)."],
        False,
    )
    assert _claims("On an open the handler never runs; on a seal the handler has run and its result is dropped.") == ([], True)
    assert _claims("On a failed open the handler does not run. On a failed seal the handler has already run.") == ([], True)
