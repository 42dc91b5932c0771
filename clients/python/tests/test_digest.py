"""The request digest against the repository's test vectors, and the pitfalls of params decoded in Python.

The vectors (sealer/testdata/vectors.json, README.md beside it): every "ok"
vector gives its digest, every "refused" one is refused, by the JSON decoder
(the package digests params already decoded) or by request_digest. A
"textOnly" refusal depends on the params as text; a digester of decoded
params MAY accept it, and the test id says which this one does, as
clients/typescript/test/vectors.test.mjs does.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import sys
import unicodedata
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from mcp_sealer import (
    INPUT_REQUIRED_METHODS,
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    MAX_VALUES,
    Reason,
    SealerError,
    check_param_name,
    request_digest,
    salient_params,
)

# The repository's root is three levels up from clients/python/tests.
VECTORS = Path(__file__).resolve().parents[3] / "sealer" / "testdata" / "vectors.json"
DIGESTS: list[dict[str, Any]] = json.loads(VECTORS.read_text(encoding="utf-8"))["digests"]


def decode(v: dict[str, Any]) -> object:
    """Reads the params as an MCP server would: strict UTF-8, then json.loads (which takes NaN, Infinity, lone surrogates).

    json.loads recurses once per level, within the recursion limit (1,000 by
    default, which the vector of 1,000 levels in _meta reaches): a bound of
    the decoder, not of the digest, raised here while it decodes.
    """
    raw = bytes.fromhex(v["paramsHex"]) if "paramsHex" in v else v["params"].encode("utf-8")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        return json.loads(raw.decode("utf-8"))
    finally:
        sys.setrecursionlimit(limit)


def digest_of(v: dict[str, Any]) -> tuple[str | None, str | None]:
    """(digest in hex, None) or (None, who refused and why)."""
    try:
        params = decode(v)
    except (ValueError, RecursionError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None, f"by the JSON decoder: {type(err).__name__}"
    try:
        return request_digest(v["method"], params).hex(), None
    except SealerError as err:
        refusal = err
    assert refusal.reason == Reason.INVALID_ARGUMENT, v["name"]
    return None, str(refusal)


def vector_id(v: dict[str, Any]) -> str:
    """The vector's name, its verdict, and for a textOnly one whether the decoded path accepts it."""
    want = v["want"]
    if v.get("textOnly"):
        _, refused = digest_of(v)
        want = "textOnly, refused decoded" if refused else "textOnly, accepted decoded"
    return f"{v['name']} [{want}]"


def test_there_are_digest_vectors_of_both_verdicts() -> None:
    assert sum(v["want"] == "ok" for v in DIGESTS) >= 20
    assert sum(v["want"] == "refused" for v in DIGESTS) >= 20


@pytest.mark.parametrize("v", DIGESTS, ids=vector_id)
def test_digest_vector(v: dict[str, Any]) -> None:
    digest, refused = digest_of(v)
    if v["want"] == "ok":
        assert digest == v["digest"], f"{v['name']}: {refused}"
    elif not v.get("textOnly"):
        assert refused, f"{v['name']}: digested to {digest}, want refused"
    # A textOnly refusal: either verdict conforms; the test id records this one.


def refuses(method: str, params: object) -> str:
    with pytest.raises(SealerError) as info:
        request_digest(method, params)
    assert info.value.reason == Reason.INVALID_ARGUMENT
    return str(info.value)


def args_digest(arguments: object) -> bytes:
    return request_digest("tools/call", {"name": "x", "arguments": arguments})


def nested(levels: int) -> dict[str, Any]:
    """Arguments nested levels deep, the arguments object being the first: {"a": [[...[]...]]}."""
    inner: list[Any] = []
    for _ in range(levels - 2):
        inner = [inner]
    return {"a": inner}


def test_example_of_format_md() -> None:
    got = request_digest("tools/call", {"name": "get_weather", "arguments": {"location": "New York"}})
    assert got.hex() == "a4a707f6c0aa07d0ff3d31f6008196705b904aa5e053f0d704cda5a9f171aa48"
    assert len(got) == 32


def test_constants_and_salient_params() -> None:
    assert (MAX_DEPTH, MAX_VALUES, MAX_SAFE_INTEGER) == (64, 100_000, 9007199254740991)
    assert frozenset({"tools/call", "prompts/get", "resources/read"}) == INPUT_REQUIRED_METHODS
    assert salient_params("tools/call") == ("name", "arguments")
    assert salient_params("prompts/get") == ("name", "arguments")
    assert salient_params("resources/read") == ("uri",)
    assert salient_params("tools/list") is None
    assert salient_params("Tools/Call") is None


