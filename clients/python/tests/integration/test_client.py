"""The clients against a real sealer, over gRPC and REST alike: every field of
Seal and Open, the refusals as typed reasons, bearer tokens and mutual TLS."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from mcp_sealer import (
    TLS,
    FlowRequest,
    Reason,
    SealerClient,
    SealerError,
    flow_after,
    grpc_client,
    prompt_get,
    resource_read,
    rest_client,
    tool_call,
)

from .harness import Sealer, sealer

WEATHER = tool_call("get_weather", {"location": "New York", "days": 3})


@pytest.fixture(params=["grpc", "rest"])
async def client(request: pytest.FixtureRequest, real_sealer: Sealer) -> AsyncIterator[SealerClient]:
    c: SealerClient = grpc_client(real_sealer.grpc_url) if request.param == "grpc" else rest_client(real_sealer.rest_url)
    yield c
    await c.close()


async def refused(reason: Reason, call: Callable[[], object]) -> SealerError:
    with pytest.raises(SealerError) as e:
        await call()  # type: ignore[misc]
    assert e.value.reason is reason, f"got {e.value!r}, want {reason.name}"
    return e.value


async def test_seal_open_round_trip(client: SealerClient) -> None:
    sealed = await client.seal(principal="alice", request=WEATHER, payload=b'{"step":1}', ttl=60)
    assert sealed.request_state
    assert sealed.flow is None
    assert dt.timedelta(seconds=55) < sealed.expires_at - dt.datetime.now(dt.timezone.utc) <= dt.timedelta(seconds=61)
    # The retry carries the same request with members reordered and the MCP
    # additions: the digest ignores them.
    retry = tool_call("get_weather", {"days": 3, "location": "New York"})
    opened = await client.open(sealed.request_state, principal="alice", request=retry)
    assert opened.payload == b'{"step":1}'
    assert opened.request_state == sealed.request_state
    assert opened.expires_at == sealed.expires_at.replace(microsecond=sealed.expires_at.microsecond // 1000 * 1000)


async def test_refusals_are_typed(client: SealerClient) -> None:
    sealed = await client.seal(principal="alice", request=WEATHER, one_time=True)
    e = await refused(Reason.PRINCIPAL_MISMATCH, lambda: client.open(sealed.request_state, principal="mallory", request=WEATHER))
    assert e.rejected and not e.retryable
    assert "alice" not in str(e) and sealed.request_state not in str(e)
    await refused(
        Reason.REQUEST_MISMATCH, lambda: client.open(sealed.request_state, principal="alice", request=tool_call("get_weather", {"location": "Paris"}))
    )
    await refused(Reason.REQUEST_MISMATCH, lambda: client.open(sealed.request_state, principal="alice", request=prompt_get("get_weather")))
    await refused(Reason.INVALID_STATE, lambda: client.open(sealed.request_state + "-TAMPERED", principal="alice", request=WEATHER))
    await client.open(sealed.request_state, principal="alice", request=WEATHER)
    await refused(Reason.ALREADY_CONSUMED, lambda: client.open(sealed.request_state, principal="alice", request=WEATHER))
    # Refused by the client before anything is sent: the digest's rules.
    await refused(Reason.INVALID_ARGUMENT, lambda: client.seal(principal="alice", request=tool_call("t", {"n": 2**53})))
    await refused(Reason.INVALID_ARGUMENT, lambda: client.seal(principal="alice", request=tool_call("t", {"n": 1}), ttl=-1))


async def test_expiry(client: SealerClient) -> None:
    sealed = await client.seal(principal="alice", request=resource_read("file:///a"), ttl=1)
    await asyncio.sleep(1.2)
    # The sealer allows --skew (2 s by default) past expiry: wait it out.
    await asyncio.sleep(2.1)
    await refused(Reason.EXPIRED, lambda: client.open(sealed.request_state, principal="alice", request=resource_read("file:///a")))


async def test_digest_on_server_matches_the_client_digest(client: SealerClient) -> None:
    from mcp_sealer import Request

    sealed = await client.seal(principal="alice", request=Request(WEATHER.method, WEATHER.params, digest_on_server=True))
    opened = await client.open(sealed.request_state, principal="alice", request=WEATHER)
    assert opened.payload == b""


async def test_flows(client: SealerClient) -> None:
    r1 = await client.seal(principal="alice", request=WEATHER, payload=b"1", flow=FlowRequest(latest_only=True, asked=["city"]))
    assert r1.flow is not None and r1.flow.round == 1 and r1.flow.latest_only and len(r1.flow.id) == 16
    # The retry must answer exactly the asked keys, case included.
    await refused(Reason.INPUT_MISMATCH, lambda: client.open(r1.request_state, principal="alice", request=WEATHER, responded=["City"]))
    await refused(Reason.INPUT_MISMATCH, lambda: client.open(r1.request_state, principal="alice", request=WEATHER, responded=["city", "x"]))
    await refused(Reason.INPUT_MISMATCH, lambda: client.open(r1.request_state, principal="alice", request=WEATHER))
    o1 = await client.open(r1.request_state, principal="alice", request=WEATHER, responded=["city"])
    assert o1.flow is not None and o1.flow.id == r1.flow.id and o1.flow.round == 1
    r2 = await client.seal(principal="alice", request=WEATHER, payload=b"2", flow=flow_after(o1, asked=[]))
    assert r2.flow is not None and r2.flow.round == 2 and r2.flow.id == r1.flow.id and r2.flow.deadline == r1.flow.deadline
    o2 = await client.open(r2.request_state, principal="alice", request=WEATHER, responded=[])
    assert o2.payload == b"2"
    # Latest-only: neither round opens again (no rewind, no fork).
    await refused(Reason.ALREADY_CONSUMED, lambda: client.open(r1.request_state, principal="alice", request=WEATHER, responded=["city"]))
    await refused(Reason.ALREADY_CONSUMED, lambda: client.open(r2.request_state, principal="alice", request=WEATHER, responded=[]))
    # A flow continues only for its own principal.
    e = await refused(Reason.PRINCIPAL_MISMATCH, lambda: client.seal(principal="bob", request=WEATHER, flow=flow_after(o2)))
    assert e.rejected


async def test_unreachable_is_retryable() -> None:
    for c in (grpc_client("http://127.0.0.1:9", timeout=2), rest_client("http://127.0.0.1:9", timeout=2)):
        e = await refused(Reason.UNSPECIFIED, lambda c=c: c.seal(principal="a", request=WEATHER))  # type: ignore[misc]
        assert e.retryable and not e.rejected
        await c.close()


def _pki(d: str) -> tuple[dict[str, str], dict[str, bytes]]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate with a URI SAN:
    the paths of their PEM files in d, and their PEM bytes."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.timezone.utc)

    def cert(
        subject: str,
        key: ec.EllipticCurvePrivateKey,
        issuer: x509.Certificate | None,
        issuer_key: ec.EllipticCurvePrivateKey,
        sans: list[x509.GeneralName],
        ca: bool,
    ) -> x509.Certificate:
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
        b = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(issuer.subject if issuer else name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return b.sign(issuer_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = cert("test ca", ca_key, None, ca_key, [], True)
    files: dict[str, str] = {}
    pems: dict[str, bytes] = {}

    def write(name: str, data: bytes) -> None:
        # The sealer refuses a private key others may read, as an operator's.
        files[name], pems[name] = os.path.join(d, name), data
        with open(os.open(files[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(data)

    pem = serialization.Encoding.PEM
    write("ca.pem", ca.public_bytes(pem))
    for who, sans in (
        ("server", [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("sealer.test")]),
        ("client", [x509.UniformResourceIdentifier("spiffe://test/mcp/weather")]),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        write(f"{who}.pem", cert(who, key, ca, ca_key, sans, False).public_bytes(pem))
        write(f"{who}-key.pem", key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return files, pems


async def test_mutual_tls_and_bearer_tokens() -> None:
    with tempfile.TemporaryDirectory() as d:
        f, pem = _pki(d)
        token = "py-client-token-" + os.urandom(8).hex()
        tenants = os.path.join(d, "tenants.yaml")
        _write(
            tenants,
            "tenants:\n"
            '  weather:\n    mtls:\n      uris: ["spiffe://test/mcp/weather"]\n'
            f"  billing:\n    tokens:\n      - sha256:{hashlib.sha256(token.encode()).hexdigest()}\n",
        )
        with sealer("--tls-cert", f["server.pem"], "--tls-key", f["server-key.pem"], "--tls-client-ca", f["ca.pem"], "--tenants", tenants) as s:
            ca = pem["ca.pem"]
            mtls = TLS(ca=ca, cert=pem["client.pem"], key=pem["client-key.pem"])
            for make, addr in ((grpc_client, s.grpc), (rest_client, s.http)):
                url = f"https://{addr}"
                async with (
                    make(url, tls=mtls) as weather,
                    make(url, tls=TLS(ca=ca), token=token) as billing,
                    make(url, tls=TLS(ca=ca), token="wrong-token") as stranger,  # noqa: S106
                ):
                    a = await weather.seal(principal="alice", request=WEATHER)
                    assert (await weather.open(a.request_state, principal="alice", request=WEATHER)).payload == b""
                    b = await billing.seal(principal="alice", request=WEATHER)
                    # Tenants are isolated: billing cannot open weather's state.
                    await refused(Reason.INVALID_STATE, lambda b=billing, st=a.request_state: b.open(st, principal="alice", request=WEATHER))  # type: ignore[misc]
                    await refused(Reason.INVALID_STATE, lambda w=weather, st=b.request_state: w.open(st, principal="alice", request=WEATHER))  # type: ignore[misc]
                    e = await refused(Reason.UNAUTHENTICATED, lambda c=stranger: c.seal(principal="alice", request=WEATHER))  # type: ignore[misc]
                    assert token not in str(e)
                # A server name the certificate holds, though the address is an IP.
                async with make(url, tls=TLS(ca=ca, server_name="sealer.test"), token=token) as named:
                    await named.seal(principal="alice", request=WEATHER)


async def test_tls_pem_as_path_str_or_bytes() -> None:
    """Issue 42: TLS(ca=...) took only bytes; a PEM str or a path failed, with
    another exception per transport (before the fix: TypeError from gRPC's
    credentials, AttributeError from REST's ``.decode``). Each form of ca,
    cert and key, over both transports, against the real sealer over mutual
    TLS: a seal and its open complete."""
    with tempfile.TemporaryDirectory() as d:
        f, pem = _pki(d)
        tenants = os.path.join(d, "tenants.yaml")
        _write(tenants, 'tenants:\n  weather:\n    mtls:\n      uris: ["spiffe://test/mcp/weather"]\n')
        forms: dict[str, Callable[[str], object]] = {
            "bytes": lambda n: pem[n],
            "PEM str": lambda n: pem[n].decode(),
            "path": lambda n: Path(f[n]),
            "str path": lambda n: f[n],
        }
        problems = []
        with sealer("--tls-cert", f["server.pem"], "--tls-key", f["server-key.pem"], "--tls-client-ca", f["ca.pem"], "--tenants", tenants) as s:
            for form, as_form in forms.items():
                for make, addr in ((grpc_client, s.grpc), (rest_client, s.http)):
                    try:
                        tls = TLS(ca=as_form("ca.pem"), cert=as_form("client.pem"), key=as_form("client-key.pem"))  # type: ignore[arg-type]
                        async with make(f"https://{addr}", tls=tls) as c:
                            sealed = await c.seal(principal="alice", request=WEATHER)
                            await c.open(sealed.request_state, principal="alice", request=WEATHER)
                    except Exception as e:
                        problems.append(f"{make.__name__}, TLS(ca=, cert=, key=) as {form}: {type(e).__name__}: {e}")
        assert not problems, "\n".join(problems)


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


async def test_bearer_token_over_plaintext_to_loopback() -> None:
    """A token goes over plaintext only to loopback (the clients refuse any
    other host, see test_client_unit.py): there the real sealer takes it."""
    with tempfile.TemporaryDirectory() as d:
        token = "py-loopback-token-" + os.urandom(8).hex()
        tenants = os.path.join(d, "tenants.yaml")
        _write(tenants, f"tenants:\n  billing:\n    tokens:\n      - sha256:{hashlib.sha256(token.encode()).hexdigest()}\n")
        with sealer("--tenants", tenants) as s:
            for make, url in ((grpc_client, s.grpc_url), (rest_client, s.rest_url)):
                async with make(url, token=token) as billing, make(url, token="wrong-token") as stranger:  # noqa: S106
                    b = await billing.seal(principal="alice", request=WEATHER)
                    assert (await billing.open(b.request_state, principal="alice", request=WEATHER)).payload == b""
                    await refused(Reason.UNAUTHENTICATED, lambda c=stranger: c.seal(principal="alice", request=WEATHER))  # type: ignore[misc]
