// The codec and the error mapping, with fake sealers for the error paths
// (the real sealer drives them in integration/ and e2e/typescript_test.go).
import { test } from "node:test";
import assert from "node:assert/strict";
import { ConnectError, Code } from "@connectrpc/connect";
import { createMcpHandler, McpServer, inputRequired } from "@modelcontextprotocol/server";
import { z } from "zod";
import { checkParamName, fromConnect, fromRest, parseReason, requestDigest, Reason, SealerError } from "../dist/index.js";
import { ANONYMOUS, sealedRequestState } from "../dist/mcp.js";

// ctx is the handler's context as the SDK builds it: req is the HTTP request the message came in.
const ctx = (id, method = "tools/call", clientId, req) => ({
  mcpReq: { id, method },
  http: { ...(req && { req }), ...(clientId && { authInfo: { clientId } }) },
});
const params = { name: "get_weather", arguments: { location: "Paris" }, requestState: "s", _meta: { a: 1 } };

// fake records the calls and answers them with answers, in turn (an Error is thrown).
function fake(...answers) {
  const calls = [];
  const next = async (kind, req) => {
    calls.push({ kind, req });
    const a = answers.length > 1 ? answers.shift() : answers[0];
    if (a instanceof Error) throw a;
    return a;
  };
  return { calls, seal: (r) => next("seal", r), open: (r) => next("open", r), close: async () => {} };
}

// inRequest runs f inside states.fetch as the SDK would run a handler for
// a JSON-RPC request; f gets the HTTP request (the SDK's ctx.http.req).
async function inRequest(states, message, f) {
  let result;
  const handler = states.fetch(async (req, opts) => {
    assert.deepEqual(opts.parsedBody, message, "the SDK gets the body already parsed");
    result = await f(req);
    return new Response("{}");
  });
  await handler(new Request("http://x/mcp", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(message) }));
  return result;
}

test("mint and verify bind the principal and the request as received", async () => {
  const sealer = fake({ requestState: "st", expiresAt: new Date() }, { payload: new TextEncoder().encode('{"round":1}') });
  const states = sealedRequestState({ sealer, principal: (c) => c.http?.authInfo?.clientId, anonymous: true, ttlSeconds: 30 });
  const msg = { jsonrpc: "2.0", id: 7, method: "tools/call", params };
  assert.equal(await inRequest(states, msg, (req) => states.mint({ round: 1 }, ctx(7, "tools/call", "alice", req), { oneTime: true })), "st");
  assert.deepEqual(await inRequest(states, msg, (req) => states.verify("st", ctx(7, "tools/call", undefined, req))), { round: 1 });
  const [seal, open] = sealer.calls;
  assert.equal(seal.req.principal, "alice");
  assert.equal(seal.req.ttlMs, 30_000);
  assert.equal(seal.req.oneTime, true);
  assert.deepEqual(seal.req.request, { method: "tools/call", params });
  assert.equal(open.req.principal, ANONYMOUS);
  assert.deepEqual(requestDigest(open.req.request.method, open.req.request.params), requestDigest("tools/call", { name: "get_weather", arguments: { location: "Paris" } }));
});

test("verify refuses a request the codec did not see, without calling the sealer", async () => {
  const sealer = fake(new Error("must not be called"));
  const states = sealedRequestState({ sealer, anonymous: true });
  await assert.rejects(states.verify("st", ctx(1)), (e) => e instanceof SealerError && /states.fetch/.test(e.message));
  const other = { jsonrpc: "2.0", id: 2, method: "tools/call", params };
  await assert.rejects(inRequest(states, other, (req) => states.verify("st", ctx(1, "tools/call", undefined, req))), SealerError);
  await assert.rejects(inRequest(states, { ...other, id: 1, method: "tools/list" }, (req) => states.verify("st", ctx(1, "tools/list", undefined, req))), SealerError);
  // Inside states.fetch, but ctx names no HTTP request, or one states.fetch never read.
  await assert.rejects(inRequest(states, { ...other, id: 1 }, () => states.verify("st", ctx(1))), /states.fetch/);
  const unread = new Request("http://x/mcp", { method: "POST", body: JSON.stringify({ ...other, id: 1 }) });
  await assert.rejects(inRequest(states, { ...other, id: 1 }, () => states.verify("st", ctx(1, "tools/call", undefined, unread))), /states.fetch/);
  assert.equal(sealer.calls.length, 0);
});

