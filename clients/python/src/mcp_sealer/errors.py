"""The sealer's errors, typed by the reason it puts in every error.

The reason is the proto's enum ``Reason``, read from the
``google.rpc.ErrorInfo`` (domain ``sealer.mcp``) of a gRPC status or from
the REST error body alike: the vocabulary of the Go and TypeScript clients.
"""

from __future__ import annotations

import enum


class Reason(enum.IntEnum):
    """Why the sealer refused a call: the proto's ``sealer.v1.Reason``, without its ``REASON_`` prefix."""

    UNSPECIFIED = 0
    INVALID_STATE = 1
    EXPIRED = 2
    PRINCIPAL_MISMATCH = 3
    REQUEST_MISMATCH = 4
    ALREADY_CONSUMED = 5
    LEDGER_UNAVAILABLE = 6
    INVALID_ARGUMENT = 7
    KEYS_UNAVAILABLE = 8
    UNAUTHENTICATED = 9
    RESOURCE_EXHAUSTED = 10
    INTERNAL = 11
    INPUT_MISMATCH = 12
    FLOW_EXPIRED = 13
    FLOW_EXHAUSTED = 14

    @classmethod
    def parse(cls, name: object) -> Reason:
        """Reads a reason as the sealer sends it (``"EXPIRED"``, or ``"REASON_EXPIRED"``); anything else is UNSPECIFIED."""
        if not isinstance(name, str):
            return cls.UNSPECIFIED
        name = name.removeprefix("REASON_")
        return cls.__members__.get(name, cls.UNSPECIFIED)


# The reasons that refuse a state: the MCP client must start the request over.
_REJECTIONS = frozenset(
    {
        Reason.INVALID_STATE,
        Reason.EXPIRED,
        Reason.PRINCIPAL_MISMATCH,
        Reason.REQUEST_MISMATCH,
        Reason.ALREADY_CONSUMED,
        Reason.INPUT_MISMATCH,
        Reason.FLOW_EXPIRED,
        Reason.FLOW_EXHAUSTED,
    }
)

# The reasons after which the same call may succeed later. UNSPECIFIED (the
# sealer unreachable, a deadline, a reply that is not the sealer's) is too.
_TRANSIENT = frozenset({Reason.LEDGER_UNAVAILABLE, Reason.KEYS_UNAVAILABLE, Reason.RESOURCE_EXHAUSTED, Reason.UNSPECIFIED})


class SealerError(Exception):
    """An error of the sealer or of the way to it.

    ``reason`` is the sealer's (``Reason.UNSPECIFIED`` when it gave none: a
    network failure, a deadline, a reply that is not the sealer's). ``code``
    is the gRPC status code or the HTTP status, when there was one. The
    message never holds the state, the payload or the principal.
    """

    def __init__(self, reason: Reason, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.code = code

    @property
    def rejected(self) -> bool:
        """The state is refused: not authentic, expired, another principal's or request's,
        already consumed, answered with other input keys than its round asked, or of a
        flow past its deadline or out of rounds."""
        return self.reason in _REJECTIONS

    @property
    def retryable(self) -> bool:
        """The same call may succeed later: the ledger or the key source could not answer,
        a limit was hit, or the sealer could not be reached in time. A one-time state is
        not consumed by an open that failed so."""
        return self.reason in _TRANSIENT

    def __repr__(self) -> str:
        return f"SealerError({self.reason.name}, {str(self)!r}, code={self.code!r})"


def invalid_argument(message: str) -> SealerError:
    """A SealerError for a call the client refuses before sending it."""
    return SealerError(Reason.INVALID_ARGUMENT, f"sealer: invalid argument: {message}")
