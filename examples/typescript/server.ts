// An MCP server on @modelcontextprotocol/server (Streamable HTTP, stateless:
// the 2026-07-28 wire) whose every requestState is sealed and opened by a
// running sealer, through the codec of @mcp-sealer/client/mcp. It implements
// the tools and the prompt of the MCP conformance suite's
// input-required-result scenarios, and three of its own, as the Go example
// (examples/mcpserver) does:
//
//	get_weather      two rounds; the state is bound to the location argument
//	approve_payment  a one-time state: it pays once, and a retry of it gets
//	                 the same answer (a recorded outcome)
//	plan_trip        three rounds of input, then the answer
//
// Every state is a round of a flow (the codec's default): the rounds of one
// request share a deadline and a round limit, only the latest round opens
// (a client can neither rewind nor fork the request), and each retry must
// answer exactly the inputRequests its round asked, which
// states.inputRequired binds.
//
// The answer to every one-time or latest-only state is recorded (the
// codec's default, README "Recorded outcomes"): a client that lost the
// answer to approve_payment's second round and retries it gets the same
// answer, "Paid 42.00 (payment 7)", and nothing is paid again. Each payment
// is numbered and logged ("payment 7: paid 42.00"), so that a test can
// count them. --record off opens as before: such a retry is refused.
//
// The principal is the caller's bearer token, hashed (fromAuthInfo), or,
// for a caller without one, the codec's reserved ANONYMOUS (anonymous:
// true, an explicit opt-in): this example trusts any token, where a real
// server verifies it first (requireBearerAuth).
//
//	node server.ts --addr 127.0.0.1:3001 --sealer http://127.0.0.1:7443 [--rest] [--state-ttl 300] [--legacy reject] [--flows on] [--record on]
//
// --flows off seals plain states, one per round, as the codec did before
// flows (the e2e tests' control: rewinds, forks and off-script answers then
// go through).
//
// --legacy stateless also serves 2025-era requests, JSON-RPC batches
// included, as the SDK's default does; the codec never binds a state to a
// request in a batch (e2e/typescript_test.go tries the attack that would).
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";
import { parseArgs } from "node:util";
import {
  acceptedContent,
  CLIENT_CAPABILITIES_META_KEY,
  createMcpHandler,
  inputRequired,
  inputResponse,
  McpServer,
} from "@modelcontextprotocol/server";
import type { AuthInfo, InputRequests, ServerContext } from "@modelcontextprotocol/server";
import { grpcClient, restClient } from "@mcp-sealer/client";
import { fromAuthInfo, sealedRequestState } from "@mcp-sealer/client/mcp";
import { z } from "zod";

const { values: flags } = parseArgs({
  options: {
    addr: { type: "string", default: "127.0.0.1:3001" },
    sealer: { type: "string", default: "http://127.0.0.1:7443" },
    rest: { type: "boolean", default: false },
    "state-ttl": { type: "string", default: "300" },
    legacy: { type: "string", default: "reject" },
    flows: { type: "string", default: "on" },
    record: { type: "string", default: "on" },
  },
});
if (flags.legacy !== "reject" && flags.legacy !== "stateless") throw new Error("--legacy is reject or stateless");
if (flags.flows !== "on" && flags.flows !== "off") throw new Error("--flows is on or off");
if (flags.record !== "on" && flags.record !== "off") throw new Error("--record is on or off");

// What the states of this server carry.
type Progress = { tool: string; round?: number; name?: string; city?: string; from?: string; nights?: string };

// The three lines a server author writes: a sealer client, the codec, and
// the codec's hook in the server options (plus states.fetch around the
// handler, below).
const sealer = (flags.rest ? restClient : grpcClient)({ url: flags.sealer! });
const states = sealedRequestState<Progress>({
  sealer,
  principal: fromAuthInfo, // the token the handler is given as authInfo
  anonymous: true, // callers without a token: one principal, ANONYMOUS
  ttlSeconds: Number(flags["state-ttl"]),
  flows: flags.flows === "on",
  recordOutcomes: flags.record === "on",
});

