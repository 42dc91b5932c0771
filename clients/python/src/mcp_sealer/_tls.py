"""How a client reaches a sealer over TLS: the CA that signed its certificate,
and a client certificate for mutual TLS."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

#: What a PEM option takes: the PEM itself (bytes, or a str holding
#: ``-----BEGIN``), or the path of a file holding it (a str or a path).
PEM = bytes | str | os.PathLike[str]


def _pem(what: str, value: PEM | None) -> bytes | None:
    """Reads a PEM option: the PEM as given, or the file at its path, read now
    (a missing file fails here, at construction, not at the first call)."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str) and "-----BEGIN" in value:
        return value.encode("ascii", "strict")
    if isinstance(value, str | os.PathLike):
        try:
            with open(value, "rb") as f:
                return f.read()
        except OSError as e:
            raise ValueError(f"TLS {what}: cannot read {os.fspath(value)!r}: {e.strerror}") from None
    raise TypeError(f"TLS {what} must be PEM bytes, a PEM str or a path, not {type(value).__name__}")


@dataclass(frozen=True)
class TLS:
    """TLS to the sealer: ``ca`` (PEM) verifies the sealer's certificate (the
    system's roots when None); ``cert`` and ``key`` (PEM) are a client
    certificate for mutual TLS; ``server_name`` overrides the name checked.

    Each of ``ca``, ``cert`` and ``key`` is the PEM as bytes, the PEM as a str,
    or the path of a PEM file (a str without ``-----BEGIN``, or a path), read
    when the TLS is made; afterwards the field holds the PEM bytes."""

    ca: PEM | None = None
    cert: PEM | None = None
    key: PEM | None = field(default=None, repr=False)
    server_name: str | None = None

    def __post_init__(self) -> None:
        for name in ("ca", "cert", "key"):
            object.__setattr__(self, name, _pem(name, getattr(self, name)))
        if (self.cert is None) != (self.key is None):
            raise ValueError("a client certificate needs its key, and a key its certificate")

    @property
    def ca_pem(self) -> bytes | None:
        """``ca`` as PEM bytes."""
        return _pem("ca", self.ca)

    @property
    def cert_pem(self) -> bytes | None:
        """``cert`` as PEM bytes."""
        return _pem("cert", self.cert)

    @property
    def key_pem(self) -> bytes | None:
        """``key`` as PEM bytes."""
        return _pem("key", self.key)
