// The request digest (FORMAT.md, "Request digest"), computed in process as
// the sealer computes it (mcpdigest/digest.go): the method, the target
// (tool or prompt name, resource uri) and the RFC 8785 canonical form of the
// arguments, hashed with SHA-256. It reads params already decoded, so what
// depends on the params as text (their size, duplicate member names, invalid
// UTF-8 outside the salient members) is the JSON parser's; everything else
// is refused exactly as the core refuses it.
import { createHash } from "node:crypto";
import canonicalize from "canonicalize";
import { Reason } from "./gen/sealer/v1/sealer_pb.js";
import { SealerError } from "./errors.js";

/** The deepest nesting of the arguments: 64 levels, the arguments object being the first. */
export const MAX_DEPTH = 64;
/** The most values the arguments may hold, the arguments object included; member names are not values. */
export const MAX_VALUES = 100_000;

const encoder = new TextEncoder();
const label = encoder.encode("mcp-sealer/v1 request\x00");

// The salient members per method that may carry a requestState: the one
// that names the target and the one that holds its arguments ("" for none).
// Every other member is ignored, so that _meta, inputResponses, requestState
// and fields of later protocol versions never change the digest.
const salient: Record<string, { target: string; args: string }> = {
  "tools/call": { target: "name", args: "arguments" },
  "prompts/get": { target: "name", args: "arguments" },
  "resources/read": { target: "uri", args: "" },
};

/** JSON as JSON.parse returns it. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };

function refuse(message: string): never {
  throw new SealerError(Reason.INVALID_ARGUMENT, `sealer: invalid argument: ${message}`);
}

/** The names of the params members the digest reads for method, or undefined for a method that cannot carry a requestState. */
export function salientParams(method: string): string[] | undefined {
  const s = salient[method];
  return s && (s.args ? [s.target, s.args] : [s.target]);
}

/**
 * Refuses a params member whose name is a look-alike of a salient one
 * ("NAME", "Arguments", "URI", "argumentſ", "ａｒｇｕｍｅｎｔｓ"), as
 * mcpdigest.CheckParamName does: equal under Go's strings.EqualFold, or once
 * upper-cased or lower-cased rune by rune (which adds U+0130 and U+0131 for
 * i), or once folded (NFKC and case folding). The digest ignores such a
 * member, but a server that binds params case-insensitively, or through
 * Unicode folding (Python's str.casefold, NFKC), may act on it.
 */
export function checkParamName(method: string, name: string): void {
  const s = salient[method];
  if (!s) refuse(`unsupported method ${JSON.stringify(truncate(method))}`);
  for (const want of [s.target, s.args]) {
    if (want && lookAlike(name, want)) {
      refuse(`params member ${JSON.stringify(truncate(name))} differs from ${JSON.stringify(want)} only in case`);
    }
  }
}

// Runes other than c and its ASCII upper case that match the ASCII letter c
// under Go's simple folding (F), unicode.ToLower (L) and unicode.ToUpper (U).
const fold: Record<string, number> = { k: 0x212a, s: 0x17f };
const lower: Record<string, number> = { i: 0x130, k: 0x212a };
const upper: Record<string, number> = { i: 0x131, s: 0x17f };

// lookAlike reports whether name, not want (an ASCII lowercase name), is
// read as want by a decoder that matches names loosely: a case variant
// (FORMAT.md's list: want's letters, their ASCII upper case, ſ for s, İ and ı
// for i), or equal to it once folded (folded).
function lookAlike(name: string, want: string): boolean {
  if (name === want) return false;
  const runes = [...name];
  if (runes.length === want.length) {
    const all = (extra: Record<string, number>) =>
      runes.every((r, i) => {
        const c = want[i]!;
        return r === c || r === c.toUpperCase() || r.codePointAt(0) === extra[c];
      });
    if (all(fold) || all(lower) || all(upper)) return true;
  }
  // An ASCII name folds to its lower case, which the rule above has judged.
  // A longer name folds to no ASCII name as short: NFKC and case mappings
  // take every code point to one or more, and a composition makes a letter
  // with its mark, never ASCII (U+0130 apart, taken to i first). Checked
  // first, as NFKC's cost grows with the square of a run of combining marks.
  return runes.length <= want.length && !/^[\x00-\x7f]*$/.test(name) && folded(name) === want;
}

