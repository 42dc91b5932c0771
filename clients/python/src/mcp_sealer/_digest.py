"""The request digest (FORMAT.md, "Request digest"), computed in process as the sealer's core computes it.

The digest binds a requestState to the MCP request that produced it: the
method, the target (tool or prompt name, resource uri) and the RFC 8785
canonical form of the arguments, hashed with SHA-256. This module reads
params already decoded (a dict as ``json.loads`` returns it), as FORMAT.md,
"Params as text, params decoded" allows: what only the text shows (its size,
duplicate member names, invalid UTF-8 outside the salient members) is the
JSON decoder's to refuse; everything else is refused exactly as the Go digest
(mcpdigest/digest.go) and the TypeScript client (clients/typescript/src/digest.ts)
refuse it, so that the same request has the same digest on every path.

The canonical form is written by the ``rfc8785`` package, but only after
:func:`request_digest` has checked the arguments itself: ``rfc8785`` takes
tuples and floats beyond ±(2^53-1) (it bounds only ints), and Python's
``bool`` is an ``int``. Its output matches the Go core's JCS: numbers in
ECMAScript form (``1e-7``, ``0.000001``, ``-0.0`` as ``0``, ``1.0`` as
``1``), from Python's shortest round-trip repr, which within ±(2^53-1) never
has a positive exponent; non-ASCII written as itself; only ``"``, ``\\`` and
U+0000 to U+001F escaped; member names sorted by their UTF-16BE bytes, which
is UTF-16 code unit order. tests/test_digest_differential.py compares the
digests with the Go core's.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from typing import Any, cast

import rfc8785

from ._errors import invalid_argument

__all__ = [
    "INPUT_REQUIRED_METHODS",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "MAX_VALUES",
    "check_param_name",
    "request_digest",
    "salient_params",
    "well_formed",
]

MAX_DEPTH = 64
"""The deepest nesting of the arguments: 64 levels, the arguments object being the first."""

MAX_VALUES = 100_000
"""The most values the arguments may hold, the arguments object included; member names are not values."""

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest magnitude of a number in the arguments: beyond it, doubles (and so JCS) cannot tell integers apart."""

# The salient members per method that may carry a requestState: the one that
# names the target and the one that holds its arguments ("" for none). Every
# other member is ignored, so that _meta, inputResponses, requestState and
# fields of later protocol versions never change the digest.
_SALIENT: dict[str, tuple[str, str]] = {
    "tools/call": ("name", "arguments"),
    "prompts/get": ("name", "arguments"),
    "resources/read": ("uri", ""),
}

INPUT_REQUIRED_METHODS: frozenset[str] = frozenset(_SALIENT)
"""The methods whose requests may carry a requestState, and so have a digest (R9)."""

_LABEL = b"mcp-sealer/v1 request\x00"

# A code point no UTF-8 (and so no JCS) can hold: json.loads makes one of a
# lone "\ud800" escape, and a pair written as two escapes in Python source
# stays two lone surrogates in a str.
_SURROGATE = re.compile("[\ud800-\udfff]")

# Runes other than c and its ASCII upper case that match the ASCII letter c
# under Go's simple folding (strings.EqualFold), unicode.ToLower and
# unicode.ToUpper: FORMAT.md's list (U+212A, the Kelvin sign, is in no
# salient name). Python's str.lower and str.upper use the full mappings
# (İ lower-cases to i U+0307), so they are not used on non-ASCII.
_FOLD = {"k": "\u212a", "s": "\u017f"}
_LOWER = {"i": "\u0130", "k": "\u212a"}
_UPPER = {"i": "\u0131", "s": "\u017f"}


def salient_params(method: str) -> tuple[str, ...] | None:
    """The names of the params members the digest reads for method, or None for a method that cannot carry a requestState.

    Callers that hold params in another form may pass only these members.
    """
    fields = _SALIENT.get(method) if isinstance(method, str) else None
    if fields is None:
        return None
    target, arguments = fields
    return (target, arguments) if arguments else (target,)


def check_param_name(method: str, name: str) -> None:
    """Refuses a params member whose name is a look-alike of a salient one:
    "NAME", "Arguments", "uri" with U+0131, "arguments" in fullwidth letters.

    The digest ignores such a member, but a server that binds params
    case-insensitively, or through Unicode folding (``str.casefold``, NFKC),
    may act on it (FORMAT.md, step 3). Only the members of params are
    checked, not those of objects inside them. Raises a SealerError
    (INVALID_ARGUMENT), as for a method that cannot carry a requestState.
    """
    fields = _fields(method)
    for want in fields:
        if want and look_alike(name, want):
            raise invalid_argument(f"params member {_quote(name)} differs from {_quote(want)} only in case")


def look_alike(name: str, want: str) -> bool:
    """Whether name, not want (an ASCII lowercase name), is read as want by a
    decoder that matches names loosely: equal to it under simple folding,
    upper-casing or lower-casing (the list of FORMAT.md, step 3), or once
    folded (``_fold``: "arguments" in fullwidth letters, fullwidth "ur" and
    U+0131), as mcpdigest.LookAlike."""
    if name == want:
        return False
    if len(name) == len(want):  # case mappings keep the number of code points

        def every(extra: dict[str, str]) -> bool:
            return all(r == c or r == c.upper() or r == extra.get(c) for r, c in zip(name, want, strict=True))

        if every(_FOLD) or every(_LOWER) or every(_UPPER):
            return True
    # An ASCII name folds to its lower case, which the rule above has judged.
    # A longer name folds to no ASCII name as short: NFKC and case folding
    # take every code point to one or more, and a composition makes a letter
    # with its mark, never ASCII (U+0130 apart, taken to i first). Checked
    # first, as NFKC's cost grows with the square of a run of combining marks.
    return not name.isascii() and len(name) <= len(want) and _fold(name) == want