test("the binding follows the HTTP request ctx names, not the async context it runs in", async () => {
  const sealer = fake({ payload: new TextEncoder().encode("1") });
  const states = sealedRequestState({ sealer, principal: () => "p" });
  const paris = { jsonrpc: "2.0", id: 1, method: "tools/call", params };
  const boston = { ...paris, params: { ...params, arguments: { location: "Boston" } } };
  let bostonReq;
  await inRequest(states, boston, (req) => void (bostonReq = req));
  // Boston's message handled while Paris's request is in flight, with the same id.
  await inRequest(states, paris, () => states.verify("st", ctx(1, "tools/call", undefined, bostonReq)));
  assert.deepEqual(sealer.calls[0].req.request.params.arguments, { location: "Boston" });
});

test("a request in a JSON-RPC batch is never bound, without calling the sealer", async () => {
  const sealer = fake(new Error("must not be called"));
  const states = sealedRequestState({ sealer, principal: () => "p" });
  const first = { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "get_weather", arguments: { location: "Paris" } } };
  const second = { ...first, params: { ...params, arguments: { location: "Boston" } } };
  for (const batch of [[first, second], [second], [first, { jsonrpc: "2.0", method: "notifications/initialized" }]]) {
    await assert.rejects(inRequest(states, batch, (req) => states.verify("st", ctx(7, "tools/call", undefined, req))), /batch/);
    await assert.rejects(inRequest(states, batch, (req) => states.mint({}, ctx(7, "tools/call", undefined, req))), /batch/);
  }
  assert.equal(sealer.calls.length, 0);
});

// The attack on the SDK's default legacy serving (legacy: 'stateless'): a
// batch of two tools/call sharing an id, the first with the arguments a
// state was sealed for, the second with others and that state. The fake
// sealer opens whatever it is given, so only the codec stands in the way.
test("through the SDK: a batch repeating an id cannot run a handler with another message's state", async () => {
  const sealer = fake({ payload: new TextEncoder().encode('{"round":1}') });
  const states = sealedRequestState({ sealer, anonymous: true });
  const ran = [];
  const refusals = [];
  const mcp = createMcpHandler(() => {
    const s = new McpServer({ name: "t", version: "1" }, { requestState: { verify: states.verify } });
    s.server.onerror = (err) => refusals.push(err.message);
    s.registerTool("get_weather", { inputSchema: z.object({ location: z.string() }) }, async ({ location }, c) => {
      ran.push({ location, state: c.mcpReq.requestState() });
      if (c.mcpReq.requestState()) return { content: [{ type: "text", text: `Weather in ${location}` }] };
      return inputRequired({ requestState: await states.mint({ round: 1 }, c) });
    });
    return s;
  });
  const post = async (body) => {
    const res = await states.fetch(mcp.fetch)(
      new Request("http://x/mcp", { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: JSON.stringify(body) }),
    );
    return res.text();
  };
  const call = (location, extra) => ({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "get_weather", arguments: { location }, ...extra } });
  const retry = { requestState: "S", inputResponses: { units: { action: "accept", content: { units: "c" } } } };

  // A single message still binds (and the default legacy path serves it).
  const alone = await post(call("A", retry));
  assert.match(alone, /Weather in A/);
  assert.deepEqual(sealer.calls.map((c) => c.req.request.params.arguments), [{ location: "A" }]);

  ran.length = 0;
  const answer = await post([call("A"), call("B", retry)]);
  assert.deepEqual(ran.filter((r) => r.state !== undefined), [], `a handler ran with a state: ${JSON.stringify(ran)}`);
  assert.ok(!ran.some((r) => r.location === "B"), `the handler ran for B: ${JSON.stringify(ran)}`);
  assert.doesNotMatch(answer, /Weather in B/);
  assert.equal(sealer.calls.length, 1, "the sealer was not asked to open the batch's state");
  assert.ok(refusals.some((m) => /requestState verification rejected tools\/call: .*batch/.test(m)), JSON.stringify(refusals));
});