@pytest.mark.parametrize(
    ("method", "name", "refused"),
    [
        ("tools/call", "NAME", True),
        ("tools/call", "Name", True),
        ("tools/call", "nAmE", True),
        ("tools/call", "Arguments", True),
        ("tools/call", "argument\u017f", True),  # U+017F folds and upper-cases to s
        ("tools/call", "ARGUMENT\u017f", True),
        ("prompts/get", "ARGUMENTS", True),
        ("prompts/get", "Name", True),
        ("resources/read", "URI", True),
        ("resources/read", "ur\u0131", True),  # U+0131 upper-cases to I
        ("resources/read", "ur\u0130", True),  # U+0130 lower-cases to i (simple mapping)
        ("resources/read", "\u017f", False),
        ("tools/call", "name", False),
        ("tools/call", "arguments", False),
        ("tools/call", "_meta", False),
        ("tools/call", "names", False),
        ("tools/call", "nam", False),
        ("tools/call", "n\u0430me", False),  # Cyrillic a: no case mapping takes it to a
        ("tools/call", "namE\u0301", False),
        ("tools/call", "argumen\ufb06", False),  # U+FB06 is st under NFKC: argumenst
        ("tools/call", "URI", False),  # not salient for tools/call
        ("resources/read", "Arguments", False),  # resources/read has no arguments
        ("resources/read", "NAME", False),
        ("resources/read", "ur\u0131\u0307", False),
        # Look-alikes under NFKC and full case folding (issue 50).
        ("tools/call", "\uff41\uff52\uff47\uff55\uff4d\uff45\uff4e\uff54\uff53", True),  # fullwidth arguments
        ("tools/call", "\uff4e\uff41\uff4d\uff45", True),  # fullwidth name
        ("prompts/get", "\uff2e\uff21\uff2d\uff25", True),  # fullwidth NAME
        ("tools/call", "\uff41rguments", True),  # one fullwidth letter
        ("tools/call", "\u3381me", True),  # U+3381, the square nA: NFKC nA
        ("tools/call", "\u2115ame", True),  # U+2115, double-struck N
        ("tools/call", "\U0001d41arguments", True),  # mathematical bold a
        ("resources/read", "\u24e4\u24e1\u24d8", True),  # circled uri
        ("resources/read", "ur\u2170", True),  # U+2170, small roman numeral one
        ("resources/read", "\uff55\uff52\u0131", True),  # fullwidth, then dotless i: both foldings at once
        ("resources/read", "\uff55\uff52\u0130", True),  # fullwidth, then dotted capital I
        ("resources/read", "ur\U0001d6a4", True),  # mathematical italic dotless i: NFKC takes it to U+0131
        ("tools/call", "argument\u00df", False),  # ß folds to ss: argumentss
        ("tools/call", "\uff4e\uff41\uff4d\uff45\uff53", False),  # fullwidth names
        ("tools/call", "name\u0301", False),  # NFKC composes it: namé
        ("tools/call", "\uff55\uff52\uff49", False),  # fullwidth uri: not salient for tools/call
        ("tools/call", "name\u200b", False),  # a zero width space: NFKC keeps it
        ("resources/read", "UR\u0130\u0307", False),  # longer than uri: i U+0307 once folded
    ],
)
def test_check_param_name(method: str, name: str, refused: bool) -> None:
    target = "uri" if method == "resources/read" else "name"
    if refused:
        with pytest.raises(SealerError) as info:
            check_param_name(method, name)
        assert info.value.reason == Reason.INVALID_ARGUMENT
        refuses(method, {target: "x", name: "y"})
    else:
        check_param_name(method, name)
        request_digest(method, {target: "x", name: "x" if name == target else {}})


def test_check_param_name_refuses_other_methods() -> None:
    with pytest.raises(SealerError) as info:
        check_param_name("tools/list", "name")
    assert info.value.reason == Reason.INVALID_ARGUMENT


