"""The sealer over REST: the grpc-gateway mapping (POST /v1/seal, /v1/open and
/v1/record with the proto's JSON, bytes as base64), with httpx."""

from __future__ import annotations

import asyncio
import json
import math
import os
import ssl
import tempfile
from typing import Any, TypeVar

import httpx
from google.protobuf import json_format
from google.protobuf.message import Message

from ._client import DEFAULT_TIMEOUT, MAX_OUTCOME, LoopBound, SealerClient, Token, base_url, token_of
from ._errors import DEADLINE, HTTP_STATUS, NOT_THE_SEALER, TLS_FAILURE, UNREACHABLE, Reason, SealerError
from ._tls import TLS
from .gen.sealer.v1 import sealer_pb2 as pb

# The largest reply read from the sealer: the largest recorded outcome, in base64, and its JSON.
_MAX_REPLY = 2 * MAX_OUTCOME
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"

M = TypeVar("M", bound=Message)


class RestClient(SealerClient):
    """A client of the sealer's REST API. Safe for concurrent use by the tasks of one event loop.

    Like ``GrpcClient``, it may be built at import time: its connection pool
    is made on first use in the running event loop, and again in another."""

    def __init__(self, url: str, *, token: Token | None = None, tls: TLS | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        base, _ = base_url(url, tls, token)
        self.url = base
        verify: ssl.SSLContext | bool = True
        if tls is not None:
            verify = _ssl_context(tls)
        self._http = LoopBound(
            lambda: httpx.AsyncClient(
                base_url=base,
                verify=verify,
                timeout=timeout,
                limits=httpx.Limits(max_keepalive_connections=64, max_connections=256),
            )
        )
        self._token = token
        self._timeout = timeout
        self._extensions = {"sni_hostname": tls.server_name} if tls is not None and tls.server_name else {}

    async def _post(self, path: str, msg: Message, reply: M, timeout: float | None) -> M:
        # httpx's timeout bounds each read, not the call: a reply that
        # trickles in would outlive it. The deadline is the call's.
        deadline = timeout or self._timeout
        try:
            return await asyncio.wait_for(self._exchange(path, msg, reply, deadline), deadline)
        except asyncio.TimeoutError:
            raise SealerError(Reason.UNSPECIFIED, "sealer: deadline exceeded", cause=DEADLINE) from None

    async def _exchange(self, path: str, msg: Message, reply: M, timeout: float) -> M:
        # The call's deadline, as a gRPC client sends it (the gateway reads
        # it): a retry waiting for an outcome gets IN_PROGRESS within it.
        headers = {"content-type": "application/json", "grpc-timeout": _grpc_timeout(timeout)}
        token = await token_of(self._token)
        if token:
            headers["authorization"] = f"Bearer {token}"
        body = json.dumps(json_format.MessageToDict(msg), separators=(",", ":"))
        try:
            async with self._http.get().stream(
                "POST",
                path,
                content=body.encode(),
                headers=headers,
                timeout=timeout,
                extensions=self._extensions,
            ) as res:
                if int(res.headers.get("content-length") or 0) > _MAX_REPLY:
                    raise SealerError(Reason.UNSPECIFIED, "sealer: the reply is too large", res.status_code, NOT_THE_SEALER)
                data = bytearray()
                async for chunk in res.aiter_bytes():
                    data += chunk
                    if len(data) > _MAX_REPLY:
                        raise SealerError(Reason.UNSPECIFIED, "sealer: the reply is too large", res.status_code, NOT_THE_SEALER)
                status = res.status_code
        except httpx.TimeoutException:
            raise SealerError(Reason.UNSPECIFIED, "sealer: deadline exceeded", cause=DEADLINE) from None
        except httpx.HTTPError as e:
            if _tls_failure(e):
                raise SealerError(Reason.UNSPECIFIED, "sealer: TLS handshake failed (certificate, CA or server name)", cause=TLS_FAILURE) from None
            raise SealerError(Reason.UNSPECIFIED, "sealer: unreachable", cause=UNREACHABLE) from None
        try:
            parsed: Any = json.loads(data)
        except ValueError:
            raise SealerError(Reason.UNSPECIFIED, f"sealer: HTTP {status} without a JSON body", status, HTTP_STATUS) from None
        if status != 200:
            raise from_rest(status, parsed)
        try:
            return json_format.ParseDict(parsed, reply, ignore_unknown_fields=True)
        except (json_format.ParseError, TypeError, ValueError):
            raise SealerError(Reason.UNSPECIFIED, "sealer: the reply is not the sealer's", status, NOT_THE_SEALER) from None

    async def _seal(self, msg: pb.SealRequest, timeout: float | None) -> pb.SealResponse:
        return await self._post("/v1/seal", msg, pb.SealResponse(), timeout)

    async def _open(self, msg: pb.OpenRequest, timeout: float | None) -> pb.OpenResponse:
        return await self._post("/v1/open", msg, pb.OpenResponse(), timeout)

    async def _record(self, msg: pb.RecordRequest, timeout: float | None) -> pb.RecordResponse:
        return await self._post("/v1/record", msg, pb.RecordResponse(), timeout)

    async def close(self) -> None:
        http = self._http.take()
        if http is not None:
            await http.aclose()


def _grpc_timeout(seconds: float) -> str:
    """A deadline as gRPC's Grpc-Timeout header writes it: whole milliseconds,
    at most 8 digits."""
    return f"{min(max(math.ceil(seconds * 1000), 1), 99_999_999)}m"


def from_rest(status: int, body: object) -> SealerError:
    """Maps a gateway error body ({code, message, details: [ErrorInfo...]}) to a SealerError."""
    reason = Reason.UNSPECIFIED
    message = f"HTTP {status}"
    if isinstance(body, dict):
        m = body.get("message")
        if isinstance(m, str) and m:
            message = m[:512]
        details = body.get("details")
        if isinstance(details, list):
            for d in details:
                if isinstance(d, dict) and d.get("@type") == _ERROR_INFO:
                    reason = Reason.parse(d.get("reason"))
                    break
    cause = None if reason is not Reason.UNSPECIFIED else HTTP_STATUS
    return SealerError(reason, message if message.startswith("sealer") else f"sealer: {message}", status, cause)


def _tls_failure(e: BaseException) -> bool:
    """Whether an httpx error came from the TLS handshake (a certificate, a CA,
    a name, or plaintext where TLS was expected)."""
    seen: BaseException | None = e
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    text = str(e)
    return "CERTIFICATE_VERIFY_FAILED" in text or ("SSL" in text and "handshake" in text.lower()) or "WRONG_VERSION_NUMBER" in text


def _ssl_context(tls: TLS) -> ssl.SSLContext:
    # With a CA given, only that CA (the system's roots are not loaded), as the gRPC client trusts only it.
    ca, cert, key = tls.ca_pem, tls.cert_pem, tls.key_pem
    ctx = ssl.create_default_context(cadata=ca.decode() if ca else None)
    if cert is not None and key is not None:
        # ssl loads a certificate chain only from files: a private directory, removed at once.
        with tempfile.TemporaryDirectory() as d:
            cert_path, key_path = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
            for path, data in ((cert_path, cert), (key_path, key)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
            ctx.load_cert_chain(cert_path, key_path)
    return ctx
