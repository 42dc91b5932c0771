// Issue 42, what the MCP client sees of a failed open, through the official
// SDK: a refused state is the SDK's -32602; a sealer that could not answer
// is -32603 sealer_unavailable, and a wrong way to it -32603
// sealer_misconfigured, answered by states.fetch in place of the SDK's
// -32602; never the sealer's address, message or credentials. The real
// clients talk to fake sealers over real sockets (gRPC and REST), which
// answer as the sealer and its gateway do; the real sealer drives the same
// paths in integration/sealer.test.mjs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { createServer as createHttp2Server } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { z } from "zod";
import { grpcClient, restClient, SealerError } from "../dist/index.js";
import { sealedRequestState } from "../dist/mcp.js";
import { Sealer } from "../dist/gen/sealer/v1/sealer_pb.js";

const TOKEN = "tok-5ecret-9f2b";
const refused = { code: -32602, message: "Invalid or expired requestState", data: { reason: "invalid_request_state" } };
const unavailable = { code: -32603, message: "requestState sealer unavailable", data: { reason: "sealer_unavailable" } };
const misconfigured = { code: -32603, message: "requestState sealer misconfigured", data: { reason: "sealer_misconfigured" } };

// A google.rpc.ErrorInfo of domain sealer.mcp, as the sealer puts in every error.
const errorInfo = (reason) => Uint8Array.from([0x0a, reason.length, ...Buffer.from(reason), 0x12, 10, ...Buffer.from("sealer.mcp")]);

// The sealer's error with its reason: the gRPC status, or the gateway's
// HTTP status and body. The message quotes the token, so that a leak shows.
const sealerSays = (reason, code, status) => {
  const message = `sealer: ${reason.toLowerCase()}: token ${TOKEN} at 10.9.8.7:7443`;
  return {
    grpc: () => {
      throw new ConnectError(message, code, undefined, [{ type: "google.rpc.ErrorInfo", value: errorInfo(reason) }]);
    },
    rest: (res) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify({ code, message, details: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason, domain: "sealer.mcp" }] }));
    },
  };
};
// What answers in front of the sealer, or instead of it (REST only).
const httpSays = (status, type, body) => ({
  rest: (res) => {
    res.writeHead(status, { "content-type": type });
    res.end(body);
  },
});
const hung = { grpc: () => new Promise(() => {}), rest: () => {} };

// sealerAt serves open as behaviour says over gRPC and REST and returns a
// client of each and the ports; "unreachable" gives clients of a port
// nothing listens on.
async function sealerAt(t, behaviour) {
  if (behaviour === "unreachable") {
    const s = createServer();
    await new Promise((r) => s.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${s.address().port}`;
    await new Promise((r) => s.close(r));
    const clients = { gRPC: grpcClient({ url, token: TOKEN }), REST: restClient({ url, token: TOKEN }) };
    t.after(() => Promise.all(Object.values(clients).map((c) => c.close())));
    const port = url.split(":")[2];
    return { clients, ports: { gRPC: port, REST: port } };
  }
  const servers = {};
  if (behaviour.rest) {
    servers.REST = createServer((req, res) => {
      req.resume();
      req.on("end", () => behaviour.rest(res));
    });
  }
  if (behaviour.grpc) {
    servers.gRPC = createHttp2Server(
      connectNodeAdapter({ grpc: true, connect: false, grpcWeb: false, routes: (router) => router.service(Sealer, { open: behaviour.grpc }) }),
    );
  }
  await Promise.all(Object.values(servers).map((s) => new Promise((r) => s.listen(0, "127.0.0.1", r))));
  const clients = {};
  for (const [transport, s] of Object.entries(servers)) {
    const url = `http://127.0.0.1:${s.address().port}`;
    clients[transport] = (transport === "gRPC" ? grpcClient : restClient)({ url, token: TOKEN });
  }
  t.after(async () => {
    await Promise.all(Object.values(clients).map((c) => c.close()));
    for (const s of Object.values(servers)) {
      s.closeAllConnections?.();
      s.close();
    }
  });
  return { clients, ports: Object.fromEntries(Object.entries(servers).map(([k, s]) => [k, String(s.address().port)])) };
}

// post sends one tools/call retry carrying a state to the official SDK's
// handler behind states.fetch, and returns the JSON-RPC message answered
// (JSON or the data of an event) with the handler's runs.
async function post(states, responseMode) {
  const ran = [];
  const mcp = createMcpHandler(
    () => {
      const s = new McpServer({ name: "t", version: "1" }, { requestState: { verify: states.verify } });
      s.server.onerror = () => {};
      s.registerTool("pay", { inputSchema: z.object({ amount: z.number() }) }, async ({ amount }) => {
        ran.push(amount);
        return { content: [{ type: "text", text: `Paid ${amount}` }] };
      });
      return s;
    },
    { legacy: "reject", ...(responseMode && { responseMode }) },
  );
  const params = {
    _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": { elicitation: {} } },
    name: "pay",
    arguments: { amount: 42 },
    requestState: "S",
    inputResponses: { approve: { action: "accept", content: { ok: true } } },
  };
  const res = await states.fetch(mcp.fetch)(
    new Request("http://x/mcp", {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "pay",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params }),
    }),
  );
  const body = await res.text();
  const line = body.split("\n").find((l) => l.startsWith("{") || l.startsWith("data: {"));
  return { status: res.status, body, message: JSON.parse(line.replace(/^data: /, "")), ran };
}

