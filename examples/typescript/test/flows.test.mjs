// Flows end to end, with the official TypeScript MCP client
// (@modelcontextprotocol/client) against the TypeScript example server
// (server.ts), whose states are rounds of latest-only flows asking the keys
// of their inputRequests. e2e/typescript_flows_test.go starts a sealer and
// the example (SEALER_TEST_MCP_URL), the example with flows off on the same
// sealer (SEALER_TEST_MCP_URL_NO_FLOWS: the control, where every attack goes
// through), and another pair whose sealer ends flows after 4 s and 2
// rounds, sealing over REST (SEALER_TEST_MCP_URL_FLOW_LIMITS). The
// example records the answer to each latest-only round (the codec's
// default): a round presented again while it is the latest gets the answer
// it got the first time, the handler not run again. Every refusal is a -32602 whose cause
// the client cannot see: the test counts the ones it expects per reason
// into SEALER_TEST_REFUSALS (a JSON file), and the Go test holds the
// sealer's log to them.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { Client, ProtocolError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const url = process.env.SEALER_TEST_MCP_URL;
const plainURL = process.env.SEALER_TEST_MCP_URL_NO_FLOWS;
const limitsURL = process.env.SEALER_TEST_MCP_URL_FLOW_LIMITS;
const tallyFile = process.env.SEALER_TEST_REFUSALS;
const skip = url && plainURL && limitsURL && tallyFile ? false : "no example server: e2e/typescript_flows_test.go starts one";
if (skip && process.env.CI) {
  throw new Error("SEALER_TEST_MCP_URL, SEALER_TEST_MCP_URL_NO_FLOWS, SEALER_TEST_MCP_URL_FLOW_LIMITS and SEALER_TEST_REFUSALS are unset: run through e2e/typescript_flows_test.go");
}

// The refusals expected of the sealer behind url, by reason.
const expected = { ALREADY_CONSUMED: 0, INPUT_MISMATCH: 0 };
after(() => tallyFile && writeFileSync(tallyFile, JSON.stringify(expected)));

async function connect(t, base, { auto = false, answers = {} } = {}) {
  const client = new Client(
    { name: "sealer-e2e-ts-flows", version: "1.0.0" },
    { capabilities: { elicitation: {} }, versionNegotiation: { mode: { pin: "2026-07-28" } }, inputRequired: { autoFulfill: auto } },
  );
  client.setRequestHandler("elicitation/create", async (req) => {
    const content = {};
    for (const field of Object.keys(req.params.requestedSchema?.properties ?? {})) content[field] = answers[field];
    return { action: "accept", content };
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(base), { requestInit: { headers: { Authorization: "Bearer alice-token" } } }));
  t.after(() => client.close());
  return client;
}

const text = (r) => (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join(" ");
const accept = (content) => ({ action: "accept", content });
const args = { traveler: "alice" };
// The answers to each round of plan_trip, keyed as the round asks.
const answers = [
  { destination: accept({ city: "Lisbon" }) },
  { dates: accept({ from: "2026-12-24" }), nights: accept({ nights: "3" }) },
  { confirm: accept({ ok: true }) },
];

// call sends one round of plan_trip: the state of the round before (none
// for round 1) and inputResponses.
function call(client, state, inputResponses) {
  return client.callTool(
    { name: "plan_trip", arguments: args, ...(state !== undefined && { requestState: state, inputResponses }) },
    { allowInputRequired: true },
  );
}

// asks returns the state of an input_required result asking exactly keys.
function asks(r, ...keys) {
  assert.equal(r.resultType, "input_required", JSON.stringify(r));
  assert.deepEqual(Object.keys(r.inputRequests ?? {}).sort(), keys.sort());
  assert.ok(typeof r.requestState === "string" && r.requestState.length > 0);
  return r.requestState;
}

// refused asserts the -32602 the SDK answers for a state the codec refused,
// and counts it under the sealer's reason (for the sealer behind url).
async function refused(promise, reason) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof ProtocolError, `got ${err}, want a ProtocolError`);
    assert.equal(err.code, -32602);
    assert.match(err.message, /Invalid or expired requestState/);
    return true;
  });
  if (reason) expected[reason]++;
}

// rounds walks plan_trip to the state of round n (1 to 3).
async function rounds(client, n) {
  let state = asks(await call(client), "destination");
  if (n >= 2) state = asks(await call(client, state, answers[0]), "dates", "nights");
  if (n >= 3) state = asks(await call(client, state, answers[1]), "confirm");
  return state;
}

test("three rounds of input complete, each state the next round of one flow", { skip }, async (t) => {
  const auto = await connect(t, url, { auto: true, answers: { city: "Lisbon", from: "2026-12-24", nights: "3", ok: true } });
  const r = await auto.callTool({ name: "plan_trip", arguments: args });
  assert.equal(text(r), "Trip for alice: Lisbon from 2026-12-24, 3 nights (round 3 of one flow)");

  const client = await connect(t, url);
  const s1 = await rounds(client, 1);
  const s2 = asks(await call(client, s1, answers[0]), "dates", "nights");
  const s3 = asks(await call(client, s2, answers[1]), "confirm");
  assert.equal(new Set([s1, s2, s3]).size, 3, "a new state in each round");
  assert.equal(text(await call(client, s3, answers[2])), "Trip for alice: Lisbon from 2026-12-24, 3 nights (round 3 of one flow)");
});