test("verify tries transient failures again, and refusals never", async () => {
  const ledger = new SealerError(Reason.LEDGER_UNAVAILABLE, "sealer: ledger unavailable");
  const msg = { jsonrpc: "2.0", id: 1, method: "tools/call", params };
  const ok = { payload: new TextEncoder().encode("1") };

  let sealer = fake(ledger, ledger, ok);
  let states = sealedRequestState({ sealer, principal: () => "p", retry: { backoffMs: 1 } });
  assert.equal(await inRequest(states, msg, (req) => states.verify("st", ctx(1, "tools/call", undefined, req))), 1);
  assert.equal(sealer.calls.length, 3);

  sealer = fake(ledger);
  states = sealedRequestState({ sealer, principal: () => "p", retry: { attempts: 4, backoffMs: 1 } });
  await assert.rejects(inRequest(states, msg, (req) => states.verify("st", ctx(1, "tools/call", undefined, req))), (e) => e.retryable && e.reasonName === "LEDGER_UNAVAILABLE");
  assert.equal(sealer.calls.length, 4);

  sealer = fake(new SealerError(Reason.EXPIRED, "sealer: state expired"));
  states = sealedRequestState({ sealer, principal: () => "p", retry: { backoffMs: 1 } });
  await assert.rejects(inRequest(states, msg, (req) => states.verify("st", ctx(1, "tools/call", undefined, req))), (e) => e.rejected && !e.retryable);
  assert.equal(sealer.calls.length, 1);
});

test("no principal and a payload that is not JSON are refused", async () => {
  const msg = { jsonrpc: "2.0", id: 1, method: "tools/call", params };
  let states = sealedRequestState({ sealer: fake({ payload: new Uint8Array() }), principal: () => "" });
  await assert.rejects(inRequest(states, msg, (req) => states.verify("st", ctx(1, "tools/call", undefined, req))), /no principal/);
  states = sealedRequestState({ sealer: fake({ payload: new Uint8Array([0xff]) }), principal: () => "p" });
  await assert.rejects(inRequest(states, msg, (req) => states.verify("st", ctx(1, "tools/call", undefined, req))), /not JSON/);
});

test("states.fetch refuses a body over 4 MiB before parsing it, and passes what is not JSON on", async () => {
  const states = sealedRequestState({ sealer: fake({}), principal: () => "p" });
  let seen = 0;
  const h = states.fetch(async (req) => (seen++, new Response(await req.text())));
  const big = await h(new Request("http://x/mcp", { method: "POST", body: "x".repeat((4 << 20) + 1) }));
  assert.equal(big.status, 413);
  const bad = await h(new Request("http://x/mcp", { method: "POST", body: "{not json" }));
  assert.equal(await bad.text(), "{not json");
  assert.equal(seen, 1);
});

test("reasons are read from names only", () => {
  assert.equal(parseReason("EXPIRED"), Reason.EXPIRED);
  for (const s of ["REASON_EXPIRED", "UNSPECIFIED", "toString", "__proto__", "", 5, null]) assert.equal(parseReason(s), Reason.UNSPECIFIED, String(s));
});

test("a gateway error body maps to its reason", () => {
  const e = fromRest(409, { code: 6, message: "sealer: ledger: state already consumed", details: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "ALREADY_CONSUMED", domain: "sealer.mcp" }] });
  assert.ok(e.rejected && e.reasonName === "ALREADY_CONSUMED" && e.code === 409);
  const plain = fromRest(502, "<html>bad gateway</html>");
  assert.ok(plain.reason === Reason.UNSPECIFIED && plain.retryable);
});

test("a gRPC status maps to the reason of its ErrorInfo", () => {
  // google.rpc.ErrorInfo{reason: "KEYS_UNAVAILABLE", domain: "sealer.mcp"}
  const info = Uint8Array.from([0x0a, 16, ...Buffer.from("KEYS_UNAVAILABLE"), 0x12, 10, ...Buffer.from("sealer.mcp")]);
  const e = fromConnect(new ConnectError("sealer: no keys loaded yet", Code.Unavailable, undefined, [{ type: "google.rpc.ErrorInfo", value: info }]));
  assert.ok(e.reasonName === "KEYS_UNAVAILABLE" && e.retryable && !e.rejected && e.code === Code.Unavailable);
  const garbled = fromConnect(new ConnectError("x", Code.Internal, undefined, [{ type: "google.rpc.ErrorInfo", value: Uint8Array.from([0x0a, 200]) }]));
  assert.equal(garbled.reason, Reason.UNSPECIFIED);
});

