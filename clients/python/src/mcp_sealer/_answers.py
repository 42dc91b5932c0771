"""The outcome every adapter records for a consumed state (README, "Recorded
outcomes"): the JSON-RPC answer it sent, without ``jsonrpc`` and ``id``, as
UTF-8 JSON, ``{"result": <the result as sent>}`` or ``{"error": <the error as
sent>}``. A retry is answered with it under the retry's own id, so one
convention lets a Go, TypeScript or Python server replay what another
recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Answer", "decode", "encode_error", "encode_result"]


@dataclass(frozen=True)
class Answer:
    """A recorded answer: exactly one of ``result`` (the result object) and
    ``error`` (the JSON-RPC error object: ``code``, ``message``, maybe ``data``)."""

    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


def _encode(member: str, value: Mapping[str, Any]) -> bytes:
    # No NaN or Infinity: they are not JSON, and another adapter's parser
    # would refuse the outcome.
    return json.dumps({member: dict(value)}, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def encode_result(result: Mapping[str, Any]) -> bytes:
    """The outcome of an answer that was ``result``, a JSON object as sent.
    Raises ValueError or TypeError for what is not JSON."""
    return _encode("result", result)


def encode_error(code: int, message: str, data: Any = None) -> bytes:
    """The outcome of an answer that was a JSON-RPC error; ``data`` None is
    absent, as the SDK sends it."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return _encode("error", error)


def decode(data: bytes) -> Answer:
    """Reads an outcome; anything but one of the two shapes above (other bytes,
    another member, an error without an integer code and a string message)
    raises ValueError."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:  # not UTF-8, not JSON, nested too deep
        raise ValueError("an outcome is UTF-8 JSON") from e
    if not isinstance(doc, dict) or len(doc) != 1:
        raise ValueError('an outcome is an object of one member, "result" or "error"')
    if isinstance(result := doc.get("result"), dict):
        return Answer(result=result)
    error = doc.get("error")
    if isinstance(error, dict) and _is_error(error):
        return Answer(error=error)
    raise ValueError('an outcome\'s "result" is an object, its "error" a JSON-RPC error object')


def _is_error(e: dict[str, Any]) -> bool:
    code = e.get("code")
    return isinstance(code, int) and not isinstance(code, bool) and isinstance(e.get("message"), str) and set(e) <= {"code", "message", "data"}
