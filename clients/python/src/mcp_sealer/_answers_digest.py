"""The answers digest of a retry's inputResponses (FORMAT.md, "Recorded
outcomes", "The answers digest"), as mcpdigest.Answers computes it.

An open that records its outcome sends it (``open(..., answers=...)``), and
a retry that answers otherwise than the open that consumed its state is
refused, OUTCOME_CONFLICT, instead of getting that open's answer: round 2 of
a booking retried with seat "1A" after it booked "12A" is never told
"booked 12A".

The canonical form is written by ``rfc8785``, as for the request digest
(``_digest``), once the values are held to what JSON text decodes to:
numbers are doubles here (an integer beyond ±(2^53-1) is written as the
double it rounds to, as JCS reads its text), not refused as in arguments.
tests/test_answers_digest.py holds both functions to the vectors of
sealer/testdata/outcomes.json.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any, NoReturn

import rfc8785

from ._digest import MAX_SAFE_INTEGER, well_formed
from ._errors import invalid_argument

__all__ = ["answers_digest", "answers_digest_json"]

_LABEL = b"mcp-sealer/v1 answers\x00"


def answers_digest(input_responses: object) -> bytes:
    """The 32-byte answers digest of a retry's ``inputResponses`` as decoded
    (a dict as ``json.loads`` or the SDK returns it): SHA-256, under its own
    label, of the RFC 8785 form of the object with the member ``_meta`` of
    each of its members' values removed. None (absent or null) and {} have
    one digest.

    Raises a SealerError (INVALID_ARGUMENT) for what has no digest: anything
    but a mapping or None, and what JSON cannot hold (a number that is not
    finite or does not fit a double, a lone surrogate, a member name that is
    not a string, tuples, sets and other objects). What only the text shows
    (duplicate names, invalid UTF-8) is the decoder's to refuse:
    ``answers_digest_json`` reads text.
    """
    if input_responses is None:
        return _digest(b"{}")
    if not isinstance(input_responses, Mapping):
        _refuse("inputResponses must be an object")
    try:
        responses = _json(input_responses)
        assert isinstance(responses, dict)
        for response in responses.values():
            if isinstance(response, dict):
                response.pop("_meta", None)  # each response's own metadata, not an answer
        canonical = rfc8785.dumps(responses)
    except RecursionError:
        _refuse("inputResponses nested too deep")
    except (rfc8785.CanonicalizationError, UnicodeError):  # not reached: held to JSON above
        _refuse("inputResponses have no canonical form")
    return _digest(canonical)


def answers_digest_json(text: str | bytes) -> bytes:
    """The answers digest of ``inputResponses`` given as JSON text (bytes are
    UTF-8), as ``mcpdigest.Answers`` reads it: empty text is absent, ``null``
    and ``{}`` are the same. Besides what ``answers_digest`` refuses, text
    that is not JSON, not UTF-8, or holds a name twice in one object (two
    ``_meta`` included) is refused."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            _refuse("inputResponses must be UTF-8")
    if text == "":
        return answers_digest(None)
    try:
        value = json.loads(text, object_pairs_hook=_unique, parse_constant=_not_json)
    except RecursionError:
        _refuse("inputResponses nested too deep")
    except ValueError as e:  # not JSON, a name twice, NaN or Infinity, an integer of over 4,300 digits
        _refuse(f"inputResponses must be JSON without duplicate names ({type(e).__name__})")
    return answers_digest(value)


def _json(v: object) -> Any:
    """v held to what JSON text decodes to, numbers as the doubles JCS writes."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str):
        if not well_formed(v):
            _refuse("inputResponses hold a lone surrogate")
        return v
    if isinstance(v, int):
        if abs(v) <= MAX_SAFE_INTEGER:
            return int(v)
        try:
            return float(v)  # rounded to the nearest double, as a JSON parser reads it
        except OverflowError:
            _refuse("inputResponses hold a number beyond a double")
    if isinstance(v, float):
        if not math.isfinite(v):
            _refuse("inputResponses hold a number that is not finite")
        return float(v)
    if isinstance(v, list):
        return [_json(x) for x in v]
    if isinstance(v, Mapping):
        out: dict[str, Any] = {}
        for k, x in v.items():
            if not isinstance(k, str) or not well_formed(k):
                _refuse("inputResponses hold a member name that is not a string of valid Unicode")
            out[k] = _json(x)
        return out
    _refuse(f"inputResponses hold a value that is not JSON ({type(v).__name__})")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("a member name twice in one object")
    return out


def _not_json(constant: str) -> NoReturn:
    raise ValueError(f"{constant} is not JSON")


def _refuse(message: str) -> NoReturn:
    raise invalid_argument(message)


def _digest(canonical: bytes) -> bytes:
    return hashlib.sha256(_LABEL + canonical).digest()
