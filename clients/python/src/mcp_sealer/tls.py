"""How a client reaches a sealer over TLS: the CA that signed its certificate,
and a client certificate for mutual TLS."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TLS:
    """TLS to the sealer: ``ca`` (PEM) verifies the sealer's certificate (the
    system's roots when None); ``cert`` and ``key`` (PEM) are a client
    certificate for mutual TLS; ``server_name`` overrides the name checked."""

    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = field(default=None, repr=False)
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise ValueError("a client certificate needs its key, and a key its certificate")
