// The answers digest of a retry's inputResponses (FORMAT.md, "Recorded
// outcomes", "The answers digest"), as mcpdigest.Answers computes it: an
// open that records its outcome sends it (OpenRequest.answers), and a retry
// that answers otherwise than the open that consumed its state is refused,
// OUTCOME_CONFLICT, instead of getting that open's answer. The canonical
// form is written by canonicalize, as for the request digest.
import { createHash } from "node:crypto";
import canonicalize from "canonicalize";
import { Reason } from "./gen/sealer/v1/sealer_pb.js";
import { SealerError } from "./errors.js";

const label = new TextEncoder().encode("mcp-sealer/v1 answers\x00");

function refuse(message: string): never {
  throw new SealerError(Reason.INVALID_ARGUMENT, `sealer: invalid argument: ${message}`);
}

/**
 * The 32-byte answers digest of a retry's inputResponses as decoded (as
 * JSON.parse returns it): SHA-256, under its own label, of the RFC 8785
 * form of the object with the member _meta of each of its members' values
 * removed. undefined (absent), null and {} have one digest. Throws a
 * SealerError (INVALID_ARGUMENT) for anything but a plain object, null or
 * undefined, and for what JSON cannot hold (a number that is not finite, a
 * lone surrogate, undefined, functions, bigints, objects other than plain
 * ones). What only the text shows (duplicate names, invalid UTF-8) is the
 * parser's: answersDigestOfJson reads text.
 */
export function answersDigest(inputResponses: unknown): Uint8Array {
  if (inputResponses === undefined || inputResponses === null) return digest("{}");
  if (!isPlainObject(inputResponses)) refuse("inputResponses must be an object");
  checkJson(inputResponses);
  // Each response's own metadata is not an answer. Object.fromEntries and
  // the spread define members, so a member named __proto__ stays one.
  const answers = Object.fromEntries(
    Object.entries(inputResponses).map(([name, r]) => {
      if (!isPlainObject(r) || !Object.hasOwn(r, "_meta")) return [name, r];
      const { _meta: _, ...rest } = r;
      return [name, rest];
    }),
  );
  return digest(canonicalize(answers) ?? refuse("inputResponses have no canonical form"));
}

/**
 * The answers digest of inputResponses given as JSON text (a Uint8Array is
 * UTF-8), as mcpdigest.Answers reads it: empty text is absent, null and {}
 * are the same. Besides what answersDigest refuses, text that is not JSON,
 * not UTF-8, or holds a name twice in one object (two _meta included) is
 * refused.
 */
export function answersDigestOfJson(text: string | Uint8Array): Uint8Array {
  if (typeof text !== "string") {
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(text);
    } catch {
      refuse("inputResponses must be UTF-8");
    }
  }
  if (text === "") return answersDigest(undefined);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    refuse("inputResponses must be JSON");
  }
  if (hasNameTwice(text)) refuse("inputResponses must be JSON without duplicate names");
  return answersDigest(value);
}

/** Refuses what JSON text cannot hold; no limit on depth or size (a loop, not recursion). */
function checkJson(v: unknown): void {
  const stack: unknown[] = [v];
  while (stack.length > 0) {
    const x = stack.pop();
    switch (typeof x) {
      case "string":
        if (!x.isWellFormed()) refuse("inputResponses hold a lone surrogate");
        continue;
      case "number":
        if (!Number.isFinite(x)) refuse("inputResponses hold a number that is not finite");
        continue;
      case "boolean":
        continue;
      case "object":
        if (x === null) continue;
        if (Array.isArray(x)) {
          for (let i = 0; i < x.length; i++) stack.push(x[i]);
          continue;
        }
        if (!isPlainObject(x)) refuse("inputResponses hold an object that is not JSON");
        for (const key of Object.keys(x)) {
          if (!key.isWellFormed()) refuse("inputResponses hold a lone surrogate");
          stack.push(x[key]);
        }
        continue;
    }
    refuse("inputResponses hold a value that is not JSON");
  }
}

/**
 * Whether JSON text (JSON.parse accepted it) has an object with a member
 * name twice, names compared once unescaped. A string right after { or
 * after a comma within an object is a name.
 */
function hasNameTwice(text: string): boolean {
  const open: (Set<string> | undefined)[] = []; // a set of names per object, undefined per array
  let name = false;
  for (let i = 0; i < text.length; i++) {
    switch (text[i]) {
      case '"': {
        let j = i + 1;
        while (text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
        const names = open.at(-1);
        if (name && names !== undefined) {
          const n = JSON.parse(text.slice(i, j + 1)) as string;
          if (names.has(n)) return true;
          names.add(n);
        }
        name = false;
        i = j;
        break;
      }
      case "{":
        open.push(new Set());
        name = true;
        break;
      case "[":
        open.push(undefined);
        name = false;
        break;
      case "}":
      case "]":
        open.pop();
        name = false;
        break;
      case ",":
        name = open.at(-1) !== undefined;
        break;
    }
  }
  return false;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function digest(canonical: string): Uint8Array {
  return new Uint8Array(createHash("sha256").update(label).update(canonical, "utf8").digest());
}