test("member names that differ from a salient one only in case are refused", () => {
  for (const [method, name] of [["tools/call", "NAME"], ["tools/call", "Arguments"], ["tools/call", "argumentſ"], ["prompts/get", "nAmE"], ["resources/read", "URI"], ["resources/read", "urı"], ["resources/read", "URİ"], ["tools/call", "\u212Aarguments".slice(1)]]) {
    if (name === "arguments") continue;
    assert.throws(() => checkParamName(method, name), SealerError, `${method} ${name}`);
  }
  for (const [method, name] of [["tools/call", "name"], ["tools/call", "names"], ["resources/read", "name"], ["tools/call", "_meta"], ["tools/call", "nàme"]]) {
    assert.doesNotThrow(() => checkParamName(method, name), `${method} ${name}`);
  }
  assert.throws(() => checkParamName("tools/list", "name"), SealerError);
});

// Issue 50: look-alikes under NFKC and case folding, as mcpdigest.LookAlike
// and the Python client's check_param_name refuse them (the same cases as
// clients/python/tests/test_digest.py).
test("member names that fold to a salient one are refused", () => {
  const refused = [
    ["tools/call", "\uff41\uff52\uff47\uff55\uff4d\uff45\uff4e\uff54\uff53"], // fullwidth arguments
    ["tools/call", "\uff4e\uff41\uff4d\uff45"], // fullwidth name
    ["prompts/get", "\uff2e\uff21\uff2d\uff25"], // fullwidth NAME
    ["tools/call", "\uff41rguments"], // one fullwidth letter
    ["tools/call", "\u3381me"], // U+3381, the square nA: NFKC nA
    ["tools/call", "\u2115ame"], // U+2115, double-struck N
    ["tools/call", "\u{1d41a}rguments"], // mathematical bold a
    ["resources/read", "\u24e4\u24e1\u24d8"], // circled uri
    ["resources/read", "ur\u2170"], // U+2170, small roman numeral one
    ["resources/read", "\uff55\uff52\u0131"], // fullwidth, then dotless i: both foldings at once
    ["resources/read", "\uff55\uff52\u0130"], // fullwidth, then dotted capital I
    ["resources/read", "ur\u{1d6a4}"], // mathematical italic dotless i: NFKC takes it to U+0131
  ];
  const failures = [];
  for (const [method, name] of refused) {
    const target = method === "resources/read" ? "uri" : "name";
    try {
      checkParamName(method, name);
      failures.push(`${method} ${JSON.stringify(name)}: got accepted, want refused`);
    } catch (err) {
      if (!(err instanceof SealerError && err.reason === Reason.INVALID_ARGUMENT)) failures.push(`${method} ${JSON.stringify(name)}: got ${err}`);
    }
    assert.throws(() => requestDigest(method, { [target]: "x", [name]: {} }), SealerError, `${method} ${JSON.stringify(name)} in params`);
  }
  const accepted = [
    ["tools/call", "argumen\ufb06"], // U+FB06 is st under NFKC: argumenst
    ["tools/call", "argument\u00df"], // ß folds to ss: argumentss
    ["tools/call", "\uff4e\uff41\uff4d\uff45\uff53"], // fullwidth names
    ["tools/call", "name\u0301"], // NFKC composes it: namé
    ["tools/call", "n\u0430me"], // Cyrillic a: a homoglyph no folding takes to a
    ["tools/call", "\uff55\uff52\uff49"], // fullwidth uri: not salient for tools/call
    ["tools/call", "name"],
    ["tools/call", "arguments"],
    ["resources/read", "uri"],
    ["tools/call", "name\u200b"], // a zero width space: NFKC keeps it
    ["resources/read", "UR\u0130\u0307"], // longer than uri: i U+0307 once folded
    // Longer than any salient name, so never normalized: NFKC's cost grows
    // with the square of a run of combining marks (this one, about 10 s).
    ["tools/call", "name" + "\u0301\u0316".repeat(100_000)],
  ];
  for (const [method, name] of accepted) {
    try {
      checkParamName(method, name);
    } catch (err) {
      failures.push(`${method} ${JSON.stringify(name)}: got ${err}, want accepted`);
    }
  }
  assert.deepEqual(failures, []);
});

test("arguments JSON cannot hold are refused", () => {
  for (const args of [{ a: undefined }, { a: () => 1 }, { a: 1n }, { a: NaN }, { a: new Date(0) }, { a: "\ud800" }, [1]]) {
    assert.throws(() => requestDigest("tools/call", { name: "t", arguments: args }), SealerError);
  }
  assert.equal(Buffer.from(requestDigest("tools/call", { name: "t", arguments: { a: -0 } })).toString("hex"), Buffer.from(requestDigest("tools/call", { name: "t", arguments: { a: 0 } })).toString("hex"));
});
