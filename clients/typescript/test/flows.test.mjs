// Flows in the client and the codec, against fake sealers: what goes on the
// wire (gRPC and REST), what comes back, and the codec's rounds. The real
// sealer drives the same paths in integration/ and e2e (typescript_flows_test.go).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { createServer as createHttp2Server } from "node:http2";
import { create, toJson } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { flowAfter, grpcClient, inputKeys, Reason, rejected, restClient, SealerError, toolCall } from "../dist/index.js";
import { sealedRequestState } from "../dist/mcp.js";
import { FlowSchema, OpenResponseSchema, Sealer, SealResponseSchema } from "../dist/gen/sealer/v1/sealer_pb.js";

const deadline = new Date("2030-01-02T03:04:05.678Z");
const flow = (round, latestOnly = true) => create(FlowSchema, { id: new Uint8Array(16).fill(7), round, deadline: timestampFromDate(deadline), latestOnly });
const sealResponse = (f) => create(SealResponseSchema, { requestState: "S", expiresAt: timestampFromDate(deadline), ...(f && { flow: f }) });
const openResponse = (f) => create(OpenResponseSchema, { payload: new TextEncoder().encode("{}"), issuedAt: timestampFromDate(deadline), expiresAt: timestampFromDate(deadline), ...(f && { flow: f }) });

// fakeSealers serves the sealer's API over gRPC and REST, records each
// request (REST: its JSON body as sent; gRPC: the message) and answers
// with what answer(kind) returns.
async function fakeSealers(t, answer) {
  const seen = [];
  const rest = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const kind = req.url === "/v1/seal" ? "seal" : "open";
    seen.push({ kind, body });
    const a = answer(kind);
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(toJson(kind === "seal" ? SealResponseSchema : OpenResponseSchema, a)));
  });
  const grpc = createHttp2Server(
    connectNodeAdapter({
      grpc: true,
      connect: false,
      grpcWeb: false,
      routes: (router) =>
        router.service(Sealer, {
          seal: (req) => (seen.push({ kind: "seal", msg: req }), answer("seal")),
          open: (req) => (seen.push({ kind: "open", msg: req }), answer("open")),
        }),
    }),
  );
  await Promise.all([rest, grpc].map((s) => new Promise((r) => s.listen(0, "127.0.0.1", r))));
  const clients = {
    REST: restClient({ url: `http://127.0.0.1:${rest.address().port}` }),
    gRPC: grpcClient({ url: `http://127.0.0.1:${grpc.address().port}` }),
  };
  t.after(async () => {
    await Promise.all(Object.values(clients).map((c) => c.close()));
    rest.close();
    grpc.close();
  });
  return { seen, clients };
}

test("seal and open carry the flow and the input keys, with the REST contract's JSON names", async (t) => {
  const { seen, clients } = await fakeSealers(t, (kind) => (kind === "seal" ? sealResponse(flow(2)) : openResponse(flow(1))));
  for (const [name, c] of Object.entries(clients)) {
    seen.length = 0;
    const opened = await c.open({ requestState: "R1", principal: "alice", request: toolCall("t", {}), responded: ["card"] });
    assert.equal(opened.requestState, "R1", name);
    assert.deepEqual({ ...opened.flow, id: [...opened.flow.id] }, { id: Array(16).fill(7), round: 1, deadline, latestOnly: true }, name);
    const sealed = await c.seal({ principal: "alice", request: toolCall("t", {}), flow: flowAfter(opened, { latestOnly: true, asked: ["code", "Code"] }) });
    assert.equal(sealed.flow.round, 2, name);
    // No keys asked, and none answered: both present and empty.
    await c.seal({ principal: "alice", request: toolCall("t", {}), flow: { asked: [] } });
    await c.open({ requestState: "R1", principal: "alice", request: toolCall("t", {}), responded: [] });
    // Unset: no flow, keys not known.
    await c.open({ requestState: "R1", principal: "alice", request: toolCall("t", {}) });
    if (name === "REST") {
      const [open, seal, seal0, open0, openUnknown] = seen.map((s) => s.body);
      assert.deepEqual(open.responded, { keys: ["card"] });
      assert.deepEqual(seal.flow, { continues: "R1", latestOnly: true, asked: { keys: ["code", "Code"] } });
      assert.deepEqual(seal0.flow, { asked: {} });
      assert.deepEqual(open0.responded, {});
      assert.equal("responded" in openUnknown, false);
    } else {
      const [open, seal, seal0, open0, openUnknown] = seen.map((s) => s.msg);
      assert.deepEqual(open.responded.keys, ["card"]);
      assert.equal(seal.flow.continues, "R1");
      assert.equal(seal.flow.latestOnly, true);
      assert.deepEqual(seal.flow.asked.keys, ["code", "Code"]);
      assert.ok(seal0.flow.asked !== undefined && seal0.flow.asked.keys.length === 0 && seal0.flow.continues === "");
      assert.ok(open0.responded !== undefined && open0.responded.keys.length === 0);
      assert.equal(openUnknown.responded, undefined);
    }
  }
});

