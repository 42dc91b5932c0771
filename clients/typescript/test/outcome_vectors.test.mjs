// Recorded outcomes against the repository's test vectors
// (sealer/testdata/outcomes.json, README.md beside it; FORMAT.md, "Recorded
// outcomes"), written again from FORMAT.md with node:crypto alone: every
// seal vector is rebuilt byte for byte, intermediate values included, and
// every opening vector reaches its verdict at its step. node:crypto has
// ChaCha20-Poly1305 with a 12-byte nonce, not XChaCha20-Poly1305, so HChaCha20
// (draft-irtf-cfrg-xchacha, section 2.2) is written here.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createCipheriv, createDecipheriv, hkdfSync } from "node:crypto";

const vectors = JSON.parse(readFileSync(new URL("../../../sealer/testdata/outcomes.json", import.meta.url), "utf8"));
const hex = (b) => Buffer.from(b).toString("hex");
const unhex = (s) => Buffer.from(s, "hex");

const HEADER = 5;
const NONCE = 24;
const TAG = 16;
const OVERHEAD = HEADER + NONCE + 8 + TAG;
const MAX_OUTCOME = 1 << 20;
const MAX_UNIX_MILLI = 253402300799999n;
const OPEN_STEP = 6;

const ring = new Map(vectors.keys.map((k) => [k.id, unhex(k.key)]));

