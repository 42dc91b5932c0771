// Recorded outcomes in the client and the codec (README, "Recorded
// outcomes"): the bytes recorded and answered, IN_PROGRESS, and the codec
// through the official SDK, against fake sealers. The real sealer drives
// the same paths in e2e/typescript_outcomes_test.go.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { createServer as createHttp2Server } from "node:http2";
import { create, toJson } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ConnectError, Code } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { z } from "zod";
import { answersDigest, fromConnect, fromRest, grpcClient, parseReason, Reason, restClient, SealerError, toolCall } from "../dist/index.js";
import { answerOf, IN_PROGRESS_ERROR, logSealerError, MAX_OUTCOME, OUTCOME_CONFLICT_ERROR, outcomeOf, sealedRequestState } from "../dist/mcp.js";
import { OpenResponseSchema, OutcomeSchema, RecordResponseSchema, Sealer } from "../dist/gen/sealer/v1/sealer_pb.js";

const utf8 = (s) => new TextEncoder().encode(s);
const text = (b) => new TextDecoder().decode(b);
const at = new Date("2030-01-02T03:04:05.678Z");

test("the outcome is the JSON-RPC answer without jsonrpc and id, and answers under the retry's id as recorded", () => {
  const result = { content: [{ type: "text", text: "Paid 42.00 (payment 1)" }], isError: false };
  const error = { code: -32602, message: "Invalid or expired requestState", data: { reason: "invalid_request_state" } };
  for (const [name, sent, want] of [
    ["a result", { jsonrpc: "2.0", id: 5, result }, `{"result":${JSON.stringify(result)}}`],
    ["an error", { jsonrpc: "2.0", id: "a", error }, `{"error":${JSON.stringify(error)}}`],
  ]) {
    const outcome = outcomeOf(sent);
    assert.equal(text(outcome), want, name);
    // Replayed under another id, it is what the SDK would have written for it.
    for (const id of [9, "retry-1"]) assert.equal(answerOf(outcome, id), JSON.stringify({ ...sent, id }), `${name}, id ${id}`);
  }
  // Bytes another adapter recorded are answered as they are: numbers
  // JavaScript would round, spacing, escapes.
  const foreign = utf8(' {"result": {"amount": 12345678901234567890, "x": 1.0, "s": "\\u00e9"}}\n');
  assert.equal(answerOf(foreign, 3), '{"jsonrpc":"2.0","id":3,"result": {"amount": 12345678901234567890, "x": 1.0, "s": "\\u00e9"}}');
});

test("an outcome that is not one JSON-RPC answer is never answered", () => {
  for (const bad of [
    "",
    "not json",
    "[]",
    "null",
    '{"result":[]}',
    '{"result":1}',
    '{"result":{},"error":{"code":1,"message":"m"}}',
    '{"result":{},"id":1}',
    '{"error":{"message":"m"}}',
    '{"error":{"code":1.5,"message":"m"}}',
    '{"error":"boom"}',
    '{"jsonrpc":"2.0","result":{}}',
    '{}',
  ]) {
    assert.equal(answerOf(utf8(bad), 1), undefined, bad);
  }
  assert.equal(answerOf(Uint8Array.from([0x7b, 0xff, 0x7d]), 1), undefined, "invalid UTF-8");
});

test("IN_PROGRESS is the proto's reason 15: retryable, never a refusal, over gRPC (ABORTED) and REST (409)", () => {
  assert.equal(Reason.IN_PROGRESS, 15);
  assert.equal(parseReason("IN_PROGRESS"), Reason.IN_PROGRESS);
  const info = Uint8Array.from([0x0a, 11, ...Buffer.from("IN_PROGRESS"), 0x12, 10, ...Buffer.from("sealer.mcp")]);
  const overGrpc = fromConnect(new ConnectError("sealer: ledger: outcome not recorded yet", Code.Aborted, undefined, [{ type: "google.rpc.ErrorInfo", value: info }]));
  const overRest = fromRest(409, { code: 10, message: "sealer: ledger: outcome not recorded yet", details: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "IN_PROGRESS", domain: "sealer.mcp" }] });
  for (const e of [overGrpc, overRest]) {
    assert.equal(e.reasonName, "IN_PROGRESS");
    assert.ok(e.retryable && e.unavailable && !e.rejected && !e.misconfigured, e.why);
  }
});

