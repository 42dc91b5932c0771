// The answers digest (FORMAT.md, "The answers digest") against the
// repository's vectors (the member answers of sealer/testdata/outcomes.json,
// README.md beside it), on both paths: the text (answersDigestOfJson) gives
// every "ok" vector's digest and refuses every "refused" one; the decoded
// values (answersDigest, what the codec digests) give every "ok" vector's
// digest and refuse every "refused" vector JSON.parse lets through (an
// array, a string, a number, a lone surrogate, 1e400).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { answersDigest, answersDigestOfJson, Reason, SealerError } from "../dist/index.js";

const vectors = JSON.parse(readFileSync(new URL("../../../sealer/testdata/outcomes.json", import.meta.url), "utf8")).answers;
const hex = (b) => Buffer.from(b).toString("hex");
const SEAT_12A = "78b1d6a4e4d9dce37020ec6d0e19f8118642bbf7e489f9e601e7c300a13c5628";

// The vector's inputResponses as UTF-8 text; empty for one without (absent).
const bytesOf = (v) => (v.inputResponsesHex !== undefined ? Buffer.from(v.inputResponsesHex, "hex") : Buffer.from(v.inputResponses ?? "", "utf8"));

function refused(f, arg, what) {
  assert.throws(
    () => f(arg),
    (err) => err instanceof SealerError && err.reason === Reason.INVALID_ARGUMENT && !err.rejected,
    `${what}: want refused (INVALID_ARGUMENT)`,
  );
}

test("there are answers vectors of both verdicts", () => {
  assert.ok(vectors.filter((v) => v.want === "ok").length >= 15);
  assert.ok(vectors.filter((v) => v.want === "refused").length >= 8);
});

for (const v of vectors) {
  test(`answers vector, text: ${v.name}`, () => {
    const bytes = bytesOf(v);
    if (v.want === "ok") {
      assert.equal(hex(answersDigestOfJson(new Uint8Array(bytes))), v.digest);
      assert.equal(hex(answersDigestOfJson(bytes.toString("utf8"))), v.digest);
    } else {
      refused(answersDigestOfJson, new Uint8Array(bytes), v.name);
    }
  });

  test(`answers vector, decoded: ${v.name}`, () => {
    let value;
    try {
      const text = new TextDecoder("utf-8", { fatal: true }).decode(bytesOf(v));
      value = text === "" ? undefined : JSON.parse(text);
    } catch {
      // Not UTF-8, not JSON: no parser hands these to the digest.
      assert.equal(v.want, "refused", v.name);
      return;
    }
    if (v.want === "ok") {
      assert.equal(hex(answersDigest(value)), v.digest);
      assert.equal(hex(answersDigest(JSON.parse(v.canonical))), v.digest, "the canonical form is the object digested");
    } else if (v.name === "duplicate names" || v.name === "duplicate _meta") {
      answersDigest(value); // JSON.parse kept the last of the names: what only the text shows
    } else {
      refused(answersDigest, value, v.name);
    }
  });
}

test("what JSON cannot hold has no answers digest", () => {
  const bad = [[], "seat", 1, true, { seat: NaN }, { seat: Infinity }, { seat: 1n }, { seat: undefined }, { seat: () => 1 }, { seat: new Date(0) }, { seat: new Map() }, { seat: { content: { "\ud800": "x" } } }, { seat: ["\udc00"] }];
  bad.forEach((b, i) => refused(answersDigest, b, `value ${i}`));
  for (const text of ["NaN", '{"seat": Infinity}', "  ", '{"a":1} x', '{"a":{"b":1,"b":2}}', '[{"a":1,"a":1}]']) {
    refused(answersDigestOfJson, text, text);
  }
});

test("only each response's own _meta is left out; absent, null and {} are one", () => {
  const seat = { action: "accept", content: { seat: "12A" } };
  assert.equal(hex(answersDigest({ seat })), SEAT_12A);
  assert.equal(hex(answersDigest({ seat: { ...seat, _meta: { "io.example/trace": "t-2" } } })), SEAT_12A);
  assert.notEqual(hex(answersDigest({ seat, _meta: { action: "accept" } })), SEAT_12A);
  assert.notEqual(hex(answersDigest({ seat: { ...seat, content: { seat: "12A", _meta: 1 } } })), SEAT_12A);
  const withMeta = { seat: { ...seat, _meta: 1 } };
  answersDigest(withMeta);
  assert.equal(withMeta.seat._meta, 1, "the caller's values are not changed");
  // A member named __proto__ stays a member (JSON.parse defines it so).
  assert.notEqual(hex(answersDigestOfJson('{"__proto__":{"action":"accept"}}')), hex(answersDigest({})));
  assert.equal(hex(answersDigestOfJson('{"__proto__":{"action":"accept"}}')), hex(answersDigest(JSON.parse('{"__proto__":{"action":"accept"}}'))));
  const none = hex(answersDigest(undefined));
  for (const d of [answersDigest(null), answersDigest({}), answersDigestOfJson(""), answersDigestOfJson("null"), answersDigestOfJson(" {} ")]) assert.equal(hex(d), none);
});

test("text and values have one digest; names twice are found at any depth, escaped or not", () => {
  const values = [{ a: { b: [1, { c: "d" }], "x,y": "{\"q\":1}" } }, { "\u00e9": 1e21, e: -0, z: [null, true, "a\\\"b"] }];
  for (const v of values) {
    assert.equal(hex(answersDigestOfJson(JSON.stringify(v))), hex(answersDigest(v)));
    assert.equal(hex(answersDigestOfJson(JSON.stringify(v, null, 2))), hex(answersDigest(v)));
  }
  refused(answersDigestOfJson, '{"a":{"x":[{"k":1,"\\u006b":2}]}}', "an escaped name twice");
  refused(answersDigestOfJson, '{"a":1,"b":{"a":1},"a":2}', "a name twice around another object");
  answersDigestOfJson('{"a":{"a":1},"b":["a","a"],"c":"a"}'); // one name in different objects, values alike: no duplicate
});
