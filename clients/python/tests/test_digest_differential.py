"""The Python request digest against the Go core's, on 10,000 generated requests.

Each request's params are written as JSON text once; the Go core
(mcpdigest.Request, through internal/cmd/digestoracle) reads that text,
and mcp_sealer.request_digest reads json.loads of the same text, as a Python MCP
server would hold it. Both must refuse, or both give the same digest.

What only the text path can refuse (FORMAT.md, "Params as text, params
decoded": the size of the text, duplicate names, lone surrogates or numbers
with no double outside the salient members) is not generated: json.dumps of
a dict has no duplicates, the texts stay far below 1 MiB, and the ignored
members hold only what JCS can express.

The oracle is SEALER_TEST_DIGEST_ORACLE if set, else built with go. Without
either the test is skipped, or fails when CI is set.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_sealer import MAX_SAFE_INTEGER, MAX_VALUES, Reason, SealerError, request_digest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = 10_000


class Oracle:
    """The Go core's digest, one request at a time over a pipe."""

    def __init__(self, path: str) -> None:
        self.proc = subprocess.Popen(  # noqa: S603 (the oracle built from this repository, or the one the environment names)
            [path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8"
        )

    def digest(self, method: str, params: str) -> str:
        """The hex digest, or "refused" and the Go error after a tab."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"method": method, "params": params}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line and not line.startswith("error"), f"digestoracle answered {line!r}"
        return line.rstrip("\n")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="session")
def oracle() -> Iterator[Oracle]:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.environ.get("SEALER_TEST_DIGEST_ORACLE") or build_oracle(Path(tmp) / "digestoracle")
        o = Oracle(path)
        yield o
        o.close()


def build_oracle(out: Path) -> str:
    go = shutil.which("go") or shutil.which("/usr/local/go/bin/go")
    if go is None:
        why = "no Go digest oracle: set SEALER_TEST_DIGEST_ORACLE or put go on PATH"
        if os.environ.get("CI"):
            pytest.fail(f"{why} (CI is set: the differential test must run)", pytrace=False)
        pytest.skip(why)
    built = subprocess.run(  # noqa: S603 (go, building a package of this repository)
        [go, "build", "-o", str(out), "./internal/cmd/digestoracle"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if built.returncode != 0:
        pytest.fail(f"go build ./internal/cmd/digestoracle failed:\n{built.stderr}", pytrace=False)
    return str(out)


# --- The generated requests -------------------------------------------------

# A number written as a literal in the JSON text ("1E+0", "9007199254740991.4",
# "1e400"), so that both sides parse the same spelling: a string that starts
# with RAW, replaced by its literal in the text that json.dumps writes.
RAW = "\ue000"
RAW_LITERAL = re.compile(f'"{RAW}([-+.0-9eE]+)"')

# Characters the texts are made of besides random ones: escapes, controls,
# the characters JCS writes as themselves, astral ones (whose UTF-16 order
# differs from their code point order) and those of the case-variant rule.
SPECIAL = 'e"\\/\x00\x08\x1f\x7f\u2028\u2029\ufeff\ufffd\uff61\U0001f600\U0010ffff\u00e9\u00df\u017f\u0131\u0130\u212a'
LONE = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d"]


def seeded_text(seed: int) -> str:
    """Up to 8 characters, from ASCII, SPECIAL, the rest of the BMP and the astral planes.

    Drawn from a seed, one draw for a whole string: drawing each character
    from Hypothesis took most of the test's time.
    """
    rng = random.Random(seed)  # noqa: S311 (test data, drawn from Hypothesis' seed)
    out = []
    for _ in range(rng.randrange(9)):
        kind = rng.randrange(10)
        if kind < 4:
            out.append(chr(rng.randrange(0x20, 0x7F)))
        elif kind < 6:
            out.append(rng.choice(SPECIAL))
        elif kind < 8:
            cp = rng.randrange(0x80, 0x10000 - 0x800)
            out.append(chr(cp + 0x800 if cp >= 0xD800 else cp).replace(RAW, "x"))
        else:
            out.append(chr(rng.randrange(0x10000, 0x110000)))
    return "".join(out)


text = st.one_of(st.sampled_from(["", "a", "name", "e\u0301"]), st.integers(0, 2**32 - 1).map(seeded_text))


def uniform(lo: int, hi: int) -> st.SearchStrategy[int]:
    """An integer from lo to hi, each about as often. Hypothesis draws the ends of a range far more often
    than the rest (st.integers(0, n - 1) gives 0 much more often than 1 in n): the draw seeds a PRNG instead."""
    return st.integers(0, 2**32 - 1).map(lambda seed: random.Random(seed).randint(lo, hi))  # noqa: S311 (test data)


def one_in(n: int) -> st.SearchStrategy[bool]:
    """True about once in n draws."""
    return uniform(1, n).map(lambda k: k == 1)


def rarely(n: int, rare: st.SearchStrategy[Any], common: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """rare about once in n draws, else common (st.one_of would pick each branch alike; flatmap is slow)."""
    return st.builds(lambda pick, r, c: r if pick else c, one_in(n), rare, common)


def sometimes_lone(s: st.SearchStrategy[str], n: int) -> st.SearchStrategy[str]:
    """s, with a lone surrogate put in about once in n: JCS cannot write it, so the core refuses it."""
    return st.builds(
        lambda t, pick, at, lone: t[:at] + lone + t[at:] if pick else t,
        s,
        one_in(n) if n > 1 else st.just(True),
        st.integers(0, 8),
        st.sampled_from(LONE),
    )


def raw(literal: str) -> str:
    return RAW + literal


# Number spellings that read as doubles within ±(2^53-1), and ones that do not.
RAW_OK = [
    "1E+0", "10e-1", "0.1e1", "-0", "-0.0e0", "1e-400", "-1e-400", "9007199254740991.4", "9.007199254740991e15",
    "-9007199254740991.49999", "4.9e-324", "2.4703282292062328e-324", "2.4703282292062327e-324", "0.000001",
    "1e-7", "1.0000000000000000000001", "123456789012345678901234567890e-20", "1500", "0.1", "100e-2",
]  # fmt: skip
RAW_BEYOND = [
    "1e400", "-1e400", "9007199254740991.5", "9007199254740992", "-9007199254740992", "9007199254740993",
    "1e16", "1E+21", "1" + "0" * 30, "1.7976931348623157e308", "1.8e308",
]  # fmt: skip

# Decimal literals of any size and exponent: Python's float() and Go's
# ParseFloat must round them alike, and rfc8785 and Go's JCS write them alike.
raw_decimal = st.builds(
    lambda sign, whole, frac, exp: raw(f"{sign}{whole}{'.' + frac if frac else ''}{exp}"),
    st.sampled_from(["", "-"]),
    st.integers(0, 10**20),
    st.text("0123456789", max_size=20),
    st.one_of(st.just(""), st.integers(-340, 330).map(lambda e: f"e{e}"), st.integers(-30, 30).map(lambda e: f"E+{e}")),
)

ints_ok = st.one_of(
    st.integers(-1000, 1000),
    st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
    st.sampled_from([0, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, 2**52, 2**31]),
)
floats_ok = st.one_of(
    st.floats(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
    st.floats(-1e-300, 1e-300),
    st.floats(-1e-5, 1e-5),
    st.floats(2.0**52, 2.0**53 - 1),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 1e-7, 1e-6, 9.99e-7, 0.1, 1.0, 1.5, 1e15, 2.0**53 - 1, 123456789.125]),
)
# Numbers beyond ±(2^53-1): refused in the arguments, ignored elsewhere.
numbers_beyond = st.one_of(
    st.integers(2**53, 2**70).map(lambda n: n if n % 2 else -n),
    st.sampled_from([2**53, -(2**53), 2**53 + 1, 10**30, -(10**40)]),
    st.floats(2.0**53, 1e300).map(lambda f: f if int(f) % 3 else -f),
    st.sampled_from([1.7976931348623157e308, 1e21, 1e16, float(2**53)]),
)

leaf_ok = st.one_of(st.none(), st.booleans(), ints_ok, floats_ok, text)


salient_leaf = st.one_of(
    leaf_ok,
    leaf_ok,
    sometimes_lone(text, 40),
    rarely(16, raw_decimal, st.sampled_from(RAW_OK).map(raw)),
)


def containers(leaf: st.SearchStrategy[Any], keys: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaf,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
        max_leaves=10,
    )


def nest(levels: int, inner: Any, shapes: int) -> Any:
    """inner wrapped in levels arrays and objects, which the bits of shapes pick."""
    for i in range(levels):
        inner = [inner] if shapes >> (i % 8) & 1 else {"k": inner}
    return inner


# Arguments nested 58 to 70 levels below the arguments object: 64 levels in
# all is the most (the arguments object is level 1).
deep = st.builds(nest, st.integers(58, 70), leaf_ok, st.integers(0, 255))
# Now and then, arguments that are an array of about MAX_VALUES values and
# nothing else, on either side of the limit: the arguments object, the array
# and n items (built only when picked: it takes a few milliseconds).
many = st.builds(
    lambda pick, n, v: {"many": [v] * n} if pick else None,
    one_in(20),
    uniform(MAX_VALUES - 5, MAX_VALUES),
    st.sampled_from([0, None, True, "\u00e9", 1.5]),
)

# What makes the core refuse the arguments: put in them now and then.
poison = st.one_of(
    numbers_beyond,
    st.sampled_from(RAW_BEYOND).map(raw),
    st.sampled_from(LONE),
    st.sampled_from(LONE).map(lambda s: {s: 1}),
    st.builds(nest, st.integers(64, 70), leaf_ok, st.integers(0, 255)),
)

arg_keys = st.one_of(text, sometimes_lone(text, 60), st.sampled_from(["NAME", "Arguments", "name", "arguments", "uri"]))
arguments_object = st.builds(
    lambda base, extra, pick, spoil, at, many: many or {**base, **extra, **({f"p{at}": spoil} if pick else {})},
    st.dictionaries(arg_keys, containers(salient_leaf, arg_keys), max_size=5),
    st.one_of(st.just({}), deep.map(lambda d: {"deep": d})),
    one_in(8),
    poison,
    st.integers(0, 3),
    st.one_of(st.none(), many),
)

MISSING = object()
arguments = st.one_of(
    arguments_object,
    arguments_object,
    arguments_object,
    arguments_object,
    st.sampled_from([MISSING, None]),
    st.sampled_from([[], [1], "a=b", 1, True, False, 0, ""]),
)

nonempty_text = st.integers(0, 2**32 - 1).map(lambda seed: seeded_text(seed) or "t")
target = st.one_of(
    nonempty_text,
    nonempty_text,
    nonempty_text,
    st.sampled_from(["get_weather", "file:///etc/motd", "gr\u00fc\u00dfe \U0001f642", "\ufeffx"]),
    rarely(8, sometimes_lone(text, 1), st.sampled_from(["", 7, None, [], MISSING, True])),
)

# Members besides the salient ones: the ignored ones, and look-alikes of a
# salient name, in case or under NFKC and case folding (refused where that
# name is salient).
CASE_NAMES = [
    "Name", "NAME", "nAME", "namE", "Arguments", "ARGUMENTS", "argument\u017f", "ARGUMENT\u017f", "URI", "Uri",
    "ur\u0131", "ur\u0130", "UR\u0131", "uR\u0130",
    "\uff41\uff52\uff47\uff55\uff4d\uff45\uff4e\uff54\uff53", "\uff4e\uff41\uff4d\uff45", "\u3381me", "\uff55\uff52\u0131", "ur\U0001d6a4",
]  # fmt: skip
NOT_CASE_NAMES = [
    "_meta", "inputResponses", "requestState", "n\u0430me", "argumen\ufb06", "name\u0301", "\u212a", "\u017f", "names",
    "argument\u00df", "\uff4e\uff41\uff4d\uff45\uff53",
]  # fmt: skip
ignored_leaf = st.one_of(leaf_ok, numbers_beyond)
ignored_value = st.one_of(containers(ignored_leaf, text), deep)
extra_members = st.dictionaries(
    st.one_of(st.sampled_from(NOT_CASE_NAMES), st.sampled_from(NOT_CASE_NAMES), text, st.sampled_from(CASE_NAMES)),
    ignored_value,
    max_size=3,
)

method = rarely(100, st.sampled_from(["tools/list", "Tools/Call", ""]), st.sampled_from(["tools/call", "prompts/get", "resources/read"]))


def build_params(method: str, target: Any, arguments: Any, ignored: Any, extra: dict[str, Any], not_object: bool) -> Any:
    if not_object:  # now and then, params that are not an object
        return None if target is MISSING else [target] if isinstance(target, str) else target
    params = dict(extra)
    if method == "resources/read":  # arguments are an ignored member
        params["arguments"] = ignored
        params["uri"] = target
    else:
        params["arguments"] = arguments
        params["name"] = target
    return {k: v for k, v in params.items() if v is not MISSING}


requests = st.tuples(method, target, arguments, st.one_of(st.just(MISSING), ignored_value), extra_members, one_in(60)).map(lambda r: (r[0], build_params(*r)))


def json_text(params: Any) -> str:
    """The params as JSON text: lone surrogates as \\u escapes (the only way UTF-8 text can hold them), RAW literals unquoted."""
    dumped = json.dumps(params, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    dumped = re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", dumped)
    return RAW_LITERAL.sub(lambda m: m.group(1), dumped)


def python_digest(method: str, text: str) -> str:
    """The Python digest of the params decoded as a Python MCP server would, or "refused"."""
    try:
        params = json.loads(text)
    except ValueError:
        return "refused"
    try:
        return request_digest(method, params).hex()
    except SealerError as err:
        refusal = err
    assert refusal.reason == Reason.INVALID_ARGUMENT, refusal
    return "refused"


def test_python_digest_matches_go(oracle: Oracle, capsys: pytest.CaptureFixture[str]) -> None:
    counts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    disagreements: list[tuple[str, str, str, str]] = []

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(requests)
    def compare(request: tuple[str, Any]) -> None:
        method, params = request
        text = json_text(params)
        assert len(text.encode()) <= 1 << 20, "params beyond 1 MiB: only the text path refuses them"
        go = oracle.digest(method, text)
        py = python_digest(method, text)
        verdict, _, why = go.partition("\t")
        counts["compared"] += 1
        counts["refused" if verdict == "refused" else "digested"] += 1
        if why:
            reasons[re.sub(r'"[^"]*"|\d+', "#", why.removeprefix("sealer: invalid argument: "))[:60]] += 1
        if isinstance(params, dict) and isinstance(params.get("arguments"), dict) and "many" in params["arguments"]:
            counts["many"] += 1
        if py != verdict:
            disagreements.append((method, text[:300], verdict, py))

    compare()
    with capsys.disabled():
        print(
            f"\ndigest differential: {counts['compared']} requests compared with the Go core: "
            f"{counts['digested']} digested, {counts['refused']} refused, {len(disagreements)} disagreements; "
            f"{counts['many']} with arguments of about {MAX_VALUES} values"
        )
        for why, n in reasons.most_common(12):
            print(f"  refused {n:5}: {why}")
    assert not disagreements, f"{len(disagreements)} disagreements (method, params, Go, Python): {disagreements[:5]}"
    assert counts["compared"] >= EXAMPLES
    assert counts["digested"] >= counts["compared"] // 5, counts
    assert counts["refused"] >= counts["compared"] // 5, counts
