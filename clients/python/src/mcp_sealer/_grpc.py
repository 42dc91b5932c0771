"""The sealer over gRPC: grpc.aio and the stubs generated from proto/."""

from __future__ import annotations

from typing import Any

import grpc
import grpc.aio
from google.rpc import error_details_pb2, status_pb2

from ._client import DEFAULT_TIMEOUT, MAX_OUTCOME, LoopBound, SealerClient, Token, base_url, token_of
from ._errors import DEADLINE, NOT_THE_SEALER, TLS_FAILURE, UNREACHABLE, Reason, SealerError
from ._tls import TLS
from .gen.sealer.v1 import sealer_pb2 as pb
from .gen.sealer.v1 import sealer_pb2_grpc

_STATUS_DETAILS = "grpc-status-details-bin"
# The largest reply read from the sealer: the largest recorded outcome and its message.
_MAX_REPLY = 2 * MAX_OUTCOME


class GrpcClient(SealerClient):
    """A client of the sealer's gRPC API. Safe for concurrent use by the tasks of one event loop.

    It may be built anywhere, at import time included: its channel is made on
    first use, in the running event loop, and made again if a later call runs
    in another loop (``LoopBound``)."""

    def __init__(self, url: str, *, token: Token | None = None, tls: TLS | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        base, secure = base_url(url, tls, token)
        self.url = base
        target = base.split("://", 1)[1]
        options: list[tuple[str, int | str]] = [("grpc.max_receive_message_length", _MAX_REPLY)]
        if secure:
            t = tls or TLS()
            creds = grpc.ssl_channel_credentials(root_certificates=t.ca_pem, private_key=t.key_pem, certificate_chain=t.cert_pem)
            if t.server_name:
                options.append(("grpc.ssl_target_name_override", t.server_name))
            self._channel = LoopBound(lambda: _connect(grpc.aio.secure_channel(target, creds, options=options)))
        else:
            self._channel = LoopBound(lambda: _connect(grpc.aio.insecure_channel(target, options=options)))
        self._token = token
        self._timeout = timeout

    def _stub(self) -> sealer_pb2_grpc.SealerAsyncStub:
        return self._channel.get()[1]

    async def _metadata(self) -> tuple[tuple[str, str], ...]:
        token = await token_of(self._token)
        return (("authorization", f"Bearer {token}"),) if token else ()

    async def _seal(self, msg: pb.SealRequest, timeout: float | None) -> pb.SealResponse:
        try:
            return await self._stub().Seal(msg, timeout=timeout or self._timeout, metadata=await self._metadata())
        except grpc.aio.AioRpcError as e:
            raise from_grpc(e) from None

    async def _open(self, msg: pb.OpenRequest, timeout: float | None) -> pb.OpenResponse:
        try:
            return await self._stub().Open(msg, timeout=timeout or self._timeout, metadata=await self._metadata())
        except grpc.aio.AioRpcError as e:
            raise from_grpc(e) from None

    async def _record(self, msg: pb.RecordRequest, timeout: float | None) -> pb.RecordResponse:
        try:
            return await self._stub().Record(msg, timeout=timeout or self._timeout, metadata=await self._metadata())
        except grpc.aio.AioRpcError as e:
            raise from_grpc(e) from None

    async def close(self) -> None:
        bound = self._channel.take()
        if bound is not None:
            await bound[0].close(grace=None)


def _connect(channel: grpc.aio.Channel) -> tuple[grpc.aio.Channel, sealer_pb2_grpc.SealerAsyncStub]:
    return channel, sealer_pb2_grpc.SealerStub(channel)


def from_grpc(e: grpc.aio.AioRpcError) -> SealerError:
    """Maps a gRPC error to a SealerError with the reason of its google.rpc.ErrorInfo
    (UNSPECIFIED when it has none: the sealer unreachable, a deadline, a TLS
    failure; then its cause says which)."""
    reason = Reason.UNSPECIFIED
    trailers: Any = e.trailing_metadata() or ()
    for key, value in trailers:
        if key != _STATUS_DETAILS or not isinstance(value, bytes):
            continue
        status = status_pb2.Status()
        try:
            status.ParseFromString(value)
        except Exception:  # not a google.rpc.Status: no reason
            break
        for d in status.details:
            info = error_details_pb2.ErrorInfo()
            if d.Is(info.DESCRIPTOR) and d.Unpack(info):
                reason = Reason.parse(info.reason)
                break
        break
    code = e.code()
    message = (e.details() or code.name.lower())[:512]
    cause = None
    if reason is Reason.UNSPECIFIED:
        cause = _cause(code, message)
    return SealerError(reason, message if message.startswith("sealer") else f"sealer: {message}", code.value[0], cause)


# How grpc-core words a failed handshake in a status's details.
_TLS_MARKERS = ("ssl", "tls", "handshake", "certificate")


def _cause(code: grpc.StatusCode, details: str) -> str:
    """What went wrong on the way, for a status without the sealer's ErrorInfo."""
    if any(m in details.lower() for m in _TLS_MARKERS):
        return TLS_FAILURE
    if code is grpc.StatusCode.UNAVAILABLE:
        return UNREACHABLE
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return DEADLINE
    return f"{NOT_THE_SEALER} ({code.name})"
