"""The sealer's errors, typed by the reason it puts in every error.

The reason is the proto's enum ``Reason``, read from the
``google.rpc.ErrorInfo`` (domain ``sealer.mcp``) of a gRPC status or from
the REST error body alike: the vocabulary of the Go and TypeScript clients.
"""

from __future__ import annotations

from .gen.sealer.v1 import sealer_pb2 as pb
from .gen.sealer.v1.reason import Reason as Reason  # the errors' vocabulary, with them


def _reasons_whose_rule(says: str) -> frozenset[Reason]:
    """The reasons whose rule in the proto (the option ``rule`` of each value
    of ``sealer.v1.Reason``) sets the flag ``says``: ``rejects`` (the MCP
    client must start the request over) or ``retryable`` (the same call may
    succeed later; IN_PROGRESS is a retry that came while the first open's
    handler still ran, whose outcome a later retry gets)."""
    return frozenset(
        Reason(v.number) for v in pb.Reason.DESCRIPTOR.values if getattr(v.GetOptions().Extensions[pb.rule], says)
    )


_REJECTIONS = _reasons_whose_rule("rejects")
_TRANSIENT = _reasons_whose_rule("retryable")

# The causes, for an error without a reason from the sealer (UNSPECIFIED),
# of a failure on the way to it: what a log line says instead of UNSPECIFIED.
UNREACHABLE = "unreachable"  # no connection, or it broke: may succeed later
DEADLINE = "deadline"  # no answer in time: may succeed later
TLS_FAILURE = "tls"  # the handshake failed (certificate, CA, name, plaintext to a TLS port): never retried
NOT_THE_SEALER = "not_the_sealer"  # an answer that is not the sealer's (another service, a proxy's page)
HTTP_STATUS = "http_status"  # an HTTP status without the sealer's error body: a 5xx from a proxy may pass, a 4xx never

_PASSING = frozenset({UNREACHABLE, DEADLINE})


class SealerError(Exception):
    """An error of the sealer or of the way to it.

    ``reason`` is the sealer's (``Reason.UNSPECIFIED`` when it gave none: a
    network failure, a deadline, a reply that is not the sealer's; then
    ``cause`` says which). ``code`` is the gRPC status code or the HTTP
    status, when there was one. The message never holds the state, the
    payload or the principal.

    Every error is exactly one of ``rejected`` (the state is refused),
    ``unavailable`` (the sealer could not answer now) and ``misconfigured``
    (the way to the sealer is wrong: credentials, TLS, address).
    """

    def __init__(self, reason: Reason, message: str, code: int | None = None, cause: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.code = code
        self.cause = cause

    @property
    def why(self) -> str:
        """The reason's name, or for an error without one its cause: what a log line says."""
        if self.reason is not Reason.UNSPECIFIED:
            return self.reason.name
        if self.cause == HTTP_STATUS and self.code is not None:
            return f"HTTP {self.code}"
        return self.cause or "no reason given"

    @property
    def rejected(self) -> bool:
        """The state is refused: not authentic, expired, another principal's or request's,
        already consumed (OUTCOME_CONFLICT too: by an open whose inputResponses were
        other than this retry's), answered with other input keys than its round asked,
        or of a flow past its deadline or out of rounds."""
        return self.reason in _REJECTIONS

    @property
    def retryable(self) -> bool:
        """The same call may succeed later: the ledger or the key source could not answer,
        a limit was hit, the state's first open still runs its handler (IN_PROGRESS: a
        later retry gets its recorded outcome), the sealer could not be reached or did
        not answer in time, or a proxy before it answered 502, 503 or 504. Never a TLS
        failure or another 4xx. A one-time state is not consumed by an open that failed
        so."""
        if self.reason in _TRANSIENT:
            return True
        if self.reason is not Reason.UNSPECIFIED:
            return False
        return self.cause in _PASSING or (self.cause == HTTP_STATUS and self.code in (502, 503, 504))

    @property
    def unavailable(self) -> bool:
        """The sealer could not answer now: unreachable, too slow, its ledger or keys
        unavailable, a limit hit, the outcome not recorded yet (IN_PROGRESS), or its
        own internal error."""
        return self.retryable or self.reason is Reason.INTERNAL or (self.cause == HTTP_STATUS and (self.code or 0) >= 500)

    @property
    def misconfigured(self) -> bool:
        """Neither a refused state nor a passing outage: the credentials refused
        (UNAUTHENTICATED), a TLS failure, an address that is not the sealer's
        (a 4xx, another service), a call the sealer finds invalid (a TTL
        beyond the tenant's policy, say). Retrying cannot help."""
        return not self.rejected and not self.unavailable

    def __repr__(self) -> str:
        return f"SealerError({self.why}, {str(self)!r}, code={self.code!r})"


def invalid_argument(message: str) -> SealerError:
    """A SealerError for a call the client refuses before sending it."""
    return SealerError(Reason.INVALID_ARGUMENT, f"sealer: invalid argument: {message}")
