// The TypeScript client's share of BENCHMARKS.md: closed-loop Seal+Open
// pairs per second through @mcp-sealer/client, over gRPC and over REST, with
// the same request and payload as cmd/sealer-load's seal-open (the digest
// computed in process). scripts/bench.sh runs it beside cmd/sealer-load.
//
//	node load.ts --grpc 127.0.0.1:7443 --rest 127.0.0.1:7080 -c 16 -d 10s --repeat 3
import { parseArgs } from "node:util";
import { grpcClient, restClient, toolCall } from "@mcp-sealer/client";
import type { SealerClient } from "@mcp-sealer/client";

const { values: flags } = parseArgs({
  options: {
    grpc: { type: "string", default: "127.0.0.1:7443" },
    rest: { type: "string", default: "127.0.0.1:7080" },
    c: { type: "string", short: "c", default: "16" },
    d: { type: "string", short: "d", default: "10s" },
    warmup: { type: "string", default: "2s" },
    payload: { type: "string", default: "1024" },
    repeat: { type: "string", default: "1" },
  },
});
const seconds = (s: string) => Number(s.replace(/s$/, "")) * 1000;
const callers = Number(flags.c);
const payload = new Uint8Array(Number(flags.payload)).fill(0x61);
const request = toolCall("get_weather", { location: "New York" });

type Run = { pairs: number; perSecond: number; p50: number; p99: number; errors: number };

// run keeps callers pairs in flight for warmup + duration and counts those
// that end within the measured duration.
async function run(c: SealerClient): Promise<Run> {
  const warmupEnd = performance.now() + seconds(flags.warmup!);
  const end = warmupEnd + seconds(flags.d!);
  const latencies: number[] = [];
  let errors = 0;
  const caller = async () => {
    while (performance.now() < end) {
      const t0 = performance.now();
      try {
        const s = await c.seal({ principal: "alice", request, payload });
        await c.open({ requestState: s.requestState, principal: "alice", request });
        if (t0 >= warmupEnd && performance.now() <= end) latencies.push(performance.now() - t0);
      } catch {
        if (t0 >= warmupEnd) errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: callers }, caller));
  latencies.sort((a, b) => a - b);
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
  return { pairs: latencies.length, perSecond: latencies.length / (seconds(flags.d!) / 1000), p50: q(0.5), p99: q(0.99), errors };
}

console.log(`| call (TypeScript client, node ${process.version}) | concurrency | pairs/s | p50 | p99 | errors |\n|---|---|---|---|---|---|`);
for (const [name, make] of [
  ["gRPC Seal+Open", () => grpcClient({ url: `http://${flags.grpc}` })],
  ["REST Seal+Open", () => restClient({ url: `http://${flags.rest}` })],
] as const) {
  const c = make();
  const runs: Run[] = [];
  for (let i = 0; i < Number(flags.repeat); i++) runs.push(await run(c));
  await c.close();
  runs.sort((a, b) => a.perSecond - b.perSecond);
  const m = runs[Math.floor(runs.length / 2)]!;
  console.log(`| ${name} (${payload.length} B) | ${callers} | ${Math.round(m.perSecond)} | ${m.p50.toFixed(2)} ms | ${m.p99.toFixed(2)} ms | ${m.errors} |`);
}
