// Issue 40, finding 7: principal by decision, never by default. The codec
// is made only with a principal function (fromAuthInfo for the SDK's own
// authentication) or an explicit anonymous opt-in; unauthenticated callers
// get ANONYMOUS, under a prefix no principal function may return, and only
// when the author opted in. Fake sealers record what the codec sends.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SealerError } from "../dist/index.js";
import * as mcp from "../dist/mcp.js";

const { sealedRequestState } = mcp;

// ctx is the handler's context as the SDK builds it, with authInfo when the
// handler was given one (the SDK's bearer authentication).
const ctx = (id, req, authInfo) => ({ mcpReq: { id, method: "tools/call" }, http: { req, ...(authInfo && { authInfo }) } });
const alice = { token: "alice-token", clientId: "app", scopes: [] };
const bob = { token: "bob-token", clientId: "app", scopes: [] };
const msg = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "book", arguments: { seat: "1A" } } };

function fake() {
  const calls = [];
  return {
    calls,
    seal: async (r) => (calls.push({ kind: "seal", req: r }), { requestState: "st", expiresAt: new Date() }),
    open: async (r) => (calls.push({ kind: "open", req: r }), { payload: new TextEncoder().encode("{}"), requestState: "st" }),
    close: async () => {},
  };
}

// inRequest runs f inside states.fetch as the SDK would run a handler.
async function inRequest(states, f) {
  let result, error;
  await states.fetch(async (req) => {
    try {
      result = await f(req);
    } catch (err) {
      error = err;
    }
    return new Response("{}");
  })(new Request("http://x/mcp", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(msg) }));
  if (error) throw error;
  return result;
}

// principalOf mints and verifies for the caller authInfo and returns the
// principal the sealer got, or the error the codec threw (the sealer then
// got nothing).
async function principalOf(states, sealer, authInfo) {
  sealer.calls.length = 0;
  try {
    await inRequest(states, (req) => states.mint({}, ctx(1, req, authInfo)));
    await inRequest(states, (req) => states.verify("st", ctx(1, req, authInfo)));
  } catch (err) {
    assert.equal(sealer.calls.length, 0, `the sealer was called: ${JSON.stringify(sealer.calls)}`);
    return err;
  }
  const [seal, open] = sealer.calls.map((c) => c.req.principal);
  assert.equal(seal, open, "seal and open bind one principal");
  return seal;
}

test("the codec is not made without a decision on the principal", () => {
  for (const opts of [{}, { anonymous: false }, { principal: undefined }, { principal: "alice" }]) {
    assert.throws(() => sealedRequestState({ sealer: fake(), ...opts }), /principal/, `got no error for ${JSON.stringify(opts)}, want one`);
  }
  sealedRequestState({ sealer: fake(), principal: () => "p" });
  sealedRequestState({ sealer: fake(), principal: mcp.fromAuthInfo });
  sealedRequestState({ sealer: fake(), anonymous: true });
});

test("ANONYMOUS is reserved: no principal function may return it or anything under its prefix", async () => {
  // The fallback the README used to show: with auth outside the SDK (no
  // authInfo) it made Alice and Bob one principal. Now it is refused.
  const shared = (c) => c.http?.authInfo?.clientId ?? mcp.ANONYMOUS;
  const failures = [];
  for (const principal of [shared, () => mcp.ANONYMOUS, () => `${mcp.RESERVED_PREFIX ?? "sealer:"}alice`]) {
    for (const anonymous of [false, true]) {
      const sealer = fake();
      const got = await principalOf(sealedRequestState({ sealer, principal, anonymous }), sealer, undefined);
      if (!(got instanceof SealerError && /reserved/.test(got.message))) failures.push(`${principal} (anonymous ${anonymous}): got ${got}, want refused as reserved`);
    }
  }
  assert.deepEqual(failures, []);
  assert.ok(mcp.ANONYMOUS.startsWith(mcp.RESERVED_PREFIX), `got ANONYMOUS ${mcp.ANONYMOUS}, want it under ${mcp.RESERVED_PREFIX}`);
});

test("unauthenticated callers are refused unless the author opted in to anonymous", async () => {
  for (const principal of [() => undefined, () => null, mcp.fromAuthInfo]) {
    let sealer = fake();
    const got = await principalOf(sealedRequestState({ sealer, principal }), sealer, undefined);
    assert.ok(got instanceof SealerError && /anonymous/.test(got.message), `${principal}: got ${got}, want refused`);
    sealer = fake();
    assert.equal(await principalOf(sealedRequestState({ sealer, principal, anonymous: true }), sealer, undefined), mcp.ANONYMOUS);
  }
});

test("the SDK's authentication: each verified token is its own principal, never ANONYMOUS", async () => {
  for (const opts of [{ principal: mcp.fromAuthInfo }, { anonymous: true }]) {
    const sealer = fake();
    const states = sealedRequestState({ sealer, ...opts });
    const a = await principalOf(states, sealer, alice);
    const b = await principalOf(states, sealer, bob);
    assert.equal(typeof a, "string", `${JSON.stringify(opts)}: got ${a}`);
    assert.notEqual(a, b, "Alice and Bob share a client id, not a principal");
    assert.notEqual(a, mcp.ANONYMOUS);
    assert.ok(!a.includes("alice-token"), "the principal does not carry the token");
    assert.equal(await principalOf(states, sealer, alice), a, "the same token, the same principal");
  }
});

test("a principal function's own principals pass as they are", async () => {
  const sealer = fake();
  const states = sealedRequestState({ sealer, principal: (c) => c.http?.authInfo?.clientId });
  assert.equal(await principalOf(states, sealer, alice), "app");
  const got = await principalOf(sealedRequestState({ sealer, principal: () => "" }), sealer, alice);
  assert.ok(got instanceof SealerError && /no principal/.test(got.message), `got ${got}`);
});

test("fromAuthInfo is token: and the hex SHA-256 of the token, as the Python middleware's from_access_token", async () => {
  const sealer = fake();
  const got = await principalOf(sealedRequestState({ sealer, principal: mcp.fromAuthInfo }), sealer, alice);
  assert.equal(got, "token:9c220f200955d76c0a38d308225e0ef10c5f971acaf2f8d1d8f732affa5bd1dc");
});

// Issue 50: a principal function may be async (a session store, a token
// introspection): its promise is awaited, and what it resolves to is judged
// as a returned value; a rejection refuses the request.
test("an async principal function is awaited", async () => {
  const failures = [];
  const cases = [
    // [principal function, anonymous, want: a principal, or a RegExp of the refusal]
    [async (c) => `user:${c.http?.authInfo?.clientId}:${c.http?.authInfo?.token}`, false, "user:app:alice-token"],
    [(c) => Promise.resolve(c.http?.authInfo?.token), false, "alice-token"],
    [async () => undefined, false, /anonymous/],
    [async () => undefined, true, mcp.ANONYMOUS],
    [async () => "", false, /no principal/],
    [async () => mcp.ANONYMOUS, true, /reserved/],
    [async () => 7, false, /no principal/],
    [async () => {
      throw new Error("session store down");
    }, true, /session store down/],
  ];
  for (const [principal, anonymous, want] of cases) {
    const sealer = fake();
    const got = await principalOf(sealedRequestState({ sealer, principal, anonymous }), sealer, alice);
    const ok = want instanceof RegExp ? got instanceof Error && want.test(got.message) : got === want;
    if (!ok) failures.push(`${principal} (anonymous ${anonymous}): got ${got}, want ${want}`);
  }
  assert.deepEqual(failures, []);
});