def test_look_alikes_are_format_md_list_and_the_fold() -> None:
    """The code points that stand for a salient letter are FORMAT.md's case
    variants and those that NFKC and full case folding take to it, and no others.

    Every code point of Latin-1 and the Latin extensions is tried in every
    place of every salient name, and so is every code point that any of
    Python's (full) case mappings, NFKC, or NFKC then upper case takes to a
    string with an ASCII letter in it.
    """
    nfkc = functools.partial(unicodedata.normalize, "NFKC")
    candidates = set(range(0x250))
    for cp in range(0x110000):
        if not 0xD800 <= cp <= 0xDFFF:
            r = chr(cp)
            if re.search("[A-Za-z]", r.lower() + r.upper() + r.casefold() + nfkc(r) + nfkc(r).upper()):
                candidates.add(cp)
    assert {0x130, 0x131, 0x17F, 0x212A, 0xFB06, 0xFF41, 0x3381, 0x1D6A4} <= candidates
    # U+0130 and U+0131 are i under Go's simple mappings, and U+1D6A4 is U+0131 under NFKC.
    extra = {"s": {"\u017f"}, "i": {"\u0130", "\u0131", "\U0001d6a4"}}
    for method, want in (("tools/call", "name"), ("tools/call", "arguments"), ("resources/read", "uri")):
        for at, c in enumerate(want):
            allowed = {c, c.upper(), *extra.get(c, set())} | {chr(cp) for cp in candidates if nfkc(nfkc(chr(cp)).casefold()) == c}
            for cp in sorted(candidates):
                name = want[:at] + chr(cp) + want[at + 1 :]
                try:
                    check_param_name(method, name)
                    got = False
                except SealerError:
                    got = True
                assert got == (chr(cp) in allowed and name != want), (want, at, hex(cp))


def test_long_names_are_never_folded() -> None:
    """A name longer than a salient one folds to no ASCII name as short, so
    it is not normalized: NFKC's cost grows with the square of a run of
    combining marks, and folding this one would take about 40 s."""
    name = "name" + "\u0301\u0316" * 100_000
    check_param_name("tools/call", name)
    request_digest("tools/call", {"name": "x", name: 1})


OK_ARGUMENTS = [
    pytest.param({"a": True}, '{"a":true}', id="True is a boolean"),
    pytest.param({"a": False}, '{"a":false}', id="False is a boolean"),
    pytest.param({"a": 1}, '{"a":1}', id="1"),
    pytest.param({"a": 1.0}, '{"a":1}', id="1.0 is 1"),
    pytest.param({"a": -0.0}, '{"a":0}', id="-0.0 is 0"),
    pytest.param({"a": 0.1}, '{"a":0.1}', id="0.1"),
    pytest.param({"a": 1e-7}, '{"a":1e-7}', id="1e-7"),
    pytest.param({"a": 1e-6}, '{"a":0.000001}', id="1e-6"),
    pytest.param({"a": 5e-324}, '{"a":5e-324}', id="5e-324"),
    pytest.param({"a": 1500.0}, '{"a":1500}', id="1500"),
    pytest.param({"a": MAX_SAFE_INTEGER}, '{"a":9007199254740991}', id="2^53-1"),
    pytest.param({"a": -MAX_SAFE_INTEGER}, '{"a":-9007199254740991}', id="-(2^53-1)"),
    pytest.param({"a": json.loads("9007199254740991.4")}, '{"a":9007199254740991}', id="2^53-1 + 0.4 reads as 2^53-1"),
    pytest.param({"a": float(MAX_SAFE_INTEGER)}, '{"a":9007199254740991}', id="2^53-1 as a float"),
    pytest.param({"a": -1.5e-7}, '{"a":-1.5e-7}', id="-1.5e-7"),
    pytest.param({"a": 123456789.125}, '{"a":123456789.125}', id="123456789.125"),
    pytest.param({"a": json.loads("1e-400")}, '{"a":0}', id="1e-400 reads as 0"),
    # U+1F600 is D83D DE00 in UTF-16, before U+FF61; by code point it would sort after
    pytest.param(
        {"\uff61": 1, "\U0001f600": 2, "\u00e9": 3, "e": 4, "\x00": 5},
        '{"\\u0000":5,"e":4,"\u00e9":3,"\U0001f600":2,"\uff61":1}',
        id="member names in UTF-16 order",
    ),
    pytest.param({"a": '\u00e9\U0001f600\u2028\ufeff\x7f\x1f\n"\\/'}, '{"a":"\u00e9\U0001f600\u2028\ufeff\x7f\\u001f\\n\\"\\\\/"}', id="non-ASCII as itself"),
    pytest.param(OrderedDict(b=1, a=2), '{"a":2,"b":1}', id="a dict subclass"),
    pytest.param({"NAME": "x", "Arguments": {}}, '{"Arguments":{},"NAME":"x"}', id="case variants inside arguments"),
]