// The reasons are the proto's enum, not a copy: every value of the enum
// Reason in proto/sealer/v1/sealer.proto has its name and number here, and
// nothing more.
test("the client's reasons are exactly the proto's enum Reason", () => {
  const proto = readFileSync(new URL("../../../proto/sealer/v1/sealer.proto", import.meta.url), "utf8");
  const enumBody = /enum Reason \{([\s\S]*?)\n\}/.exec(proto)[1];
  const values = [...enumBody.matchAll(/^\s*REASON_([A-Z_]+) = (\d+)(?: \[\(rule\) = \{([^}]*)\}\])?;/gm)];
  const want = Object.fromEntries(values.map((m) => [m[1], Number(m[2])]));
  const got = Object.fromEntries(Object.entries(Reason).filter(([k]) => Number.isNaN(Number(k))));
  assert.deepEqual(got, want);
  assert.equal(want.IN_PROGRESS, 15);
  // Whether each reason rejects the state or may pass is its rule there.
  for (const [, name, , rule = ""] of values) {
    const e = new SealerError(Reason[name], "x");
    assert.equal(e.rejected, rule.includes("rejects: true"), name);
    if (Reason[name] !== Reason.UNSPECIFIED) assert.equal(e.retryable, rule.includes("retryable: true"), name);
  }
});

test("the default onError says a retry came too early, without the state", (t) => {
  const lines = [];
  t.mock.method(console, "error", (...a) => lines.push(a.join(" ")));
  logSealerError(new SealerError(Reason.IN_PROGRESS, "sealer: ledger: outcome not recorded yet", 409), { op: "open", method: "tools/call" });
  logSealerError(new SealerError(Reason.LEDGER_UNAVAILABLE, "sealer: ledger unavailable", 503), { op: "record", method: "tools/call" });
  assert.match(lines[0], /requestState open failed on tools\/call: still in progress: IN_PROGRESS/);
  assert.match(lines[1], /requestState record failed on tools\/call: sealer unavailable: LEDGER_UNAVAILABLE/);
});