test("a seal that asked for a flow fails closed when the sealer answers without one", async (t) => {
  let reply = sealResponse(undefined);
  const { clients } = await fakeSealers(t, (kind) => (kind === "seal" ? reply : openResponse(undefined)));
  for (const [name, c] of Object.entries(clients)) {
    reply = sealResponse(undefined);
    await assert.rejects(c.seal({ principal: "a", request: toolCall("t"), flow: {} }), (e) => e instanceof SealerError && /sealed no flow/.test(e.message) && !e.rejected, name);
    const plain = await c.seal({ principal: "a", request: toolCall("t") });
    assert.equal(plain.flow, undefined, name);
    // A flow that is not one: the reply is not the sealer's.
    reply = sealResponse(create(FlowSchema, { id: new Uint8Array(15), round: 1, deadline: timestampFromDate(deadline) }));
    await assert.rejects(c.seal({ principal: "a", request: toolCall("t"), flow: {} }), /malformed flow/, name);
    reply = sealResponse(create(FlowSchema, { id: new Uint8Array(16), round: 0, deadline: timestampFromDate(deadline) }));
    await assert.rejects(c.seal({ principal: "a", request: toolCall("t"), flow: {} }), /malformed flow/, name);
    // The deadline to the millisecond the states carry (truncated), however precise the answer.
    reply = sealResponse(create(FlowSchema, { id: new Uint8Array(16), round: 1, deadline: { seconds: 1_900_000_000n, nanos: 999_999_999 } }));
    assert.equal((await c.seal({ principal: "a", request: toolCall("t"), flow: {} })).flow.deadline.getTime(), 1_900_000_000_999, name);
    // An open without a flow is a state sealed without one.
    const o = await c.open({ requestState: "X", principal: "a", request: toolCall("t") });
    assert.equal(o.flow, undefined, name);
    assert.deepEqual(flowAfter(o, { latestOnly: true }), { latestOnly: true, continues: "" });
  }
});

test("input keys that are not valid Unicode are refused before any call", async (t) => {
  const { seen, clients } = await fakeSealers(t, () => sealResponse(flow(1)));
  for (const c of Object.values(clients)) {
    await assert.rejects(c.seal({ principal: "a", request: toolCall("t"), flow: { asked: ["\ud800"] } }), (e) => e.reason === Reason.INVALID_ARGUMENT);
    await assert.rejects(c.open({ requestState: "S", principal: "a", request: toolCall("t"), responded: ["ok", "\udc00x"] }), (e) => e.reason === Reason.INVALID_ARGUMENT);
  }
  assert.equal(seen.length, 0);
});

test("the flows' reasons refuse the state", () => {
  for (const r of ["INPUT_MISMATCH", "FLOW_EXPIRED", "FLOW_EXHAUSTED", "ALREADY_CONSUMED"]) {
    const e = new SealerError(Reason[r], "sealer: x");
    assert.ok(e.rejected && rejected(e) && !e.retryable, r);
  }
});