test("rewind: no earlier round opens after a later one did; the latest round again gets its answer again", { skip }, async (t) => {
  const client = await connect(t, url);
  const s1 = await rounds(client, 1);
  const s2 = asks(await call(client, s1, answers[0]), "dates", "nights");
  const s3 = asks(await call(client, s2, answers[1]), "confirm"); // round 2 opened
  await refused(call(client, s1, answers[0]), "ALREADY_CONSUMED");
  // Round 2 again: its recorded answer, the same round 3 state, no fork.
  assert.equal(asks(await call(client, s2, answers[1]), "confirm"), s3);
  const trip = text(await call(client, s3, answers[2]));
  assert.match(trip, /^Trip for alice/);
  assert.equal(text(await call(client, s3, answers[2])), trip);
  // Round 3 opened: neither earlier round opens again.
  await refused(call(client, s1, answers[0]), "ALREADY_CONSUMED");
  await refused(call(client, s2, answers[1]), "ALREADY_CONSUMED");
});

// A fork is two answers to one round. Of 8 parallel retries of a round,
// one opens it and runs the handler; the others wait for its answer and
// get it, so all 8 hold the one next-round state there is. Once that next
// round opened, 8 parallel retries of the forked round are all refused.
test("fork: 8 parallel retries of one round get one next round, 10 times over; after it opened, none", { skip }, async (t) => {
  const client = await connect(t, url);
  const tally = { answered: 0, refused: 0 };
  for (let run = 0; run < 10; run++) {
    for (const round of [1, 2]) {
      const state = await rounds(client, round);
      const forks = () => Promise.allSettled(Array.from({ length: 8 }, () => call(client, state, answers[round - 1])));
      const results = await forks();
      const failed = results.filter((r) => r.status === "rejected").map((r) => String(r.reason));
      assert.deepEqual(failed, [], `run ${run}, round ${round}`);
      const next = new Set(results.map((r) => (round === 1 ? asks(r.value, "dates", "nights") : asks(r.value, "confirm"))));
      assert.equal(next.size, 1, `run ${run}, round ${round}: ${next.size} next rounds, want 1`);
      tally.answered += results.length;
      // The one next-round state there is opens; then the forked round is over.
      const [s] = next;
      if (round === 1) asks(await call(client, s, answers[1]), "confirm");
      else assert.match(text(await call(client, s, answers[2])), /^Trip for alice/);
      for (const r of await forks()) {
        await refused(r.status === "fulfilled" ? Promise.resolve(r.value) : Promise.reject(r.reason), "ALREADY_CONSUMED");
        tally.refused++;
      }
    }
  }
  t.diagnostic(`fork: 20 rounds forked 8 ways: ${tally.answered} retries answered with one next round each time; ${tally.refused} refused once it opened`);
});

test("off-script inputResponses are refused, and the round still opens with the keys it asked", { skip }, async (t) => {
  const client = await connect(t, url);
  const s1 = await rounds(client, 1);
  for (const off of [
    { ...answers[0], seat: accept({ seat: "12A" }) }, // a key added
    {}, // none
    { Destination: answers[0].destination }, // another case
  ]) {
    await refused(call(client, s1, off), "INPUT_MISMATCH");
  }
  const s2 = asks(await call(client, s1, answers[0]), "dates", "nights");
  const { dates, nights } = answers[1];
  for (const off of [
    { dates, nights, seat: accept({ seat: "12A" }) }, // a key added
    { dates }, // a key left out
    { Dates: dates, nights }, // a key in another case
    { dates, NIGHTS: nights }, // a key in another case
    { "dates ": dates, nights }, // a key spelled otherwise
  ]) {
    await refused(call(client, s2, off), "INPUT_MISMATCH");
  }
  const s3 = asks(await call(client, s2, answers[1]), "confirm");
  assert.match(text(await call(client, s3, answers[2])), /^Trip for alice/);
});

// The control: the same server with flows off, plain states (the codec
// before flows). Each attack above goes through there.
test("control, flows off: the rewind, the fork and the off-script answers all go through", { skip }, async (t) => {
  const client = await connect(t, plainURL);
  const s1 = await rounds(client, 1);
  const s2 = asks(await call(client, s1, answers[0]), "dates", "nights");
  asks(await call(client, s2, answers[1]), "confirm");
  asks(await call(client, s1, answers[0]), "dates", "nights"); // rewound
  const results = await Promise.all(Array.from({ length: 8 }, () => call(client, s1, answers[0])));
  assert.equal(new Set(results.map((r) => asks(r, "dates", "nights"))).size, 8, "8 forks, each with its own next round");
  const { dates, nights } = answers[1];
  for (const off of [{ dates, nights, seat: accept({ seat: "12A" }) }, { dates }, { Dates: dates, nights }]) {
    assert.equal((await call(client, s2, off)).resultType, "input_required", "the handler ran with off-script answers");
  }
});

test("a flow ends at its deadline however recent its round, and after its last round", { skip }, async (t) => {
  const client = await connect(t, limitsURL);
  const s1 = await rounds(client, 1);
  const s2 = asks(await call(client, s1, answers[0]), "dates", "nights"); // round 2, sealed just now
  // Round 2 is the last the sealer allows: the codec cannot seal a third.
  const exhausted = await call(client, s2, answers[1]);
  assert.equal(exhausted.isError, true, JSON.stringify(exhausted));
  assert.match(text(exhausted), /flow/i);

  // The flow's deadline is 4 s after its round 1 was sealed, so at most 4 s
  // after round 1's answer came back (the clock read then, whatever the
  // load), the states' TTL 5 minutes.
  const t1 = await rounds(client, 1);
  const sealed = Date.now();
  const t2 = asks(await call(client, t1, answers[0]), "dates", "nights");
  await new Promise((r) => setTimeout(r, Math.max(0, sealed + 4100 - Date.now())));
  await refused(call(client, t2, answers[1]));
});
