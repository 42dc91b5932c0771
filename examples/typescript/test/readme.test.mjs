// Issue 42: the TypeScript README's server runs on Node as written. The
// block after "<!-- test: runs as written -->" in clients/typescript/README.md
// is written, unchanged, to a file in this package (whose node_modules hold
// what the README installs) and run with node against a real sealer: the
// sealer at SEALER_TEST_SEALER_URL, or the binary SEALER_TEST_SEALER started
// here. Alice completes two rounds; mallory, with her own token, presenting
// alice's state, is refused; the server logs why.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client, ProtocolError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const here = fileURLToPath(new URL("..", import.meta.url));
const readme = fileURLToPath(new URL("../../../clients/typescript/README.md", import.meta.url));
const skip = process.env.SEALER_TEST_SEALER_URL || process.env.SEALER_TEST_SEALER ? false : "no sealer: set SEALER_TEST_SEALER (a binary) or SEALER_TEST_SEALER_URL";

/** The README's marked JavaScript blocks, as written. */
export function snippets(text) {
  return [...text.matchAll(/<!-- test: runs as written -->\s*\n```js\n([\s\S]*?)\n```/g)].map((m) => m[1]);
}

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

async function listening(port, child, out) {
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`the snippet exited ${child.exitCode}:\n${out.join("")}`);
    const ok = await new Promise((resolve) => {
      const s = createServer();
      s.once("error", () => resolve(true)); // taken: the snippet listens
      s.listen(port, "127.0.0.1", () => s.close(() => resolve(false)));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the snippet did not listen:\n${out.join("")}`);
}

async function startSealer(t) {
  if (process.env.SEALER_TEST_SEALER_URL) return process.env.SEALER_TEST_SEALER_URL;
  const dir = mkdtempSync(join(tmpdir(), "sealer-"));
  const child = spawn(process.env.SEALER_TEST_SEALER, ["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--data-dir", dir, "--log-format", "json", "--shutdown-delay", "0s"], { stdio: ["ignore", "ignore", "pipe"] });
  t.after(() => { child.kill(); rmSync(dir, { recursive: true, force: true }); });
  let buf = "";
  return new Promise((resolve, reject) => {
    child.on("exit", (c) => reject(new Error(`sealer exited ${c}: ${buf}`)));
    child.stderr.on("data", (d) => {
      buf += d;
      for (const line of buf.split("\n")) {
        try {
          const rec = JSON.parse(line);
          if (rec.msg === "listening") resolve(`http://${rec.grpc}`);
        } catch {}
      }
    });
  });
}

async function connect(t, url, token) {
  const client = new Client(
    { name: "readme-test", version: "1.0.0" },
    { capabilities: { elicitation: {} }, versionNegotiation: { mode: { pin: "2026-07-28" } }, inputRequired: { autoFulfill: false } },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  t.after(() => client.close());
  return client;
}

test("the README's server runs as written: two rounds for alice, mallory refused", { skip }, async (t) => {
  const [code] = snippets(readFileSync(readme, "utf8"));
  assert.ok(code, "no block marked to run in clients/typescript/README.md");
  const sealerURL = await startSealer(t);
  const file = join(here, `.readme-snippet-${process.pid}.mjs`);
  writeFileSync(file, code + "\n");
  t.after(() => rmSync(file, { force: true }));
  const port = await freePort();
  const out = [];
  const child = spawn(process.execPath, [file], { env: { ...process.env, SEALER_URL: sealerURL, PORT: String(port) }, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout.on("data", (d) => out.push(String(d)));
  child.stderr.on("data", (d) => out.push(String(d)));
  t.after(() => child.kill());
  await listening(port, child, out);

  const url = `http://127.0.0.1:${port}/mcp`;
  const alice = await connect(t, url, "alice-token");
  const mallory = await connect(t, url, "mallory-token");
  const r1 = await alice.callTool({ name: "book", arguments: { seat: "12A" } }, { allowInputRequired: true });
  assert.equal(r1.resultType, "input_required", JSON.stringify(r1));
  const yes = { confirm: { action: "accept", content: { ok: true } } };
  const retry = { name: "book", arguments: { seat: "12A" }, requestState: r1.requestState, inputResponses: yes };
  await assert.rejects(mallory.callTool(retry, { allowInputRequired: true }), (e) => e instanceof ProtocolError && e.code === -32602);
  const r2 = await alice.callTool(retry, { allowInputRequired: true });
  assert.deepEqual(r2.content, [{ type: "text", text: "booked 12A" }]);
  // The log line is written as the refusal is answered: poll for it.
  const logged = /open failed on tools\/call: refused: PRINCIPAL_MISMATCH/;
  for (let i = 0; i < 200 && !logged.test(out.join("")); i++) await new Promise((r) => setTimeout(r, 50));
  assert.match(out.join(""), logged, "the server logs why mallory was refused");
});
