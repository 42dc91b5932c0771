// End to end with the official TypeScript MCP client
// (@modelcontextprotocol/client) against the TypeScript example server
// (server.ts) and a real sealer: e2e/typescript_test.go starts both and
// gives their addresses in SEALER_TEST_MCP_URL (states live 5 minutes) and
// SEALER_TEST_MCP_URL_SHORT (states live 1 second, the sealer allows no
// skew), and SEALER_TEST_MCP_URL_LEGACY (states live 5 minutes; it also
// serves 2025-era requests and JSON-RPC batches, the SDK's default).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client, ProtocolError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const url = process.env.SEALER_TEST_MCP_URL;
const shortURL = process.env.SEALER_TEST_MCP_URL_SHORT;
const legacyURL = process.env.SEALER_TEST_MCP_URL_LEGACY;
const skip = url && shortURL && legacyURL ? false : "no example server: e2e/typescript_test.go starts one";
if (skip && process.env.CI) throw new Error("SEALER_TEST_MCP_URL, SEALER_TEST_MCP_URL_SHORT and SEALER_TEST_MCP_URL_LEGACY are unset: run through e2e/typescript_test.go");

// connect returns a client on the 2026-07-28 wire with a bearer token (or
// none); auto answers elicitations from answers and fulfils the rounds
// itself, otherwise every input_required result comes back to the caller.
async function connect(t, base, token, { auto = false, answers = {} } = {}) {
  const client = new Client(
    { name: "sealer-e2e-ts", version: "1.0.0" },
    {
      capabilities: { elicitation: {} },
      versionNegotiation: { mode: { pin: "2026-07-28" } },
      inputRequired: { autoFulfill: auto },
    },
  );
  client.setRequestHandler("elicitation/create", async (req) => {
    const content = {};
    for (const field of Object.keys(req.params.requestedSchema?.properties ?? {})) content[field] = answers[field];
    return { action: "accept", content };
  });
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  await client.connect(new StreamableHTTPClientTransport(new URL(base), { requestInit: { headers } }));
  t.after(() => client.close());
  return client;
}

const text = (r) => (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join(" ");

// firstRound calls a tool without answering and returns the state it issued.
async function firstRound(client, name, args) {
  const r = await client.callTool({ name, arguments: args }, { allowInputRequired: true });
  assert.equal(r.resultType, "input_required", JSON.stringify(r));
  assert.ok(typeof r.requestState === "string" && r.requestState.length > 0, "an input_required result with a state");
  assert.ok(Object.keys(r.inputRequests ?? {}).length > 0, "input requests");
  return r.requestState;
}

// retry presents state with an accepted elicitation answer.
function retry(client, name, args, state, key, content) {
  return client.callTool(
    { name, arguments: args, requestState: state, inputResponses: { [key]: { action: "accept", content } } },
    { allowInputRequired: true },
  );
}

// refused asserts the JSON-RPC error -32602 the SDK answers for a state its verify hook refused.
async function refused(promise) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof ProtocolError, `got ${err}, want a ProtocolError`);
    assert.equal(err.code, -32602);
    assert.match(err.message, /Invalid or expired requestState/);
    return true;
  });
}

test("two rounds complete through the sealer", { skip }, async (t) => {
  const client = await connect(t, url, "", { auto: true, answers: { name: "Alice", color: "blue", units: "celsius" } });
  const r = await client.callTool({ name: "test_input_required_result_multi_round", arguments: {} });
  assert.equal(text(r), "Multi-round complete: Alice likes blue");
  const w = await client.callTool({ name: "get_weather", arguments: { location: "Paris" } });
  assert.equal(text(w), "Weather in Paris: 21 degrees CELSIUS");
});

test("a state replayed under another bearer token is refused", { skip }, async (t) => {
  const alice = await connect(t, url, "alice-token");
  const mallory = await connect(t, url, "mallory-token");
  const anonymous = await connect(t, url, "");
  const args = { location: "Paris" };
  const state = await firstRound(alice, "get_weather", args);
  await refused(retry(mallory, "get_weather", args, state, "units", { units: "celsius" }));
  await refused(retry(anonymous, "get_weather", args, state, "units", { units: "celsius" }));
  const own = await retry(alice, "get_weather", args, state, "units", { units: "celsius" });
  assert.equal(text(own), "Weather in Paris: 21 degrees CELSIUS");
});