# U+0130 and U+0131 (dotted capital I, dotless i), which Go's simple mappings
# (ToLower, ToUpper) take to i but full case folding does not (U+0130 folds
# to i U+0307, U+0131 to itself).
_DOTTED_I = {0x130: "i", 0x131: "i"}


def _fold(name: str) -> str:
    """name as a decoder that folds names reads it: NFKC, full case folding
    and NFKC again (fullwidth, ligatures and other compatibility forms, ß as
    ss), U+0130 and U+0131 taken to i before and after. Where it yields an
    ASCII name it agrees with mcpdigest.Fold, code point by code point
    (Unicode versions apart)."""
    folded = unicodedata.normalize("NFKC", name.translate(_DOTTED_I)).casefold()
    return unicodedata.normalize("NFKC", folded).translate(_DOTTED_I)


def request_digest(method: str, params: object) -> bytes:
    """The 32-byte request digest of an MCP request from its method and its params as decoded (FORMAT.md, "Request digest").

    The original request and its retries (new _meta, inputResponses,
    requestState) have the same digest; a request with another method,
    target or arguments has another. Raises a SealerError (INVALID_ARGUMENT)
    for whatever the core refuses: another method, params that are not an
    object, a look-alike of a salient name, a target that is not a
    non-empty string, arguments that are not an object or None, arguments
    beyond MAX_DEPTH or MAX_VALUES, numbers beyond ±MAX_SAFE_INTEGER (send
    them as strings), and anything JSON cannot hold (NaN, infinities, lone
    surrogates, non-str member names, tuples, sets, other objects).
    """
    target_name, arguments_name = _fields(method)
    if not isinstance(params, dict):
        raise invalid_argument("params must be a JSON object")
    for name in params:
        if not isinstance(name, str):
            raise invalid_argument("params member names must be strings")
        if not well_formed(name):
            raise invalid_argument("params member names must be valid Unicode")
        check_param_name(method, name)
    target = params.get(target_name)
    if not isinstance(target, str) or not target or not well_formed(target):
        raise invalid_argument(f"params.{target_name} must be a non-empty string")
    if not arguments_name:
        return _digest(method, target, b"")
    arguments = params.get(arguments_name)
    if arguments is None:
        return _digest(method, target, b"null")
    if not isinstance(arguments, dict):
        raise invalid_argument(f"params.{arguments_name} must be an object")
    _check_arguments(arguments_name, arguments)
    try:
        canonical = rfc8785.dumps(cast(Any, arguments))
    except (rfc8785.CanonicalizationError, UnicodeError, RecursionError) as err:  # not reached: checked above
        raise invalid_argument(f"params.{arguments_name} has no canonical form") from err
    return _digest(method, target, canonical)


def _check_arguments(name: str, arguments: dict[Any, Any]) -> None:
    """Holds the arguments to the core's limits (FORMAT.md, step 4) and to what JSON can express.

    It walks the values without recursion, counting each when its container
    is reached, so that a huge container costs no more than the limit.
    """
    values = 1
    stack: list[tuple[object, int]] = [(arguments, 1)]  # a value and, for a container, its level
    while stack:
        value, level = stack.pop()
        if value is None or value is True or value is False:
            continue
        if isinstance(value, str):
            if not well_formed(value):
                raise invalid_argument(f"params.{name} holds a lone surrogate")
        elif isinstance(value, int):  # not bool, seen above: True is a boolean, never 1
            if abs(int(value)) > MAX_SAFE_INTEGER:
                raise invalid_argument(f"params.{name} holds a number beyond ±(2^53-1); send it as a string")
        elif isinstance(value, float):
            number = float(value)
            if not math.isfinite(number) or abs(number) > MAX_SAFE_INTEGER:
                raise invalid_argument(f"params.{name} holds a number beyond ±(2^53-1) or not finite; send it as a string")
        elif isinstance(value, (dict, list)):
            if level > MAX_DEPTH:
                raise invalid_argument(f"params.{name} nested deeper than {MAX_DEPTH} levels")
            values += len(value)
            if values > MAX_VALUES:
                raise invalid_argument(f"params.{name} holds more than {MAX_VALUES} values")
            if isinstance(value, list):
                stack.extend((item, level + 1) for item in value)
                continue
            for key, item in value.items():
                if not isinstance(key, str):
                    raise invalid_argument(f"params.{name} holds a member name that is not a string")
                if not well_formed(key):
                    raise invalid_argument(f"params.{name} holds a lone surrogate")
                stack.append((item, level + 1))
        else:
            raise invalid_argument(f"params.{name} holds a value that is not JSON ({type(value).__name__})")


def _fields(method: str) -> tuple[str, str]:
    fields = _SALIENT.get(method) if isinstance(method, str) else None
    if fields is None:
        raise invalid_argument(f"unsupported method {_quote(method)}")
    return fields


def well_formed(s: str) -> bool:
    """Whether s is valid Unicode (no lone surrogate), so that UTF-8, and JCS, can hold it."""
    return s.isascii() or _SURROGATE.search(s) is None


def _digest(method: str, target: str, args: bytes) -> bytes:
    """SHA-256 of the label and the three length-prefixed parts, lengths in UTF-8 bytes (FORMAT.md, step 5)."""
    parts = [method.encode(), target.encode(), args]
    buf = bytearray(_LABEL)
    for part in parts:
        buf += len(part).to_bytes(4, "big")
        buf += part
    return hashlib.sha256(buf).digest()


def _quote(s: object) -> str:
    """Quotes attacker-controlled text in an error, bounded and escaped."""
    text = s if isinstance(s, str) else repr(s)
    return json.dumps(text[:64] + "..." if len(text) > 64 else text)