@pytest.mark.parametrize(("arguments", "canonical"), OK_ARGUMENTS)
def test_arguments_canonical_form(arguments: object, canonical: str) -> None:
    """The digest hashes the canonical form FORMAT.md step 5 names, with lengths in UTF-8 bytes."""
    assert args_digest(arguments) == step5("tools/call", "x", canonical.encode())


def step5(method: str, target: str, args: bytes) -> bytes:
    parts = [method.encode(), target.encode(), args]
    return hashlib.sha256(b"mcp-sealer/v1 request\x00" + b"".join(len(p).to_bytes(4, "big") + p for p in parts)).digest()


REFUSED_ARGUMENTS = [
    pytest.param({"a": MAX_SAFE_INTEGER + 1}, id="int 2^53"),
    pytest.param({"a": -MAX_SAFE_INTEGER - 1}, id="int -2^53"),
    pytest.param({"a": 2**53 + 1}, id="int 2^53+1"),
    pytest.param({"a": 10**400}, id="int 10^400"),
    pytest.param({"a": float(2**53)}, id="float 2^53"),
    pytest.param({"a": json.loads("9007199254740991.5")}, id="2^53-1 + 0.5 reads as 2^53"),
    pytest.param({"a": 1e16}, id="1e16"),
    pytest.param({"a": 1e21}, id="1e21"),
    pytest.param({"a": 1.7976931348623157e308}, id="largest double"),
    pytest.param({"a": math.nan}, id="NaN"),
    pytest.param({"a": math.inf}, id="Infinity"),
    pytest.param({"a": -math.inf}, id="-Infinity"),
    pytest.param(json.loads('{"a": NaN}'), id="NaN from json.loads"),
    pytest.param(json.loads('{"a": [1e400]}'), id="1e400 from json.loads"),
    pytest.param({"a": "\ud800"}, id="lone high surrogate in a value"),
    pytest.param({"a": "x\udc00y"}, id="lone low surrogate in a value"),
    pytest.param({"\ud800": 1}, id="lone surrogate in a member name"),
    pytest.param({"a": [{"b": {"\udfff": 1}}]}, id="lone surrogate in a deep member name"),
    pytest.param({"a": "\ud83d\ude00"}, id="a pair as two code points"),
    pytest.param(json.loads('{"a": "\\ud800"}'), id="lone surrogate from json.loads"),
    pytest.param({"a": (1, 2)}, id="tuple"),
    pytest.param({"a": {1, 2}}, id="set"),
    pytest.param({"a": frozenset()}, id="frozenset"),
    pytest.param({"a": b"x"}, id="bytes"),
    pytest.param({"a": object()}, id="object"),
    pytest.param({"a": {1: "x"}}, id="int member name"),
    pytest.param({"a": {None: "x"}}, id="None member name"),
    pytest.param({"a": {("k",): "x"}}, id="tuple member name"),
    pytest.param({1: "x"}, id="int member name in the arguments object"),
    pytest.param({"a": [[1, 2**64]]}, id="big int deep"),
]


@pytest.mark.parametrize("arguments", REFUSED_ARGUMENTS)
def test_arguments_refused(arguments: object) -> None:
    refuses("tools/call", {"name": "x", "arguments": arguments})


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param([], id="list"),
        pytest.param((), id="tuple"),
        pytest.param("a=b", id="string"),
        pytest.param(1, id="number"),
        pytest.param(True, id="True"),
        pytest.param(False, id="False"),
        pytest.param(0, id="0"),
    ],
)
def test_arguments_not_an_object(arguments: object) -> None:
    assert "must be an object" in refuses("tools/call", {"name": "x", "arguments": arguments})


