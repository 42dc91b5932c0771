"""The clients' refusals of what is not the sealer's, without a sealer: the
error paths a real sealer never takes."""

from __future__ import annotations

import pytest

from mcp_sealer import TLS, Reason, SealerError, grpc_client, rest_client
from mcp_sealer.client import opened_of, sealed_of
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
        assert e.value.retryable
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
    }  # fmt: skip
    assert retryable == {Reason.UNSPECIFIED, Reason.LEDGER_UNAVAILABLE, Reason.KEYS_UNAVAILABLE, Reason.RESOURCE_EXHAUSTED}
    assert not rejected & retryable


def test_reasons_are_the_protos() -> None:
    # One vocabulary: the enum here is the proto's, name for name.
    assert {f"REASON_{r.name}": int(r) for r in Reason} == dict(pb.Reason.items())