test("inputKeys: the member names, [] for none, undefined for what has no names", () => {
  assert.deepEqual(inputKeys({ b: 1, a: { x: 1 }, __proto__x: 2 }), ["b", "a", "__proto__x"]);
  assert.deepEqual(inputKeys(JSON.parse('{"__proto__": 1}')), ["__proto__"]);
  assert.deepEqual(inputKeys(undefined), []);
  assert.deepEqual(inputKeys({}), []);
  for (const v of [null, [], ["a"], "a", 1]) assert.equal(inputKeys(v), undefined, JSON.stringify(v));
});

// The codec's rounds, with a fake sealer that records what it is asked and
// answers each open with the flow of the state (states "R<n>" are round n).
function roundSealer({ flows = true } = {}) {
  const calls = [];
  let n = 0;
  return {
    calls,
    async seal(r) {
      calls.push({ kind: "seal", req: r });
      const round = r.flow?.continues ? Number(r.flow.continues.slice(1)) + 1 : 1;
      n++;
      return { requestState: `R${round}`, expiresAt: deadline, ...(r.flow && { flow: { id: new Uint8Array(16), round, deadline, latestOnly: !!r.flow.latestOnly } }) };
    },
    async open(r) {
      calls.push({ kind: "open", req: r });
      const round = Number(r.requestState.slice(1));
      return { payload: new TextEncoder().encode(JSON.stringify({ round })), issuedAt: deadline, expiresAt: deadline, requestState: r.requestState, ...(flows && { flow: { id: new Uint8Array(16), round, deadline, latestOnly: true } }) };
    },
    async close() {},
  };
}

const ctx = (id, req) => ({ mcpReq: { id, method: "tools/call" }, http: { req } });
const asks = { card: { method: "elicitation/create", params: { message: "card?", requestedSchema: { type: "object", properties: {} } } } };

// inRequest runs f as the SDK would run a handler for message, inside
// states.fetch; f gets the handler's context.
async function inRequest(states, message, f) {
  let result;
  await states.fetch(async (req) => ((result = await f(ctx(message.id, req))), new Response("{}")))(
    new Request("http://x/mcp", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(message) }),
  );
  return result;
}
const call = (id, extra = {}) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "trip", arguments: { who: "a" }, ...extra } });

test("codec: round 1 starts a latest-only flow asking the inputRequests' keys; a retry's next round continues the state it opened", async () => {
  const sealer = roundSealer();
  const states = sealedRequestState({ sealer, anonymous: true });
  const r1 = await inRequest(states, call(1), (c) => states.inputRequired({ inputRequests: asks, payload: { step: 1 } }, c));
  assert.deepEqual(r1, { resultType: "input_required", inputRequests: asks, requestState: "R1" });
  const retry = call(2, { requestState: "R1", inputResponses: { card: { action: "accept", content: {} } } });
  const r2 = await inRequest(states, retry, async (c) => {
    const payload = await states.verify("R1", c);
    assert.deepEqual(payload, { round: 1 });
    assert.equal(states.flowOf(c).round, 1);
    return states.inputRequired({ inputRequests: { code: asks.card, Code: asks.card }, payload: { step: 2 } }, c);
  });
  assert.equal(r2.requestState, "R2");
  const [seal1, open1, seal2] = sealer.calls;
  assert.deepEqual(seal1.req.flow, { continues: "", latestOnly: true, asked: ["card"] });
  assert.deepEqual(open1.req.responded, ["card"]);
  assert.deepEqual(seal2.req.flow, { continues: "R1", latestOnly: true, asked: ["code", "Code"] });
  // Another request, with no state: a new flow, not a continuation of R1.
  await inRequest(states, call(3), (c) => states.mint({}, c));
  assert.deepEqual(sealer.calls.at(-1).req.flow, { continues: "", latestOnly: true });
  assert.equal(states.flowOf(ctx(3, new Request("http://x/"))), undefined);
});