// The payments approve_payment made: a retry answered with its recorded
// outcome makes none.
let payments = 0;

const p = "test_input_required_result_";
const text = (s: string) => ({ content: [{ type: "text" as const, text: s }] });
const elicit = (message: string, ...fields: string[]) =>
  inputRequired.elicit({
    message,
    requestedSchema: {
      type: "object",
      properties: Object.fromEntries(fields.map((f) => [f, { type: "string" as const }])),
      required: fields,
    },
  });
const confirm = () =>
  inputRequired.elicit({
    message: "Please confirm",
    requestedSchema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] },
  });
const str = (v: unknown) => (typeof v === "string" ? v : "");
// The verified payload: the hook has opened the state before the handler runs.
const stateOf = (ctx: ServerContext) => ctx.mcpReq.requestState<Progress>();

function newServer(): McpServer {
  const s = new McpServer(
    { name: "sealer-example-mcp-server-ts", version: "1.0.0" },
    { requestState: { verify: states.verify } },
  );
  // A refused state never reaches a handler: the SDK answers -32602 and
  // tells onerror why (the reason, never the state or the principal).
  s.server.onerror = (err) => console.error("mcp:", err.message);

  s.registerTool(p + "elicitation", { description: "asks for the caller's name (no state)" }, async (ctx) => {
    const name = str(acceptedContent(ctx.mcpReq.inputResponses, "user_name")?.name);
    if (name) return text(`Hello, ${name}!`);
    return inputRequired({ inputRequests: { user_name: elicit("What is your name?", "name") } });
  });

  s.registerTool(p + "sampling", { description: "asks for an LLM completion (no state)" }, async (ctx) => {
    if (inputResponse(ctx.mcpReq.inputResponses, "capital_question").kind === "sampling") return text("Sampling response received");
    return inputRequired({
      inputRequests: {
        capital_question: inputRequired.createMessage({
          messages: [{ role: "user", content: { type: "text", text: "What is the capital of France?" } }],
          maxTokens: 100,
        }),
      },
    });
  });

  s.registerTool(p + "list_roots", { description: "asks for the client's roots (no state)" }, async (ctx) => {
    const r = inputResponse(ctx.mcpReq.inputResponses, "client_roots");
    if (r.kind === "roots") return text(`Client exposed ${r.roots.length} root(s)`);
    return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
  });

  // request_state and tampered_state: a confirmation with a sealed state; a
  // retry whose state does not open never reaches the handler (-32602).
  const requestState = async (ctx: ServerContext) => {
    if (stateOf(ctx) && acceptedContent(ctx.mcpReq.inputResponses, "confirm")) {
      return text("state-ok: requestState opened and confirmation accepted");
    }
    return states.inputRequired({ inputRequests: { confirm: confirm() }, payload: { tool: "request_state" } }, ctx);
  };
  s.registerTool(p + "request_state", { description: "asks for a confirmation with a sealed state" }, requestState);
  s.registerTool(p + "tampered_state", { description: "rejects a state that does not open" }, requestState);

  s.registerTool(p + "multiple_inputs", { description: "asks for three inputs at once with a sealed state" }, async (ctx) => {
    const r = ctx.mcpReq.inputResponses;
    const name = str(acceptedContent(r, "user_name")?.name);
    const roots = inputResponse(r, "client_roots");
    if (stateOf(ctx) && name && inputResponse(r, "greeting").kind === "sampling" && roots.kind === "roots") {
      return text(`Hello ${name}, ${roots.roots.length} root(s) visible`);
    }
    return states.inputRequired(
      {
        inputRequests: {
          user_name: elicit("What is your name?", "name"),
          greeting: inputRequired.createMessage({
            messages: [{ role: "user", content: { type: "text", text: "Generate a greeting" } }],
            maxTokens: 50,
          }),
          client_roots: inputRequired.listRoots(),
        },
        payload: { tool: "multiple_inputs" },
      },
      ctx,
    );
  });

  // multi_round keeps its progress in the sealed state only; its second
  // state is round 2 of the first one's flow.
  s.registerTool(p + "multi_round", { description: "two rounds, a new sealed state in each" }, async (ctx) => {
    const st = stateOf(ctx);
    if (!st) {
      return states.inputRequired(
        { inputRequests: { step1: elicit("Step 1: What is your name?", "name") }, payload: { tool: "multi_round", round: 1 } },
        ctx,
      );
    }
    if (st.round === 1) {
      const name = str(acceptedContent(ctx.mcpReq.inputResponses, "step1")?.name);
      return states.inputRequired(
        { inputRequests: { step2: elicit("Step 2: What is your favorite color?", "color") }, payload: { tool: "multi_round", round: 2, name } },
        ctx,
      );
    }
    const color = str(acceptedContent(ctx.mcpReq.inputResponses, "step2")?.color);
    return text(`Multi-round complete: ${st.name} likes ${color}`);
  });

  s.registerTool(p + "capabilities", { description: "asks only for what the client can answer" }, async (ctx) => {
    if (Object.keys(ctx.mcpReq.inputResponses ?? {}).length > 0) return text("Capability-aware input requests fulfilled");
    const caps = (ctx.mcpReq.envelope?.[CLIENT_CAPABILITIES_META_KEY] ?? {}) as Record<string, unknown>;
    const reqs: InputRequests = {};
    if (caps.elicitation) reqs.user_name = elicit("What is your name?", "name");
    if (caps.sampling) {
      reqs.greeting = inputRequired.createMessage({
        messages: [{ role: "user", content: { type: "text", text: "Generate a short greeting" } }],
        maxTokens: 50,
      });
    }
    if (caps.roots) reqs.client_roots = inputRequired.listRoots();
    if (Object.keys(reqs).length === 0) return text("No declared client capability supports an in-band input request");
    return inputRequired({ inputRequests: reqs });
  });

  s.registerPrompt(p + "prompt", { description: "asks for context with a sealed state" }, async (ctx) => {
    const c = acceptedContent(ctx.mcpReq.inputResponses, "user_context");
    if (stateOf(ctx) && c) {
      return {
        description: "A prompt with elicited context",
        messages: [{ role: "user", content: { type: "text", text: "Context: " + str(c.context) } }],
      };
    }
    return states.inputRequired(
      { inputRequests: { user_context: elicit("Please provide context for the prompt", "context") }, payload: { tool: "prompt" } },
      ctx,
    );
  });

  s.registerTool(
    "get_weather",
    { description: "asks for units; the state is bound to the location", inputSchema: z.object({ location: z.string() }) },
    async ({ location }, ctx) => {
      const units = str(acceptedContent(ctx.mcpReq.inputResponses, "units")?.units);
      if (stateOf(ctx) && units) return text(`Weather in ${location}: 21 degrees ${units.toUpperCase()}`);
      return states.inputRequired({ inputRequests: { units: elicit("Celsius or Fahrenheit?", "units") }, payload: { tool: "get_weather" } }, ctx);
    },
  );

  s.registerTool(
    "approve_payment",
    { description: "asks for approval; the state opens once", inputSchema: z.object({ amount: z.number() }) },
    async ({ amount }, ctx) => {
      if (stateOf(ctx) && acceptedContent(ctx.mcpReq.inputResponses, "approve")) {
        const n = ++payments;
        console.error(`payment ${n}: paid ${amount.toFixed(2)}`);
        return text(`Paid ${amount.toFixed(2)} (payment ${n})`);
      }
      return states.inputRequired({ inputRequests: { approve: confirm() }, payload: { tool: "approve_payment" } }, ctx, { oneTime: true });
    },
  );

  // plan_trip: three rounds of input (where; when and how long; confirm),
  // each state the next round of the first one's flow.
  s.registerTool(
    "plan_trip",
    { description: "three rounds of input, then the plan", inputSchema: z.object({ traveler: z.string() }) },
    async ({ traveler }, ctx) => {
      const st = stateOf(ctx);
      const r = ctx.mcpReq.inputResponses;
      if (!st) {
        return states.inputRequired({ inputRequests: { destination: elicit("Where to?", "city") }, payload: { tool: "plan_trip", round: 1 } }, ctx);
      }
      if (st.round === 1) {
        const city = str(acceptedContent(r, "destination")?.city);
        return states.inputRequired(
          {
            inputRequests: { dates: elicit(`When do you leave for ${city}?`, "from"), nights: elicit("How many nights?", "nights") },
            payload: { tool: "plan_trip", round: 2, city },
          },
          ctx,
        );
      }
      if (st.round === 2) {
        const from = str(acceptedContent(r, "dates")?.from);
        const nights = str(acceptedContent(r, "nights")?.nights);
        return states.inputRequired({ inputRequests: { confirm: confirm() }, payload: { ...st, round: 3, from, nights } }, ctx);
      }
      if (acceptedContent(r, "confirm")?.ok !== true) return text(`No trip for ${traveler}`);
      return text(`Trip for ${traveler}: ${st.city} from ${st.from}, ${st.nights} nights (round ${states.flowOf(ctx)?.round} of one flow)`);
    },
  );
  return s;
}

