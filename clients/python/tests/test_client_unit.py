"""The clients' refusals of what is not the sealer's, without a sealer: the
error paths a real sealer never takes."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from mcp_sealer import TLS, Reason, SealerError, grpc_client, rest_client
from mcp_sealer._client import opened_of, sealed_of
from mcp_sealer.gen.sealer.v1 import sealer_pb2 as pb


@pytest.mark.parametrize("make", [grpc_client, rest_client])
@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1", "ftp://127.0.0.1:1", "http://127.0.0.1:1/sealer", "http://127.0.0.1:1/?x=1", "127.0.0.1:1"],
)
def test_urls_refused(make: object, url: str) -> None:
    with pytest.raises(ValueError, match="URL"):
        make(url)  # type: ignore[operator]


@pytest.mark.parametrize("make", [grpc_client, rest_client])
def test_tls_options_need_https(make: object) -> None:
    with pytest.raises(ValueError, match="https"):
        make("http://127.0.0.1:7443", tls=TLS(ca=b"-----BEGIN CERTIFICATE-----"))  # type: ignore[operator]


# A bearer token is a credential: over plaintext it goes only to this host.
# Names are not resolved: "localhost" is the only name taken for loopback.
OFF_LOOPBACK = [
    "http://10.0.0.7:7443",
    "http://192.0.2.2:7443",
    "http://[fd00::2]:7443",
    "http://[::ffff:10.0.0.7]:7443",
    "http://sealer.internal:7443",
    "http://localhost.example.com:7443",
    "http://127.0.0.1.nip.io:7443",
    "http://0.0.0.0:7443",
]
LOOPBACK = ["http://127.0.0.1:7443", "http://127.8.9.10:7443", "http://[::1]:7443", "http://localhost:7443", "http://LocalHost:7443", "http://[::ffff:127.0.0.1]:7443"]


@pytest.mark.parametrize("make", [grpc_client, rest_client])
@pytest.mark.parametrize("url", OFF_LOOPBACK)
@pytest.mark.parametrize("token", ["a-token", lambda: "a-token"], ids=["str", "function"])
def test_token_over_plaintext_off_loopback_refused(make: object, url: str, token: object) -> None:
    with pytest.raises(ValueError, match="plaintext") as e:
        make(url, token=token)  # type: ignore[operator]
    assert "https://" in str(e.value)


@pytest.mark.parametrize("make", [grpc_client, rest_client])
@pytest.mark.parametrize("url", LOOPBACK)
async def test_token_over_plaintext_to_loopback_allowed(make: object, url: str) -> None:
    await make(url, token="a-token").close()  # type: ignore[operator]  # noqa: S106


@pytest.mark.parametrize("make", [grpc_client, rest_client])
@pytest.mark.parametrize("url", OFF_LOOPBACK)
async def test_plaintext_without_token_allowed(make: object, url: str) -> None:
    # Nothing secret of the client's own to lose: the sealer decides (it
    # refuses plaintext off loopback itself).
    await make(url).close()  # type: ignore[operator]


def _non_loopback_address() -> str | None:
    """An address of this host that is not loopback, or None when it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: it only picks a route
        except OSError:
            return None
        addr: str = s.getsockname()[0]
    return None if addr.startswith("127.") else addr


# An empty HTTP/2 SETTINGS frame: a gRPC client sends its request only once the
# server's settings arrived.
_H2_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


@contextlib.contextmanager
def _capture(host: str) -> Iterator[tuple[str, bytearray]]:
    """A plaintext listener on host standing for the network between a client
    and a sealer: what any hop there could read."""
    seen = bytearray()
    with socket.create_server((host, 0)) as srv:

        def read() -> None:
            with contextlib.suppress(OSError):
                conn, _ = srv.accept()
                with conn:
                    conn.sendall(_H2_SETTINGS)
                    conn.settimeout(1)
                    while data := conn.recv(65536):
                        seen.extend(data)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        yield f"{host}:{srv.getsockname()[1]}", seen
        srv.close()
        reader.join(5)


@pytest.mark.parametrize("make", [grpc_client, rest_client])
async def test_token_never_sent_in_clear_off_loopback(make: object) -> None:
    host = _non_loopback_address()
    if host is None:
        pytest.skip("this host has no address but loopback")
    # Characters of long Huffman codes: HPACK (gRPC) then sends the value as it is.
    token = "~~~~||||^^^^}}}}{{{{~~~~"  # noqa: S105
    refusal = None
    with _capture(host) as (addr, seen):
        try:
            client = make(f"http://{addr}", token=token, timeout=0.5)  # type: ignore[operator]
        except ValueError as e:
            refusal = e
        else:
            with contextlib.suppress(SealerError):
                await asyncio.wait_for(client.seal(principal="alice", request=b"\x00" * 32), 2)
            await client.close()
    assert token.encode() not in seen, f"the bearer token went over plaintext to {addr}"
    assert refusal is not None and "plaintext" in str(refusal), refusal


def test_client_certificate_needs_its_key() -> None:
    with pytest.raises(ValueError, match="key"):
        TLS(cert=b"cert")
    with pytest.raises(ValueError, match="certificate"):
        TLS(key=b"key")


def test_replies_that_are_not_the_sealers() -> None:
    # A 200 from something else parses as an empty message: never an open.
    for call in (lambda: opened_of(pb.OpenResponse(payload=b'{"step":2}'), "s"), lambda: sealed_of(pb.SealResponse(), False)):
        with pytest.raises(SealerError) as e:
            call()
        assert e.value.reason is Reason.UNSPECIFIED
        # Another service answered: retrying cannot help (issue 42).
        assert not e.value.retryable and e.value.misconfigured
    res = pb.SealResponse(request_state="AQ")
    res.expires_at.GetCurrentTime()
    # A seal that asked for a flow and got none (a release without flows).
    with pytest.raises(SealerError, match="no flow"):
        sealed_of(res, True)
    assert sealed_of(res, False).request_state == "AQ"


def test_reasons_parse_as_the_sealer_sends_them() -> None:
    assert Reason.parse("ALREADY_CONSUMED") is Reason.ALREADY_CONSUMED
    assert Reason.parse("REASON_EXPIRED") is Reason.EXPIRED
    for junk in ("", "UNKNOWN", "expired", None, 5):
        assert Reason.parse(junk) is Reason.UNSPECIFIED
    rejected = {r for r in Reason if SealerError(r, "m").rejected}
    retryable = {r for r in Reason if SealerError(r, "m").retryable}
    assert rejected == {
        Reason.INVALID_STATE, Reason.EXPIRED, Reason.PRINCIPAL_MISMATCH, Reason.REQUEST_MISMATCH,
        Reason.ALREADY_CONSUMED, Reason.INPUT_MISMATCH, Reason.FLOW_EXPIRED, Reason.FLOW_EXHAUSTED,
        Reason.OUTCOME_CONFLICT,
    }  # fmt: skip
    # UNSPECIFIED is retried only for a cause that may pass (unreachable, a deadline);
    # IN_PROGRESS is a retry whose answer a later retry gets.
    assert retryable == {Reason.LEDGER_UNAVAILABLE, Reason.KEYS_UNAVAILABLE, Reason.RESOURCE_EXHAUSTED, Reason.IN_PROGRESS}
    assert not rejected & retryable


def test_reasons_are_the_protos() -> None:
    # One vocabulary: the enum here is the proto's, name for name.
    assert {f"REASON_{r.name}": int(r) for r in Reason} == dict(pb.Reason.items())