test("codec: the responded keys are the request's inputResponses as received, known or not", async () => {
  const cases = [
    [{ requestState: "R1" }, []],
    [{ requestState: "R1", inputResponses: {} }, []],
    [{ requestState: "R1", inputResponses: { Card: {}, card: 12345, "": null } }, ["Card", "card", ""]],
    [{ requestState: "R1", inputResponses: null }, undefined],
    [{ requestState: "R1", inputResponses: [{ card: {} }] }, undefined],
    [{ requestState: "R1", inputResponses: "card" }, undefined],
  ];
  for (const recordOutcomes of [false, true]) {
    const sealer = roundSealer();
    const states = sealedRequestState({ sealer, principal: () => "p", recordOutcomes, onError: () => {} });
    for (const [extra, want] of cases) {
      const opens = sealer.calls.length;
      // Recording, inputResponses that are no object have no answers
      // digest: refused before the sealer is asked, never opened without.
      if (recordOutcomes && want === undefined && extra.inputResponses !== null) {
        await assert.rejects(inRequest(states, call(1, extra), (c) => states.verify("R1", c)), (e) => e.reason === Reason.INVALID_ARGUMENT, JSON.stringify(extra));
        assert.equal(sealer.calls.length, opens, JSON.stringify(extra));
        continue;
      }
      await inRequest(states, call(1, extra), (c) => states.verify("R1", c));
      const open = sealer.calls.at(-1).req;
      assert.deepEqual(open.responded, want, JSON.stringify(extra));
      assert.equal("responded" in open, want !== undefined, JSON.stringify(extra));
    }
  }
});

test("codec: latestOnly and flows can be turned off; a state opened without a flow starts a new one", async () => {
  let sealer = roundSealer();
  let states = sealedRequestState({ sealer, principal: () => "p", latestOnly: false });
  await inRequest(states, call(1), (c) => states.inputRequired({ inputRequests: asks, payload: 1 }, c));
  assert.deepEqual(sealer.calls[0].req.flow, { continues: "", latestOnly: false, asked: ["card"] });

  sealer = roundSealer();
  states = sealedRequestState({ sealer, principal: () => "p", flows: false });
  await inRequest(states, call(1, { requestState: "R1", inputResponses: { card: {} } }), async (c) => {
    await states.verify("R1", c);
    return states.inputRequired({ inputRequests: asks, payload: 1 }, c);
  });
  assert.equal(sealer.calls[1].req.flow, undefined);
  assert.deepEqual(sealer.calls[0].req.responded, ["card"], "the keys go to the sealer with flows off too");

  sealer = roundSealer({ flows: false });
  states = sealedRequestState({ sealer, principal: () => "p" });
  await inRequest(states, call(1, { requestState: "R1", inputResponses: { card: {} } }), async (c) => {
    await states.verify("R1", c);
    return states.mint(1, c, { asked: ["x"] });
  });
  assert.deepEqual(sealer.calls[1].req.flow, { continues: "", latestOnly: true, asked: ["x"] });
});

test("codec: a refused open is never continued, and a failed seal surfaces", async () => {
  const sealer = roundSealer();
  sealer.open = async (r) => (sealer.calls.push({ kind: "open", req: r }), Promise.reject(new SealerError(Reason.INPUT_MISMATCH, "sealer: input keys mismatch")));
  const states = sealedRequestState({ sealer, principal: () => "p", retry: { backoffMs: 1 } });
  const retry = call(1, { requestState: "R1", inputResponses: { card: {}, extra: {} } });
  await inRequest(states, retry, async (c) => {
    await assert.rejects(states.verify("R1", c), (e) => e.rejected && e.reasonName === "INPUT_MISMATCH");
    assert.equal(states.flowOf(c), undefined);
    await states.mint(1, c);
  });
  assert.equal(sealer.calls.filter((c) => c.kind === "open").length, 1, "a refusal is not tried again");
  assert.deepEqual(sealer.calls.at(-1).req.flow, { continues: "", latestOnly: true });

  sealer.seal = async () => Promise.reject(new SealerError(Reason.FLOW_EXHAUSTED, "sealer: flow exhausted"));
  await assert.rejects(inRequest(states, call(2), (c) => states.inputRequired({ inputRequests: asks, payload: 1 }, c)), (e) => e.rejected && e.reasonName === "FLOW_EXHAUSTED");
  await assert.rejects(inRequest(states, call(3), (c) => states.mint(1, c, { asked: "card" })), TypeError);
});
