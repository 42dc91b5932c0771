// Issue 42, failures an author can act on: every failed seal and open
// reaches onError (or the server's log) as the SealerError with its reason;
// the MCP client sees a bare message, never the sealer's address or
// credentials; one deadline bounds a hung sealer; TLS failures and 4xx are
// never retried. Fake sealers stand for the real one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ConnectError, Code } from "@connectrpc/connect";
import { fromConnect, fromRest, Reason, SealerError } from "../dist/index.js";
import { SEALER_MISCONFIGURED, SEALER_UNAVAILABLE, SealFailed, sealedRequestState } from "../dist/mcp.js";

const ctx = (id, req) => ({ mcpReq: { id, method: "tools/call" }, http: { req } });
const params = { name: "book", arguments: { seat: "1A" } };
const msg = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { ...params, requestState: "s" } };

function failing(err) {
  const calls = [];
  const next = async (kind) => {
    calls.push(kind);
    if (err === undefined) return new Promise(() => {}); // hung
    throw err;
  };
  return { calls, seal: () => next("seal"), open: () => next("open"), close: async () => {} };
}

async function inRequest(states, f) {
  let result;
  await states.fetch(async (req) => {
    result = await f(req);
    return new Response("{}");
  })(new Request("http://x/mcp", { method: "POST", body: JSON.stringify(msg) }));
  return result;
}

const unreachable = new SealerError(Reason.UNSPECIFIED, "sealer: unreachable", undefined, { cause: new Error("connect ECONNREFUSED 10.0.0.7:7443") });
const badToken = new SealerError(Reason.UNAUTHENTICATED, "sealer: unauthenticated: bearer token not recognized", Code.Unauthenticated);

for (const [name, err, want] of [["unreachable", unreachable, SEALER_UNAVAILABLE], ["a refused token", badToken, SEALER_MISCONFIGURED]]) {
  test(`a failed seal (${name}) reaches onError with its reason, the client a bare message`, async () => {
    const seen = [];
    const sealer = failing(err);
    const states = sealedRequestState({ sealer, anonymous: true, retry: { backoffMs: 1 }, onError: (e, info) => seen.push([e, info]) });
    const thrown = await inRequest(states, (req) => states.mint({}, ctx(1, req)).then(() => undefined, (e) => e));
    assert.ok(thrown instanceof SealFailed, `${thrown}`);
    assert.equal(thrown.message, want);
    for (const secret of ["10.0.0.7", "7443", "ECONNREFUSED", "bearer", "unauthenticated"]) assert.ok(!thrown.message.includes(secret), thrown.message);
    assert.equal(seen.length, 1);
    assert.ok(seen[0][0] instanceof SealerError && seen[0][0] === err, "onError gets the SealerError itself");
    assert.deepEqual(seen[0][1], { op: "seal", method: "tools/call" });
    assert.equal(sealer.calls.length, err.retryable ? 3 : 1);
  });
}

test("a failed open reaches onError; by default every failure is logged, without UNSPECIFIED", async (t) => {
  const lines = [];
  t.mock.method(console, "error", (...a) => lines.push(a.join(" ")));
  const states = sealedRequestState({ sealer: failing(unreachable), anonymous: true, retry: { backoffMs: 1 } });
  await assert.rejects(inRequest(states, (req) => states.verify("s", ctx(1, req))), (e) => e === unreachable);
  await assert.rejects(inRequest(states, (req) => states.mint({}, ctx(1, req))), SealFailed);
  assert.equal(lines.length, 2, lines.join("\n"));
  assert.match(lines[0], /open failed on tools\/call: sealer unavailable: unreachable/);
  assert.match(lines[1], /seal failed on tools\/call/);
  assert.ok(!lines.join("\n").includes("UNSPECIFIED"), lines.join("\n"));
});

test("a hung sealer costs one deadline, retries included", async () => {
  // A sealer that never answers, behind a client that honours each call's
  // timeoutMs (as grpcClient and restClient do).
  const hung = failing(undefined);
  hung.seal = (_r, call) => new Promise((_, reject) => setTimeout(() => reject(new SealerError(Reason.UNSPECIFIED, "sealer: deadline exceeded or cancelled")), call.timeoutMs));
  const bounded = sealedRequestState({ sealer: hung, anonymous: true, deadlineMs: 200, retry: { attempts: 5, backoffMs: 1 }, onError: () => {} });
  const started = Date.now();
  await assert.rejects(inRequest(bounded, (req) => bounded.mint({}, ctx(1, req))), (e) => e instanceof SealFailed && e.message === SEALER_UNAVAILABLE);
  assert.ok(Date.now() - started < 5000, "bounded by deadlineMs, not 3 x 10 s");
});

test("TLS failures, 4xx and replies not the sealer's are never retried", () => {
  const tls = new SealerError(Reason.UNSPECIFIED, "sealer: unreachable", undefined, { cause: Object.assign(new Error("fetch failed"), { cause: Object.assign(new Error("unable to verify the first certificate"), { code: "UNABLE_TO_VERIFY_LEAF_SIGNATURE" }) }) });
  assert.equal(tls.failure, "tls");
  const grpcTls = fromConnect(new ConnectError("Client network socket disconnected before secure TLS connection was established", Code.Unavailable));
  const http400 = fromRest(400, "Client sent an HTTP request to an HTTPS server.");
  const http404 = fromRest(404, { message: "Not Found" });
  for (const e of [tls, grpcTls, http400, http404, badToken]) {
    assert.ok(!e.retryable && e.misconfigured && !e.unavailable, `${e.why}: retryable ${e.retryable}`);
    assert.notEqual(e.why, "UNSPECIFIED");
  }
  for (const e of [unreachable, fromRest(503, "<html>"), fromConnect(new ConnectError("x", Code.DeadlineExceeded))]) {
    assert.ok(e.retryable && e.unavailable && !e.misconfigured, e.why);
  }
});
