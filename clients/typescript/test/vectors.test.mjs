// The request digest against the repository's test vectors
// (sealer/testdata/vectors.json, README.md beside it): every "ok" vector
// gives its digest, every "refused" one is refused, by JSON.parse (the
// package digests params already decoded) or by requestDigest. A "textOnly"
// refusal depends on the params as text; a digester of decoded params MAY
// accept it, and this test says which it accepts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { requestDigest, SealerError, Reason } from "../dist/index.js";

const vectors = JSON.parse(readFileSync(new URL("../../../sealer/testdata/vectors.json", import.meta.url), "utf8"));
const hex = (b) => Buffer.from(b).toString("hex");

// decode reads the params as an MCP server would: strict UTF-8, then JSON.
function decode(v) {
  const bytes = v.paramsHex !== undefined ? Buffer.from(v.paramsHex, "hex") : Buffer.from(v.params, "utf8");
  return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
}

function digestOf(v) {
  try {
    return { digest: hex(requestDigest(v.method, decode(v))) };
  } catch (err) {
    if (err instanceof SyntaxError || err instanceof TypeError) return { refused: "by the JSON decoder" };
    assert.ok(err instanceof SealerError, `${v.name}: ${err}`);
    assert.equal(err.reason, Reason.INVALID_ARGUMENT, v.name);
    return { refused: err.message };
  }
}

test("there are digest vectors of both verdicts", () => {
  assert.ok(vectors.digests.filter((v) => v.want === "ok").length >= 20);
  assert.ok(vectors.digests.filter((v) => v.want === "refused").length >= 20);
});

for (const v of vectors.digests) {
  test(`digest vector: ${v.name}`, (t) => {
    const got = digestOf(v);
    if (v.want === "ok") {
      assert.equal(got.digest, v.digest, `${v.name}: ${got.refused ?? ""}`);
    } else if (v.textOnly) {
      t.diagnostic(`textOnly: ${got.refused ? "refused " + got.refused : "accepted (decoded params)"}`);
    } else {
      assert.ok(got.refused, `${v.name}: digested to ${got.digest}, want refused`);
    }
  });
}