test("a state presented with other arguments or another tool is refused", { skip }, async (t) => {
  const client = await connect(t, url, "alice-token");
  const state = await firstRound(client, "get_weather", { location: "Paris" });
  await refused(retry(client, "get_weather", { location: "Boston" }, state, "units", { units: "celsius" }));
  await refused(retry(client, "approve_payment", { amount: 1000 }, state, "approve", { ok: true }));
  const own = await retry(client, "get_weather", { location: "Paris" }, state, "units", { units: "celsius" });
  assert.equal(text(own), "Weather in Paris: 21 degrees CELSIUS");
});

// The example records the answer to a one-time state (the codec's
// default): presented again, the state gets the same answer, and the
// handler, which numbers its payments, does not pay again.
test("a one-time state pays once; presented again, it gets the same answer", { skip }, async (t) => {
  const client = await connect(t, url, "alice-token");
  const args = { amount: 42 };
  const state = await firstRound(client, "approve_payment", args);
  const paid = text(await retry(client, "approve_payment", args, state, "approve", { ok: true }));
  assert.match(paid, /^Paid 42\.00 \(payment \d+\)$/);
  assert.equal(text(await retry(client, "approve_payment", args, state, "approve", { ok: true })), paid);
  const other = await firstRound(client, "approve_payment", args);
  assert.notEqual(text(await retry(client, "approve_payment", args, other, "approve", { ok: true })), paid, "another payment, another number");
});

test("a round of a flow presented after a later round opened is refused", { skip }, async (t) => {
  const client = await connect(t, url, "alice-token");
  const name = "test_input_required_result_multi_round";
  const s1 = await firstRound(client, name, {});
  const s2 = (await retry(client, name, {}, s1, "step1", { name: "Alice" })).requestState;
  assert.ok(typeof s2 === "string" && s2 !== s1);
  const done = await retry(client, name, {}, s2, "step2", { color: "blue" });
  assert.equal(text(done), "Multi-round complete: Alice likes blue");
  await refused(retry(client, name, {}, s1, "step1", { name: "Alice" }));
});

test("an expired state is refused", { skip }, async (t) => {
  const client = await connect(t, shortURL, "alice-token");
  const args = { location: "Paris" };
  const state = await firstRound(client, "get_weather", args);
  await new Promise((r) => setTimeout(r, 1100));
  await refused(retry(client, "get_weather", args, state, "units", { units: "celsius" }));
});

test("a tampered state is refused", { skip }, async (t) => {
  const client = await connect(t, url, "alice-token");
  const args = { location: "Paris" };
  const state = await firstRound(client, "get_weather", args);
  await refused(retry(client, "get_weather", args, state + "-TAMPERED", "units", { units: "celsius" }));
});

// The official client sends no batches: this one is posted as raw JSON, as
// an attacker would, on the 2025-era path (no MCP-Protocol-Version). Two
// tools/call share an id: the first with the arguments the one-time state
// was sealed for, the second with other arguments and the state. Were the
// second bound to the first's arguments, it would pay 1000 and spend the
// state; it is refused, and the state still pays what it was issued for.
test("a JSON-RPC batch repeating an id cannot spend a state on other arguments", { skip }, async (t) => {
  const client = await connect(t, legacyURL, "");
  const state = await firstRound(client, "approve_payment", { amount: 1 });
  const call = (amount, extra) => ({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "approve_payment", arguments: { amount }, ...extra } });
  const res = await fetch(legacyURL, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify([call(1), call(1000, { requestState: state, inputResponses: { approve: { action: "accept", content: { ok: true } } } })]),
  });
  const answer = await res.text();
  assert.equal(res.status, 200, answer);
  assert.match(answer, /"id":7/, "the server served the batch");
  assert.doesNotMatch(answer, /Paid/);
  const paid = await retry(client, "approve_payment", { amount: 1 }, state, "approve", { ok: true });
  assert.match(text(paid), /^Paid 1\.00 \(payment \d+\)$/);
});