// folded is name as a decoder that folds names reads it, where that is an
// ASCII name: NFKC, then case folding, then NFKC again (fullwidth, ligatures
// and other compatibility forms). JavaScript has no case folding: upper case
// then lower case stands for it, which maps to ASCII what full folding maps
// there (ſ, K, the ligatures, ß to ss; not ẞ, in no salient name), and ı to
// i too, as Go's simple mappings do. İ is taken to i first: its lower case
// is i U+0307. Where it yields an ASCII name it agrees with mcpdigest.Fold
// code point by code point, Unicode versions apart.
function folded(name: string): string {
  return name.replaceAll("\u0130", "i").normalize("NFKC").toUpperCase().toLowerCase().normalize("NFKC");
}

/** The 32-byte request digest of an MCP request from its method and its params object as received (decoded). */
export function requestDigest(method: string, params: unknown): Uint8Array {
  const s = salient[method];
  if (!s) refuse(`unsupported method ${JSON.stringify(truncate(method))}`);
  if (!isPlainObject(params)) refuse("params must be a JSON object");
  for (const name of Object.keys(params)) {
    if (!name.isWellFormed()) refuse("params member names must be valid Unicode");
    checkParamName(method, name);
  }
  const target = Object.hasOwn(params, s.target) ? params[s.target] : undefined;
  if (typeof target !== "string" || target === "" || !target.isWellFormed()) {
    refuse(`params.${s.target} must be a non-empty string`);
  }
  if (!s.args) return digest(method, target, new Uint8Array(0));
  const args = Object.hasOwn(params, s.args) ? params[s.args] : null;
  if (args !== null && !isPlainObject(args)) refuse(`params.${s.args} must be an object`);
  checkArguments(s.args, args);
  return digest(method, target, encoder.encode(canonicalize(args)));
}

/**
 * Checks the arguments against the core's limits: at most MAX_DEPTH levels
 * and MAX_VALUES values, numbers within ±(2^53-1) (integers beyond it lose
 * precision in JSON.parse, and the core refuses them: send them as
 * strings), and nothing JSON cannot hold (undefined, functions, bigints,
 * NaN, Infinity, lone surrogates, objects other than plain ones).
 */
function checkArguments(name: string, args: unknown): void {
  let values = 0;
  const walk = (v: unknown, depth: number): void => {
    if (++values > MAX_VALUES) refuse(`params.${name} holds more than ${MAX_VALUES} values`);
    switch (typeof v) {
      case "string":
        if (!v.isWellFormed()) refuse(`params.${name} holds a lone surrogate`);
        return;
      case "number":
        if (!Number.isFinite(v) || Math.abs(v) > Number.MAX_SAFE_INTEGER) {
          refuse(`params.${name} holds a number beyond ±(2^53-1); send it as a string`);
        }
        return;
      case "boolean":
        return;
      case "object":
        if (v === null) return;
        if (depth + 1 > MAX_DEPTH) refuse(`params.${name} nested deeper than ${MAX_DEPTH} levels`);
        if (Array.isArray(v)) {
          for (let i = 0; i < v.length; i++) walk(v[i], depth + 1);
          return;
        }
        if (!isPlainObject(v)) refuse(`params.${name} holds an object that is not JSON`);
        for (const key of Object.keys(v)) {
          if (!key.isWellFormed()) refuse(`params.${name} holds a lone surrogate`);
          walk(v[key], depth + 1);
        }
        return;
    }
    refuse(`params.${name} holds a value that is not JSON`);
  };
  walk(args, 0);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

// digest hashes the label and the three length-prefixed parts as one buffer,
// in one call into the hash rather than seven (digest was two thirds of
// requestDigest's time in a profile of the client under load).
function digest(method: string, target: string, args: Uint8Array): Uint8Array {
  const parts = [encoder.encode(method), encoder.encode(target), args];
  const buf = new Uint8Array(label.length + parts.reduce((n, p) => n + 4 + p.length, 0));
  const view = new DataView(buf.buffer);
  buf.set(label);
  let at = label.length;
  for (const part of parts) {
    view.setUint32(at, part.length);
    buf.set(part, at + 4);
    at += 4 + part.length;
  }
  return new Uint8Array(createHash("sha256").update(buf).digest());
}

/** Bounds attacker-controlled text quoted in an error. */
export function truncate(s: string): string {
  return s.length > 64 ? s.slice(0, 64) + "..." : s;
}
