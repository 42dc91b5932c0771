"""The answers digest (FORMAT.md, "The answers digest") against the
repository's vectors (the member ``answers`` of sealer/testdata/outcomes.json,
README.md beside it), on both paths: the text (``answers_digest_json``)
gives every "ok" vector's digest and refuses every "refused" one; the
decoded values (``answers_digest``, what the middleware digests) give every
"ok" vector's digest and refuse every "refused" vector that a JSON decoder
lets through (an array, a string, a number, a lone surrogate, 1e400).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_sealer import Reason, SealerError, answers_digest, answers_digest_json

VECTORS = Path(__file__).resolve().parents[3] / "sealer" / "testdata" / "outcomes.json"
ANSWERS: list[dict[str, Any]] = json.loads(VECTORS.read_text(encoding="utf-8"))["answers"]
SEAT_12A = "78b1d6a4e4d9dce37020ec6d0e19f8118642bbf7e489f9e601e7c300a13c5628"


def text_of(v: dict[str, Any]) -> bytes:
    """The vector's inputResponses as text; empty for one without (absent)."""
    if "inputResponsesHex" in v:
        return bytes.fromhex(v["inputResponsesHex"])
    return str(v.get("inputResponses", "")).encode("utf-8")


def refused(f: Any, arg: object) -> str:
    with pytest.raises(SealerError) as e:
        f(arg)
    assert e.value.reason is Reason.INVALID_ARGUMENT and not e.value.rejected, repr(e.value)
    return str(e.value)


def test_there_are_vectors_of_both_verdicts() -> None:
    assert sum(v["want"] == "ok" for v in ANSWERS) >= 15
    assert sum(v["want"] == "refused" for v in ANSWERS) >= 8


@pytest.mark.parametrize("v", ANSWERS, ids=[v["name"] for v in ANSWERS])
def test_the_text_path_meets_every_vector(v: dict[str, Any]) -> None:
    if v["want"] == "ok":
        assert answers_digest_json(text_of(v)).hex() == v["digest"]
        assert answers_digest_json(text_of(v).decode("utf-8")).hex() == v["digest"]
    else:
        refused(answers_digest_json, text_of(v))


@pytest.mark.parametrize("v", ANSWERS, ids=[v["name"] for v in ANSWERS])
def test_the_decoded_path_meets_every_vector_a_decoder_passes(v: dict[str, Any]) -> None:
    text = text_of(v)
    try:
        value = None if text == b"" else json.loads(text.decode("utf-8"))
    except ValueError:
        # Not UTF-8, not JSON: no decoder hands these to the digest.
        assert v["want"] == "refused", v["name"]
        return
    if v["want"] == "ok":
        assert answers_digest(value).hex() == v["digest"]
        # The canonical form of the vector is the object the digest reads.
        assert answers_digest(json.loads(v["canonical"])).hex() == v["digest"]
    elif v["name"] in ("duplicate names", "duplicate _meta"):
        # json.loads kept the last of the names: what only the text shows.
        answers_digest(value)
    else:
        refused(answers_digest, value)


def test_what_json_cannot_hold_has_no_digest() -> None:
    bad: object
    for bad in (
        [],
        "seat",
        1,
        {"seat": float("nan")},
        {"seat": float("inf")},
        {"seat": 10**400},
        {"seat": (1, 2)},
        {"seat": {1, 2}},
        {"seat": b"12A"},
        {1: {"action": "accept"}},
        {"seat": {"content": {"\ud800": "x"}}},
        {"seat": object()},
    ):
        refused(answers_digest, bad)
    for text in ("NaN", '{"seat": Infinity}', '{"seat": -Infinity}', "  ", '{"a":1} x'):
        refused(answers_digest_json, text)


def test_numbers_are_doubles() -> None:
    # 2^53 + 1 reads as 2^53, as JCS reads its text; 1e21 is written 1e+21.
    assert answers_digest({"n": 2**53 + 1}) == answers_digest({"n": 2**53}) == answers_digest({"n": float(2**53)})
    assert answers_digest({"n": 10**21}) == answers_digest_json('{"n":1e21}') == answers_digest_json('{"n":1E+21}')
    assert answers_digest({"n": 1}) == answers_digest({"n": 1.0}) != answers_digest({"n": True})
    assert answers_digest({"n": -0.0}) == answers_digest({"n": 0})


def test_only_each_responses_own_meta_is_left_out() -> None:
    seat = {"action": "accept", "content": {"seat": "12A"}}
    assert answers_digest({"seat": seat}).hex() == SEAT_12A
    assert answers_digest({"seat": {**seat, "_meta": {"io.example/trace": "t-2"}}}).hex() == SEAT_12A
    assert answers_digest({"seat": seat, "_meta": {"action": "accept"}}).hex() != SEAT_12A
    assert answers_digest({"seat": {**seat, "content": {"seat": "12A", "_meta": 1}}}).hex() != SEAT_12A
    # The caller's values are not changed.
    withmeta = {"seat": {**seat, "_meta": 1}}
    answers_digest(withmeta)
    assert withmeta["seat"]["_meta"] == 1
    # Absent, null and {} are one.
    assert answers_digest(None) == answers_digest({}) == answers_digest_json("") == answers_digest_json("null")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), JSON, max_size=5))
def test_the_text_and_the_values_have_one_digest(responses: dict[str, Any]) -> None:
    try:
        want = answers_digest(responses)
    except SealerError:
        return  # a lone surrogate, an integer beyond a double: refused on both paths
    text = json.dumps(responses, ensure_ascii=False)
    assert answers_digest_json(text) == want
    assert answers_digest_json(json.dumps(responses, indent=1, sort_keys=True)) == want