// fakeSealers serves open and record over gRPC and REST, keeps each request
// (REST: its JSON body as sent) and answers what answer(kind) returns.
async function fakeSealers(t, answer) {
  const seen = [];
  const rest = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const kind = req.url.slice("/v1/".length);
    seen.push({ kind, body: JSON.parse(Buffer.concat(chunks).toString("utf8")), timeout: req.headers["grpc-timeout"] });
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(toJson(kind === "open" ? OpenResponseSchema : RecordResponseSchema, answer(kind))));
  });
  const grpc = createHttp2Server(
    connectNodeAdapter({
      grpc: true,
      connect: false,
      grpcWeb: false,
      routes: (router) =>
        router.service(Sealer, {
          open: (req) => (seen.push({ kind: "open", msg: req }), answer("open")),
          record: (req) => (seen.push({ kind: "record", msg: req }), answer("record")),
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

test("open asks for recording and reads the outcome; record sends the answer, over gRPC and REST; REST sends the deadline", async (t) => {
  const outcome = utf8('{"result":{"content":[]}}');
  const { seen, clients } = await fakeSealers(t, (kind) =>
    kind === "open"
      ? create(OpenResponseSchema, { issuedAt: timestampFromDate(at), expiresAt: timestampFromDate(at), outcome: create(OutcomeSchema, { data: outcome, recordedAt: timestampFromDate(at) }) })
      : create(RecordResponseSchema, { keptUntil: timestampFromDate(at) }),
  );
  for (const [name, c] of Object.entries(clients)) {
    seen.length = 0;
    const opened = await c.open({ requestState: "R", principal: "alice", request: toolCall("pay", { amount: 1 }), recordOutcome: true });
    assert.deepEqual(opened.outcome, { data: outcome, recordedAt: at }, name);
    assert.equal(opened.recording, false, name);
    assert.equal(opened.payload.length, 0, name);
    const recorded = await c.record({ requestState: "R", outcome }, { timeoutMs: 1500 });
    assert.deepEqual(recorded, { keptUntil: at }, name);
    await c.open({ requestState: "R", principal: "alice", request: toolCall("pay", { amount: 1 }) });
    if (name === "REST") {
      const [open, record, plain] = seen.map((s) => s.body);
      assert.equal(open.recordOutcome, true);
      assert.deepEqual(record, { requestState: "R", outcome: Buffer.from(outcome).toString("base64") });
      assert.equal("recordOutcome" in plain, false, "unset unless asked");
      // The gateway gives the call the client's deadline: a retry waiting
      // for an outcome is told IN_PROGRESS before the client gives up.
      assert.deepEqual(seen.map((x) => x.timeout), ["10000m", "1500m", "10000m"]);
    } else {
      const [open, record, plain] = seen.map((s) => s.msg);
      assert.equal(open.recordOutcome, true);
      assert.deepEqual([record.requestState, text(record.outcome)], ["R", text(outcome)]);
      assert.equal(plain.recordOutcome, false);
    }
  }
});

// fake is a sealer whose open answers what open(req) returns (an Error is
// thrown) and whose record calls record(req) (default: kept).
function fake({ open, record = () => ({ keptUntil: at }) }) {
  const calls = [];
  let recorded;
  const recordedOnce = new Promise((r) => (recorded = r));
  return {
    calls,
    recordedOnce,
    open: async (req) => {
      calls.push({ kind: "open", req });
      const a = open(req);
      if (a instanceof Error) throw a;
      return a;
    },
    record: async (req) => {
      calls.push({ kind: "record", req });
      try {
        const a = record(req);
        if (a instanceof Error) throw a;
        return a;
      } finally {
        recorded(req);
      }
    },
    seal: async () => ({ requestState: "NEXT", expiresAt: at }),
    close: async () => {},
  };
}

const opened = (extra) => ({ payload: utf8("{}"), issuedAt: at, expiresAt: at, requestState: "S", recording: false, ...extra });

// serve is the official SDK's handler for a server with one tool, pay,
// behind states.fetch; ran counts the handler's runs. post sends one
// tools/call of pay on the 2026-07-28 wire with id and extra params.
function serve(states, { responseMode, errors = [], pad = 0, ask = false } = {}) {
  const ran = [];
  const mcp = createMcpHandler(
    () => {
      const s = new McpServer({ name: "t", version: "1" }, { requestState: { verify: states.verify } });
      s.server.onerror = (err) => errors.push(err.message);
      s.registerTool("pay", { inputSchema: z.object({ amount: z.number() }) }, async ({ amount }, ctx) => {
        ran.push(amount);
        if (ask) {
          const card = { method: "elicitation/create", params: { message: "card?", requestedSchema: { type: "object", properties: {} } } };
          return states.inputRequired({ inputRequests: { card }, payload: { step: 2 } }, ctx);
        }
        return { content: [{ type: "text", text: `Paid ${amount} (payment ${ran.length})${"x".repeat(pad)}` }] };
      });
      return s;
    },
    { legacy: "reject", ...(responseMode && { responseMode }) },
  );
  const handle = states.fetch(mcp.fetch);
  const post = async (id, extra = {}) => {
    const body = {
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: {
        _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": { elicitation: {} } },
        name: "pay",
        arguments: { amount: 42 },
        ...extra,
      },
    };
    const res = await handle(
      new Request("http://x/mcp", {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-protocol-version": "2026-07-28",
          "mcp-method": "tools/call",
          "mcp-name": "pay",
        },
        body: JSON.stringify(body),
      }),
    );
    return { status: res.status, type: res.headers.get("content-type"), text: await res.text() };
  };
  return { ran, post };
}

const retry = { requestState: "S", inputResponses: { approve: { action: "accept", content: { ok: true } } } };

// The JSON-RPC message of a body: JSON, or the data of an event.
function messageOf(body) {
  const line = body.split("\n").find((l) => l.startsWith("{") || l.startsWith("data: {"));
  return JSON.parse(line.replace(/^data: /, ""));
}

for (const responseMode of [undefined, "sse"]) {
  test(`through the SDK (${responseMode ?? "json"}): the answer sent is recorded, byte for byte, after the handler ran`, async () => {
    const sealer = fake({ open: () => opened({ recording: true }) });
    const states = sealedRequestState({ sealer, anonymous: true });
    const { ran, post } = serve(states, { responseMode });
    const got = await post(11, retry);
    assert.deepEqual(ran, [42]);
    assert.equal(got.status, 200);
    const sent = messageOf(got.text);
    assert.equal(sent.result.content[0].text, "Paid 42 (payment 1)");
    const rec = await sealer.recordedOnce;
    assert.equal(rec.requestState, "S");
    assert.equal(text(rec.outcome), JSON.stringify({ result: sent.result }));
    if (responseMode === "sse") assert.match(got.type, /text\/event-stream/);
    const [open] = sealer.calls;
    assert.equal(open.req.recordOutcome, true);
  });
}

test("through the SDK: a retry whose answer was recorded gets it under its own id, and the handler does not run", async () => {
  const recorded = utf8('{"result":{"content":[{"type":"text","text":"Paid 42 (payment 1)"}]}}');
  const errors = [];
  const sealer = fake({ open: () => opened({ payload: new Uint8Array(), outcome: { data: recorded, recordedAt: at } }) });
  const seen = [];
  const states = sealedRequestState({ sealer, anonymous: true, onError: (e, info) => seen.push([e, info]) });
  const { ran, post } = serve(states, { errors });
  const got = await post("retry-2", retry);
  assert.deepEqual(ran, [], "the handler ran");
  assert.equal(got.status, 200);
  assert.match(got.type, /application\/json/);
  assert.equal(got.text, '{"jsonrpc":"2.0","id":"retry-2","result":{"content":[{"type":"text","text":"Paid 42 (payment 1)"}]}}');
  assert.deepEqual(seen, [], "a replay is no failure");
  assert.equal(sealer.calls.filter((c) => c.kind === "record").length, 0, "a replay records nothing");
});

test("through the SDK: a retry while the handler still runs (IN_PROGRESS) gets -32603 in_progress, never -32602, and no handler run", async () => {
  const inProgress = new SealerError(Reason.IN_PROGRESS, "sealer: ledger: outcome not recorded yet", 409);
  const sealer = fake({ open: () => inProgress });
  const seen = [];
  const states = sealedRequestState({ sealer, anonymous: true, retry: { attempts: 2, backoffMs: 1 }, onError: (e, info) => seen.push([e, info]) });
  const { ran, post } = serve(states);
  const got = await post(12, retry);
  assert.deepEqual(ran, []);
  assert.equal(got.status, 200);
  assert.deepEqual(JSON.parse(got.text), { jsonrpc: "2.0", id: 12, error: { code: -32603, message: IN_PROGRESS_ERROR.message, data: { reason: "in_progress" } } });
  assert.equal(sealer.calls.filter((c) => c.kind === "open").length, 2, "tried again within the deadline, as other transient failures");
  assert.equal(seen.length, 1);
  assert.ok(seen[0][0] === inProgress);
  assert.deepEqual(seen[0][1], { op: "open", method: "tools/call" });
});

test("through the SDK: other refusals stay -32602, recorded or not", async () => {
  for (const reason of [Reason.ALREADY_CONSUMED, Reason.PRINCIPAL_MISMATCH, Reason.INPUT_MISMATCH, Reason.REQUEST_MISMATCH, Reason.EXPIRED]) {
    const sealer = fake({ open: () => new SealerError(reason, "sealer: refused") });
    const states = sealedRequestState({ sealer, anonymous: true, onError: () => {} });
    const { ran, post } = serve(states);
    const got = JSON.parse((await post(13, retry)).text);
    assert.equal(got.error.code, -32602, Reason[reason]);
    assert.equal(got.error.data.reason, "invalid_request_state");
    assert.ok(!JSON.stringify(got).includes("Paid"));
    assert.deepEqual(ran, []);
  }
});

test("through the SDK: an error answer is recorded as sent", async () => {
  // The state opens, recording, but its payload is not the codec's: the
  // SDK answers -32602, and that is the answer a retry gets.
  const sealer = fake({ open: () => opened({ recording: true, payload: utf8("not json") }) });
  const states = sealedRequestState({ sealer, anonymous: true, onError: () => {} });
  const { ran, post } = serve(states);
  const sent = JSON.parse((await post(14, retry)).text);
  assert.equal(sent.error.code, -32602);
  const rec = await sealer.recordedOnce;
  assert.equal(text(rec.outcome), JSON.stringify({ error: sent.error }));
  assert.deepEqual(ran, []);
});

test("through the SDK: a failed record goes to onError as op record and changes nothing of the answer", async () => {
  for (const failure of [new SealerError(Reason.LEDGER_UNAVAILABLE, "sealer: ledger unavailable", 503), new SealerError(Reason.INVALID_ARGUMENT, "sealer: outcome of 70000 bytes over this sealer's limit", 400)]) {
    const sealer = fake({ open: () => opened({ recording: true }), record: () => failure });
    let reported;
    const hook = new Promise((r) => (reported = r));
    const states = sealedRequestState({ sealer, anonymous: true, retry: { backoffMs: 1 }, onError: (e, info) => reported([e, info]) });
    const { ran, post } = serve(states);
    const got = messageOf((await post(15, retry)).text);
    assert.equal(got.result.content[0].text, "Paid 42 (payment 1)");
    const [err, info] = await hook;
    assert.ok(err === failure);
    assert.deepEqual(info, { op: "record", method: "tools/call" });
    assert.deepEqual(ran, [42]);
    assert.equal(sealer.calls.filter((c) => c.kind === "record").length, failure.retryable ? 3 : 1);
  }
});

test("through the SDK: recordOutcomes false opens without recording and records nothing", async () => {
  const sealer = fake({ open: () => opened() });
  const states = sealedRequestState({ sealer, anonymous: true, recordOutcomes: false });
  const { ran, post } = serve(states);
  await post(16, retry);
  assert.deepEqual(ran, [42]);
  assert.deepEqual(sealer.calls.map((c) => c.kind), ["open"]);
  assert.equal(sealer.calls[0].req.recordOutcome, undefined);
});

test("through the SDK: a first round (no state) opens nothing and records nothing", async () => {
  const sealer = fake({ open: () => new Error("must not be called") });
  const states = sealedRequestState({ sealer, anonymous: true });
  const { ran, post } = serve(states);
  await post(17);
  assert.deepEqual(ran, [42]);
  assert.deepEqual(sealer.calls, []);
});

// With responseMode "sse" the SDK sends the event stream before the
// handler, so before verify has its answer from the sealer: states.fetch
// decides when the answer passes, not when the stream starts.
test("through the SDK (sse): an open answered after the stream went out is recorded, replayed, or in_progress", async () => {
  const later = (sealer) => ({ ...sealer, open: async (req) => (await new Promise((r) => setTimeout(r, 20)), sealer.open(req)) });
  const recording = fake({ open: () => opened({ recording: true }) });
  const first = serve(sealedRequestState({ sealer: later(recording), anonymous: true }), { responseMode: "sse" });
  const sent = messageOf((await first.post(21, retry)).text);
  assert.equal(sent.result.content[0].text, "Paid 42 (payment 1)");
  assert.equal(text((await recording.recordedOnce).outcome), JSON.stringify({ result: sent.result }));

  const recorded = utf8('{"result":{"content":[{"type":"text","text":"Paid 42 (payment 1)"}]}}');
  const again = serve(sealedRequestState({ sealer: later(fake({ open: () => opened({ payload: new Uint8Array(), outcome: { data: recorded, recordedAt: at } }) })), anonymous: true }), { responseMode: "sse" });
  const replayed = await again.post("retry-3", retry);
  assert.match(replayed.type, /text\/event-stream/);
  assert.deepEqual(messageOf(replayed.text), { jsonrpc: "2.0", id: "retry-3", result: { content: [{ type: "text", text: "Paid 42 (payment 1)" }] } });
  assert.deepEqual(again.ran, []);

  const early = fake({ open: () => new SealerError(Reason.IN_PROGRESS, "sealer: ledger: outcome not recorded yet", 409) });
  const waiting = serve(sealedRequestState({ sealer: later(early), anonymous: true, retry: { attempts: 1 }, onError: () => {} }), { responseMode: "sse" });
  assert.deepEqual(messageOf((await waiting.post(22, retry)).text), { jsonrpc: "2.0", id: 22, error: IN_PROGRESS_ERROR });
  assert.deepEqual(waiting.ran, []);
});

test("answerThrough: events before the answer pass as each is complete, the answer is replaced in place, the rest passes", async () => {
  const { answerThrough } = await import("../dist/outcomes.js");
  const note = 'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1,"note":"é"}}\n\n';
  const answer = 'event: message\nid: 7\ndata: {"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"Invalid or expired requestState"}}\n\n';
  const after = ": keep-alive\n\n";
  const bytes = utf8(note + answer + after);
  // Cut inside the é of the first event and inside the answer's data.
  const cuts = [bytes.indexOf(0xc3) + 1, note.length + 40, bytes.length - 3];
  const chunks = [0, ...cuts].map((c, i, all) => bytes.slice(c, all[i + 1]));
  const seen = [];
  const res = await answerThrough(
    new Response(new ReadableStream({ pull: (c) => (chunks.length ? c.enqueue(chunks.shift()) : c.close()) }), { headers: { "content-type": "text/event-stream" } }),
    5,
    (outcome) => (seen.push(text(outcome)), '{"jsonrpc":"2.0","id":5,\n"result":{}}'),
  );
  assert.equal(await res.text(), note + 'event: message\nid: 7\ndata: {"jsonrpc":"2.0","id":5,\ndata: "result":{}}\n\n' + after);
  assert.deepEqual(seen, ['{"error":{"code":-32602,"message":"Invalid or expired requestState"}}']);
});

test("through the SDK: an answer over what any sealer keeps goes out, and is recorded as none", async () => {
  const sealer = fake({ open: () => opened({ recording: true }) });
  const seen = [];
  const states = sealedRequestState({ sealer, anonymous: true, onError: (e, info) => seen.push([e, info]) });
  const { ran, post } = serve(states, { pad: MAX_OUTCOME });
  const got = await post(15, retry);
  assert.deepEqual(ran, [42]);
  assert.ok(messageOf(got.text).result.content[0].text.length > MAX_OUTCOME, "the answer went out whole");
  const rec = await sealer.recordedOnce;
  assert.equal(rec.outcome.length, 0, "recorded as none");
  // Poll for the report (it follows the record), bounded generously.
  for (const end = Date.now() + 120_000; seen.length === 0 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 10));
  assert.equal(seen.length, 1);
  assert.equal(seen[0][0].reason, Reason.INVALID_ARGUMENT);
  assert.deepEqual(seen[0][1], { op: "record", method: "tools/call" });
});

test("through the SDK: a next round the sealer could not seal goes out as the sealer's failure, and is recorded as none", async () => {
  const sealer = fake({ open: () => opened({ recording: true }) });
  sealer.seal = async () => {
    throw new SealerError(Reason.LEDGER_UNAVAILABLE, "sealer: ledger unavailable", 503);
  };
  const states = sealedRequestState({ sealer, anonymous: true, retry: { attempts: 1 }, onError: () => {} });
  const { ran, post } = serve(states, { ask: true });
  const got = await post(16, retry);
  assert.deepEqual(ran, [42]);
  assert.match(messageOf(got.text).result.content[0].text, /sealer unavailable/);
  assert.doesNotMatch(got.text, /"requestState":/);
  const rec = await sealer.recordedOnce;
  assert.equal(rec.outcome.length, 0, "recorded as none: the retry is refused, and the client starts over");
});

// Answers: a retry with other inputResponses (issue 50, 5b).

test("OUTCOME_CONFLICT is the proto's reason 16: a refusal, never retried, over gRPC (ALREADY_EXISTS) and REST (409)", () => {
  assert.equal(Reason.OUTCOME_CONFLICT, 16);
  assert.equal(parseReason("OUTCOME_CONFLICT"), Reason.OUTCOME_CONFLICT);
  const info = Uint8Array.from([0x0a, 16, ...Buffer.from("OUTCOME_CONFLICT"), 0x12, 10, ...Buffer.from("sealer.mcp")]);
  const overGrpc = fromConnect(new ConnectError("sealer: ledger: answered otherwise", Code.AlreadyExists, undefined, [{ type: "google.rpc.ErrorInfo", value: info }]));
  const overRest = fromRest(409, { code: 6, message: "sealer: ledger: answered otherwise", details: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "OUTCOME_CONFLICT", domain: "sealer.mcp" }] });
  for (const e of [overGrpc, overRest]) {
    assert.equal(e.reasonName, "OUTCOME_CONFLICT");
    assert.ok(e.rejected && !e.retryable && !e.unavailable && !e.misconfigured, e.why);
  }
});

test("open sends the answers digest, 32 bytes or none, over gRPC and REST", async (t) => {
  const { seen, clients } = await fakeSealers(t, (kind) =>
    kind === "open" ? create(OpenResponseSchema, { issuedAt: timestampFromDate(at), expiresAt: timestampFromDate(at), recording: true }) : create(RecordResponseSchema, { keptUntil: timestampFromDate(at) }),
  );
  const answers = answersDigest({ approve: { action: "accept", content: { ok: true } } });
  for (const [name, c] of Object.entries(clients)) {
    seen.length = 0;
    const req = { requestState: "R", principal: "alice", request: toolCall("pay", { amount: 1 }), recordOutcome: true };
    await c.open({ ...req, answers });
    await c.open(req);
    for (const bad of [new Uint8Array(0), new Uint8Array(31), Buffer.from(answers).toString("hex")]) {
      await assert.rejects(c.open({ ...req, answers: bad }), (e) => e instanceof SealerError && e.reason === Reason.INVALID_ARGUMENT && /32-byte/.test(e.message), name);
    }
    assert.equal(seen.length, 2, `${name}: an open with a malformed digest was sent`);
    if (name === "REST") {
      assert.equal(seen[0].body.answers, Buffer.from(answers).toString("base64"));
      assert.equal("answers" in seen[1].body, false, "none unless given");
    } else {
      assert.deepEqual([...seen[0].msg.answers], [...answers]);
      assert.equal(seen[1].msg.answers.length, 0);
    }
  }
});

test("through the SDK: every recording open sends the answers digest of the inputResponses as received", async () => {
  const sealer = fake({ open: () => opened({ recording: true }) });
  const { post } = serve(sealedRequestState({ sealer, anonymous: true }));
  const traced = { requestState: "S", inputResponses: { approve: { ...retry.inputResponses.approve, _meta: { "io.example/trace": "t-2" } } } };
  await post(21, retry);
  await post(22, traced);
  await post(23, { requestState: "S" });
  const opens = sealer.calls.filter((c) => c.kind === "open").map((c) => c.req);
  assert.deepEqual(opens.map((o) => Buffer.from(o.answers).toString("hex")), [retry.inputResponses, retry.inputResponses, undefined].map((r) => Buffer.from(answersDigest(r)).toString("hex")));
  // Switched off, no outcome is asked for, and no answers are sent.
  const off = fake({ open: () => opened() });
  await serve(sealedRequestState({ sealer: off, anonymous: true, recordOutcomes: false })).post(24, retry);
  assert.equal(off.calls[0].req.answers, undefined);
  assert.equal(off.calls[0].req.recordOutcome, undefined);
});

for (const responseMode of [undefined, "sse"]) {
  test(`through the SDK (${responseMode ?? "json"}): OUTCOME_CONFLICT is -32602 outcome_conflict, never retried, the handler not run`, async () => {
    const conflict = new SealerError(Reason.OUTCOME_CONFLICT, "sealer: ledger: answered otherwise", 409);
    const sealer = fake({ open: () => conflict });
    const seen = [];
    const states = sealedRequestState({ sealer, anonymous: true, onError: (e, info) => seen.push([e, info]) });
    const { ran, post } = serve(states, { responseMode });
    const got = await post(14, retry);
    assert.deepEqual(ran, []);
    assert.deepEqual(messageOf(got.text), { jsonrpc: "2.0", id: 14, error: { code: -32602, message: "invalid requestState: answered before for other inputResponses", data: { reason: "outcome_conflict" } } });
    assert.deepEqual(OUTCOME_CONFLICT_ERROR, { code: -32602, message: "invalid requestState: answered before for other inputResponses", data: { reason: "outcome_conflict" } });
    assert.equal(sealer.calls.length, 1, "tried once, recorded nothing");
    assert.ok(seen.length === 1 && seen[0][0] === conflict);
  });
}

test("through the SDK: inputResponses the answers digest refuses are -32602 before the sealer is asked", async () => {
  const sealer = fake({ open: () => opened({ recording: true }) });
  const seen = [];
  const { ran, post } = serve(sealedRequestState({ sealer, anonymous: true, onError: (e, info) => seen.push([e, info]) }));
  const lone = { requestState: "S", inputResponses: { approve: { action: "accept", content: { note: "\ud800" } } } };
  // JSON.stringify sends it as the escape \ud800, which JSON.parse reads back lone.
  const got = JSON.parse((await post(15, lone)).text);
  assert.equal(got.error?.code, -32602, JSON.stringify(got));
  assert.deepEqual(ran, []);
  assert.equal(sealer.calls.length, 0);
  assert.equal(seen[0]?.[0].reason, Reason.INVALID_ARGUMENT);
});

test("the default onError names the conflict, without the state", (t) => {
  const lines = [];
  t.mock.method(console, "error", (...a) => lines.push(a.join(" ")));
  logSealerError(new SealerError(Reason.OUTCOME_CONFLICT, "sealer: ledger: answered otherwise", 409), { op: "open", method: "tools/call" });
  assert.match(lines[0], /requestState open failed on tools\/call: answered before for other inputResponses: OUTCOME_CONFLICT/);
});
