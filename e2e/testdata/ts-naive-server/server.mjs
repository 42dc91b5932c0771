// A TypeScript MCP server (the official SDK, Streamable HTTP, stateless: the
// 2026-07-28 wire) that keeps its progress as plain JSON in requestState and
// verifies nothing: no requestState.verify. Alone it fails the conformance
// suite's tampered-state scenario; behind sealer-proxy it passes.
//
//   node server.mjs 127.0.0.1:0   (prints "ts-naive-server listening on http://HOST:PORT/mcp")
import { createServer } from "node:http";
import { Readable } from "node:stream";
import { McpServer, createMcpHandler, inputRequired } from "@modelcontextprotocol/server";

const confirm = {
  method: "elicitation/create",
  params: {
    mode: "form",
    message: "Please confirm",
    requestedSchema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] },
  },
};

function factory() {
  const server = new McpServer({ name: "sealer-ts-naive-server", version: "1.0.0" });
  for (const name of ["test_input_required_result_request_state", "test_input_required_result_tampered_state"]) {
    server.registerTool(name, { description: "trusts any state it gets back" }, async (ctx) => {
      const state = ctx.mcpReq.requestState(); // the raw wire string: nothing verifies it
      const answer = ctx.mcpReq.inputResponses?.confirm;
      if (state && answer?.action === "accept") {
        return { content: [{ type: "text", text: "state-ok: requestState accepted (unverified)" }] };
      }
      return inputRequired({ inputRequests: { confirm }, requestState: JSON.stringify({ tool: name, round: 1 }) });
    });
  }
  return server;
}

const handler = createMcpHandler(factory);

const [host, port] = (process.argv[2] ?? "127.0.0.1:0").split(":");
const http = createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = Buffer.concat(chunks);
  const request = new Request(`http://${req.headers.host}${req.url}`, {
    method: req.method,
    headers: Object.entries(req.headers).flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => [k, x]) : [[k, v]])),
    body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
  });
  const response = await handler.fetch(request);
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (response.body) {
    Readable.fromWeb(response.body).pipe(res);
  } else {
    res.end();
  }
});
http.listen(Number(port), host, () => {
  const a = http.address();
  console.error(`ts-naive-server listening on http://${a.address}:${a.port}/mcp`);
});