function u32(n) {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

function u64(n) {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

// hkdfInfo and tenantKey of FORMAT.md, "Keys".
const hkdfInfo = (keyId, tenant) => Buffer.concat([Buffer.from("mcp-sealer/v1 tenant key\0"), u32(keyId), Buffer.from(tenant, "utf8")]);
const tenantKey = (material, keyId, tenant) => Buffer.from(hkdfSync("sha256", material, Buffer.alloc(0), hkdfInfo(keyId, tenant), 32));

// hChaCha20 derives the subkey of XChaCha20 from the key and the nonce's
// first 16 bytes: 20 ChaCha rounds, no final addition, words 0-3 and 12-15.
function hChaCha20(key, nonce16) {
  const s = new Uint32Array(16);
  s.set([0x61707865, 0x3320646e, 0x79622d32, 0x6b206574]);
  for (let i = 0; i < 8; i++) s[4 + i] = key.readUInt32LE(4 * i);
  for (let i = 0; i < 4; i++) s[12 + i] = nonce16.readUInt32LE(4 * i);
  const rotl = (x, n) => (x << n) | (x >>> (32 - n));
  const qr = (a, b, c, d) => {
    s[a] += s[b]; s[d] = rotl(s[d] ^ s[a], 16);
    s[c] += s[d]; s[b] = rotl(s[b] ^ s[c], 12);
    s[a] += s[b]; s[d] = rotl(s[d] ^ s[a], 8);
    s[c] += s[d]; s[b] = rotl(s[b] ^ s[c], 7);
  };
  for (let i = 0; i < 10; i++) {
    qr(0, 4, 8, 12); qr(1, 5, 9, 13); qr(2, 6, 10, 14); qr(3, 7, 11, 15);
    qr(0, 5, 10, 15); qr(1, 6, 11, 12); qr(2, 7, 8, 13); qr(3, 4, 9, 14);
  }
  const out = Buffer.alloc(32);
  [0, 1, 2, 3, 12, 13, 14, 15].forEach((w, i) => out.writeUInt32LE(s[w], 4 * i));
  return out;
}

// xchacha returns the ChaCha20-Poly1305 key and 12-byte nonce of
// XChaCha20-Poly1305 with key and a 24-byte nonce.
function xchacha(key, nonce) {
  return [hChaCha20(key, nonce.subarray(0, 16)), Buffer.concat([Buffer.alloc(4), nonce.subarray(16)])];
}

function xSeal(key, nonce, plaintext, ad) {
  const c = createCipheriv("chacha20-poly1305", ...xchacha(key, nonce), { authTagLength: TAG });
  c.setAAD(ad, { plaintextLength: plaintext.length });
  return Buffer.concat([c.update(plaintext), c.final(), c.getAuthTag()]);
}

// xOpen returns the plaintext, or null when the tag does not verify.
function xOpen(key, nonce, ciphertext, ad) {
  const d = createDecipheriv("chacha20-poly1305", ...xchacha(key, nonce), { authTagLength: TAG });
  d.setAAD(ad, { plaintextLength: ciphertext.length - TAG });
  d.setAuthTag(ciphertext.subarray(ciphertext.length - TAG));
  const pt = d.update(ciphertext.subarray(0, ciphertext.length - TAG));
  try {
    d.final();
  } catch {
    pt.fill(0);
    return null;
  }
  return pt;
}

const outcomeAD = (header, stateId, tenant) => Buffer.concat([header, stateId, Buffer.from(tenant, "utf8")]);

// openOutcome is FORMAT.md, "Recorded outcomes", opening steps 1 to 6.
function openOutcome(tenant, stateId, blob) {
  if (blob.length < OVERHEAD || blob.length > OVERHEAD + MAX_OUTCOME) return { verdict: "invalid", step: 1 };
  if (blob[0] !== 0x03) return { verdict: "invalid", step: 2 };
  const keyId = blob.readUInt32BE(1);
  const tenantBytes = Buffer.byteLength(tenant, "utf8");
  if (!ring.has(keyId) || tenantBytes < 1 || tenantBytes > 255) return { verdict: "invalid", step: 3 };
  const header = blob.subarray(0, HEADER);
  const nonce = blob.subarray(HEADER, HEADER + NONCE);
  const pt = xOpen(tenantKey(ring.get(keyId), keyId, tenant), nonce, blob.subarray(HEADER + NONCE), outcomeAD(header, stateId, tenant));
  if (pt === null) return { verdict: "invalid", step: 4 };
  const recordedAt = pt.readBigUInt64BE(0);
  if (recordedAt > MAX_UNIX_MILLI) {
    pt.fill(0);
    return { verdict: "invalid", step: 5 };
  }
  return { verdict: "ok", step: OPEN_STEP, keyId, recordedAt: Number(recordedAt), outcome: pt.subarray(8) };
}

test("there are outcome vectors of every step", () => {
  assert.ok(vectors.seal.length >= 5);
  const steps = new Set(vectors.open.map((v) => v.step));
  for (const step of [1, 2, 3, 4, 5, OPEN_STEP]) assert.ok(steps.has(step), `no vector decided at step ${step}`);
});

for (const v of vectors.seal) {
  test(`seal vector: ${v.name}`, () => {
    const header = Buffer.concat([Buffer.from([0x03]), u32(v.keyId)]);
    const key = tenantKey(ring.get(v.keyId), v.keyId, v.tenant);
    const ad = outcomeAD(header, unhex(v.stateId), v.tenant);
    const plaintext = Buffer.concat([u64(v.recordedAt), unhex(v.outcome)]);
    const nonce = unhex(v.nonce);
    assert.equal(hex(hkdfInfo(v.keyId, v.tenant)), v.hkdfInfo, "hkdfInfo");
    assert.equal(hex(key), v.tenantKey, "tenantKey");
    assert.equal(hex(header), v.header, "header");
    assert.equal(hex(ad), v.ad, "ad");
    assert.equal(hex(plaintext), v.plaintext, "plaintext");
    assert.equal(hex(Buffer.concat([header, nonce, xSeal(key, nonce, plaintext, ad)])), v.blob, "blob");
  });
}

for (const v of vectors.open) {
  test(`open vector: ${v.name}`, () => {
    const got = openOutcome(v.tenant, unhex(v.stateId), unhex(v.blob));
    assert.deepEqual([got.verdict, got.step], [v.want, v.step]);
    if (v.want === "ok") {
      assert.deepEqual({ keyId: got.keyId, recordedAt: got.recordedAt, outcome: hex(got.outcome) }, v.opened);
    }
  });
}