const mcp = createMcpHandler(newServer, { legacy: flags.legacy as "reject" | "stateless", onerror: (err) => console.error("mcp:", err.message) });
const handle = states.fetch(mcp.fetch);

// authInfo: the bearer token (fromAuthInfo hashes it into the principal).
function authOf(req: IncomingMessage): AuthInfo | undefined {
  const m = /^Bearer (\S+)$/.exec(req.headers.authorization ?? "");
  if (!m) return undefined;
  const id = createHash("sha256").update(m[1]!).digest("hex").slice(0, 32);
  return { token: m[1]!, clientId: `bearer:${id}`, scopes: [] };
}

// The Node adapter: node:http to the web-standard handler and back.
async function serve(req: IncomingMessage, res: ServerResponse) {
  if (new URL(req.url ?? "/", "http://x").pathname !== "/mcp") {
    res.writeHead(404).end();
    return;
  }
  const abort = new AbortController();
  res.on("close", () => abort.abort());
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : v);
  }
  const hasBody = req.method !== "GET" && req.method !== "HEAD";
  const request = new Request(`http://${req.headers.host ?? "localhost"}${req.url}`, {
    method: req.method,
    headers,
    signal: abort.signal,
    ...(hasBody && { body: Readable.toWeb(req) as ReadableStream, duplex: "half" }),
  } as RequestInit);
  const auth = authOf(req);
  const response = await handle(request, auth ? { authInfo: auth } : {});
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (!response.body) {
    res.end();
    return;
  }
  Readable.fromWeb(response.body as import("node:stream/web").ReadableStream).pipe(res);
}

const [host, port] = [flags.addr!.slice(0, flags.addr!.lastIndexOf(":")), Number(flags.addr!.slice(flags.addr!.lastIndexOf(":") + 1))];
const server = createServer((req, res) => {
  serve(req, res).catch((err) => {
    console.error("mcp: serving failed:", err instanceof Error ? err.message : err);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});
server.listen(port, host, () => {
  const a = server.address();
  const where = typeof a === "object" && a ? `${a.address}:${a.port}` : flags.addr;
  console.error(
    `mcpserver-ts listening on http://${where}/mcp, sealer at ${flags.sealer}${flags.rest ? " (REST)" : " (gRPC)"}, flows ${flags.flows}, record ${flags.record}`,
  );
});
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    server.close();
    void mcp.close().then(() => sealer.close()).finally(() => process.exit(0));
  });
}