const cases = [
  // Refused: the SDK's own -32602, as before.
  { name: "a refused state (INVALID_STATE)", sealer: sealerSays("INVALID_STATE", Code.InvalidArgument, 400), want: refused, why: "INVALID_STATE", tries: 1 },
  { name: "a consumed state (ALREADY_CONSUMED)", sealer: sealerSays("ALREADY_CONSUMED", Code.AlreadyExists, 409), want: refused, why: "ALREADY_CONSUMED", tries: 1 },
  { name: "a state the sealer finds malformed (INVALID_ARGUMENT)", sealer: sealerSays("INVALID_ARGUMENT", Code.InvalidArgument, 400), want: refused, why: "INVALID_ARGUMENT", tries: 1 },
  // Unavailable: tried again within the deadline, then -32603.
  { name: "an unreachable sealer", sealer: "unreachable", want: unavailable, why: "unreachable", tries: 3 },
  { name: "a hung sealer, past the deadline", sealer: hung, want: unavailable, why: "deadline", deadlineMs: 300 },
  { name: "its ledger down (LEDGER_UNAVAILABLE)", sealer: sealerSays("LEDGER_UNAVAILABLE", Code.Unavailable, 503), want: unavailable, why: "LEDGER_UNAVAILABLE", tries: 3 },
  { name: "no keys yet (KEYS_UNAVAILABLE)", sealer: sealerSays("KEYS_UNAVAILABLE", Code.Unavailable, 503), want: unavailable, why: "KEYS_UNAVAILABLE", tries: 3 },
  { name: "a tenant limit (RESOURCE_EXHAUSTED)", sealer: sealerSays("RESOURCE_EXHAUSTED", Code.ResourceExhausted, 429), want: unavailable, why: "RESOURCE_EXHAUSTED", tries: 3 },
  { name: "its own failure (INTERNAL)", sealer: sealerSays("INTERNAL", Code.Internal, 500), want: unavailable, why: "INTERNAL", tries: 1 },
  { name: "a proxy's 502 page", sealer: httpSays(502, "text/html", "<html>Bad Gateway 10.9.8.7</html>"), want: unavailable, why: "HTTP 502", tries: 3 },
  // Misconfigured: never tried again, -32603 at once.
  { name: "the credentials refused (UNAUTHENTICATED)", sealer: sealerSays("UNAUTHENTICATED", Code.Unauthenticated, 401), want: misconfigured, why: "UNAUTHENTICATED", tries: 1 },
  { name: "an address that answers 404", sealer: httpSays(404, "text/plain", "404 page not found"), want: misconfigured, why: "HTTP 404", tries: 1 },
  { name: "a page that is not JSON", sealer: httpSays(200, "text/html", "<html>welcome</html>"), want: misconfigured, why: "HTTP 200", tries: 1 },
  { name: "JSON that is not the sealer's", sealer: httpSays(200, "application/json", '{"issuedAt":"yesterday"}'), want: misconfigured, why: "not_the_sealer", tries: 1 },
];

for (const c of cases) {
  for (const responseMode of [undefined, "sse"]) {
    test(`through the SDK (${responseMode ?? "json"}): ${c.name} is ${c.want.data.reason}, without the sealer's address or credentials`, async (t) => {
      const { clients, ports } = await sealerAt(t, c.sealer);
      for (const [transport, sealer] of Object.entries(clients)) {
        const tries = [];
        const counted = { ...sealer, open: (r, o) => (tries.push(1), sealer.open(r, o)) };
        const seen = [];
        const states = sealedRequestState({
          sealer: counted,
          anonymous: true,
          retry: { attempts: 3, backoffMs: 1 },
          deadlineMs: c.deadlineMs ?? 5000,
          onError: (e, info) => seen.push([e, info]),
        });
        const got = await post(states, responseMode);
        const where = `${transport}: ${got.body}`;
        assert.equal(got.status, 200, where);
        assert.deepEqual(got.message, { jsonrpc: "2.0", id: 7, error: c.want }, where);
        assert.deepEqual(got.ran, [], `${where}: the handler ran`);
        for (const secret of ["127.0.0.1", `:${ports[transport]}`, "10.9.8.7", "7443", TOKEN, "token", "ECONNREFUSED", "unauthenticated", "sealer:"]) {
          assert.ok(!got.body.includes(secret), `${where}: says ${secret}`);
        }
        // onError still gets the SealerError, with its reason or failure.
        assert.equal(seen.length, 1, where);
        assert.ok(seen[0][0] instanceof SealerError, where);
        assert.equal(seen[0][0].why, c.why, where);
        assert.deepEqual(seen[0][1], { op: "open", method: "tools/call" }, where);
        if (c.tries !== undefined) assert.equal(tries.length, c.tries, `${where}: tries`);
      }
    });
  }
}