@pytest.mark.parametrize(
    ("method", "params"),
    [
        pytest.param("tools/list", {"name": "x"}, id="method tools/list"),
        pytest.param("Tools/Call", {"name": "x"}, id="method Tools/Call"),
        pytest.param("", {"name": "x"}, id="method empty"),
        pytest.param(None, {"name": "x"}, id="method None"),
        pytest.param(["tools/call"], {"name": "x"}, id="method unhashable"),
        pytest.param("tools/call", [{"name": "x"}], id="params list"),
        pytest.param("tools/call", None, id="params None"),
        pytest.param("tools/call", "x", id="params string"),
        pytest.param("tools/call", (("name", "x"),), id="params tuple"),
        pytest.param("tools/call", {}, id="name missing"),
        pytest.param("tools/call", {"name": ""}, id="name empty"),
        pytest.param("tools/call", {"name": 7}, id="name a number"),
        pytest.param("tools/call", {"name": True}, id="name True"),
        pytest.param("tools/call", {"name": None}, id="name None"),
        pytest.param("tools/call", {"name": "x\ud800"}, id="lone surrogate in name"),
        pytest.param("resources/read", {"uri": "\udc00"}, id="lone surrogate in uri"),
        pytest.param("resources/read", {"name": "x"}, id="uri missing"),
        pytest.param("tools/call", {"name": "x", 1: "y"}, id="params member name an int"),
        pytest.param("tools/call", {"name": "x", None: "y"}, id="params member name None"),
        pytest.param("tools/call", {"name": "x", "_meta\ud800": {}}, id="lone surrogate in a params member name"),
        pytest.param("tools/call", {"name": "x", "NAME": "y"}, id="NAME"),
        pytest.param("resources/read", {"uri": "u", "ur\u0131": "v"}, id="ur\u0131"),
    ],
)
def test_params_refused(method: Any, params: object) -> None:
    refuses(method, params)


def test_arguments_absent_or_none_is_null() -> None:
    null = request_digest("tools/call", {"name": "get_weather"})
    assert request_digest("tools/call", {"name": "get_weather", "arguments": None}) == null
    assert request_digest("tools/call", {"name": "get_weather", "arguments": {}}) != null


def test_resources_read_ignores_arguments() -> None:
    want = request_digest("resources/read", {"uri": "file:///etc/motd"})
    assert request_digest("resources/read", {"uri": "file:///etc/motd", "arguments": (1, math.nan)}) == want
    assert request_digest("resources/read", {"uri": "file:///etc/motd", "Arguments": {}, "NAME": "x"}) == want


def test_ignored_members_are_not_checked() -> None:
    """The limits and the number rule bind the arguments only; a decoded digester may skip the rest (FORMAT.md)."""
    want = request_digest("tools/call", {"name": "x", "arguments": {"a": 1}})
    for meta in ({"big": 2**64}, {"a": math.nan}, {"a": "\ud800"}, (1, 2), nested(1000), {"NAME": "x"}):
        assert request_digest("tools/call", {"name": "x", "arguments": {"a": 1}, "_meta": meta}) == want


def test_depth() -> None:
    args_digest(nested(MAX_DEPTH))
    assert "deeper than 64" in refuses("tools/call", {"name": "x", "arguments": nested(MAX_DEPTH + 1)})
    # objects as well as arrays, and a level-64 scalar is no level
    deep: dict[str, Any] = {"a": 1}
    for _ in range(MAX_DEPTH - 1):
        deep = {"a": deep}
    args_digest(deep)
    refuses("tools/call", {"name": "x", "arguments": {"a": deep}})


def test_values() -> None:
    # the arguments object, the list and its items: member names are not values
    args_digest({"a": [0] * (MAX_VALUES - 2)})
    assert "more than 100000" in refuses("tools/call", {"name": "x", "arguments": {"a": [0] * (MAX_VALUES - 1)}})
    args_digest({str(i): None for i in range(MAX_VALUES - 1)})
    refuses("tools/call", {"name": "x", "arguments": {str(i): None for i in range(MAX_VALUES)}})


def test_cycles_are_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    refuses("tools/call", {"name": "x", "arguments": {"a": loop}})
    d: dict[str, Any] = {}
    d["d"] = d
    refuses("tools/call", {"name": "x", "arguments": d})


def test_bool_is_not_int() -> None:
    assert args_digest({"a": True}) != args_digest({"a": 1})
    assert args_digest({"a": False}) != args_digest({"a": 0})
    assert args_digest({"a": 1}) == args_digest({"a": 1.0})


def test_lengths_are_utf8_bytes() -> None:
    """Lengths count UTF-8 bytes, not code points; bytes moved between fields make another request."""
    target = "gr\u00fc\u00dfe \U0001f642"
    assert request_digest("prompts/get", {"name": target}) == step5("prompts/get", target, b"null")
    assert request_digest("resources/read", {"uri": "file:///etc/motd"}) == step5("resources/read", "file:///etc/motd", b"")
