// The TypeScript client's share of BENCHMARKS.md: closed-loop Seal+Open
// pairs per second through @mcp-sealer/client, over gRPC and over REST, with
// the same request and payload as bench/sealer-load's seal-open (the digest
// computed in process), beside Node's floor (floor.ts: the same pairs with
// the same libraries, none of the client's work). With --echo-grpc and
// --echo-http, the client and the floor run against bench/sealer-echo too,
// where the sealer's cost is out of the figures. The runs take turns,
// --repeat times each, and the one with the median throughput is reported,
// as in sealer-load; a second table gives the client's share of the floor,
// and of the Go client's pairs/s when --go-grpc and --go-rest give them.
// scripts/bench.sh runs it beside bench/sealer-load.
//
//	node load.ts --grpc 127.0.0.1:7443 --rest 127.0.0.1:7080 --echo-grpc 127.0.0.1:7543 --echo-http 127.0.0.1:7580 -c 16 -d 10s --repeat 3
//	node load.ts ... --only '^REST Seal\+Open \(1024 B\)$'   one target
import { parseArgs } from "node:util";
import { grpcClient, requestDigest, restClient, toolCall } from "@mcp-sealer/client";
import type { SealerClient } from "@mcp-sealer/client";
import { grpcFloor, restFloor } from "./floor.ts";
import type { Driver } from "./floor.ts";

const { values: flags } = parseArgs({
  options: {
    grpc: { type: "string", default: "127.0.0.1:7443" },
    rest: { type: "string", default: "127.0.0.1:7080" },
    "echo-grpc": { type: "string" },
    "echo-http": { type: "string" },
    "go-grpc": { type: "string" },
    "go-rest": { type: "string" },
    c: { type: "string", short: "c", default: "16" },
    d: { type: "string", short: "d", default: "10s" },
    warmup: { type: "string", default: "2s" },
    payload: { type: "string", default: "1024" },
    repeat: { type: "string", default: "1" },
    only: { type: "string" },
  },
});
const seconds = (s: string) => Number(s.replace(/s$/, "")) * 1000;
const callers = Number(flags.c);
const payload = new Uint8Array(Number(flags.payload)).fill(0x61);
const call = { name: "get_weather", arguments: { location: "New York" } };
const request = toolCall(call.name, call.arguments);
const floorPair = { principal: "alice", digest: requestDigest("tools/call", call), payload };

type Run = { pairs: number; perSecond: number; p50: number; p99: number; errors: number; cpuPerPair: number };

// run keeps callers pairs in flight for warmup + duration and counts those
// that end within the measured duration, with the CPU time this process
// spent in it (all its threads: the event loop, GC, libuv).
async function run(d: Driver): Promise<Run> {
  const warmupEnd = performance.now() + seconds(flags.warmup!);
  const end = warmupEnd + seconds(flags.d!);
  let cpu = process.cpuUsage();
  const measured = new Promise<NodeJS.CpuUsage>((resolve) => {
    setTimeout(() => (cpu = process.cpuUsage()), warmupEnd - performance.now());
    setTimeout(() => resolve(process.cpuUsage(cpu)), end - performance.now());
  });
  const latencies: number[] = [];
  let errors = 0;
  const caller = async () => {
    while (performance.now() < end) {
      const t0 = performance.now();
      try {
        await d.pair();
        if (t0 >= warmupEnd && performance.now() <= end) latencies.push(performance.now() - t0);
      } catch {
        if (t0 >= warmupEnd) errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: callers }, caller));
  const used = await measured;
  latencies.sort((a, b) => a - b);
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
  return {
    pairs: latencies.length, perSecond: latencies.length / (seconds(flags.d!) / 1000), p50: q(0.5), p99: q(0.99), errors,
    cpuPerPair: (used.user + used.system) / Math.max(1, latencies.length),
  };
}

const through = (c: SealerClient): Driver => ({
  async pair() {
    const s = await c.seal({ principal: "alice", request, payload });
    await c.open({ requestState: s.requestState, principal: "alice", request });
  },
  close: () => c.close(),
});

type Target = { label: string; transport: "gRPC" | "REST"; server: "sealer" | "echo"; floor: boolean; make: () => Driver };
const servers: ["sealer" | "echo", string, string][] = [["sealer", flags.grpc!, flags.rest!]];
if (flags["echo-grpc"] && flags["echo-http"]) servers.push(["echo", flags["echo-grpc"], flags["echo-http"]]);
const targets: Target[] = [];
for (const transport of ["gRPC", "REST"] as const) {
  for (const [server, grpc, rest] of servers) {
    const url = `http://${transport === "gRPC" ? grpc : rest}`;
    const label = `${transport} Seal+Open (${payload.length} B)${server === "echo" ? " on the echo" : ""}`;
    targets.push(
      { label, transport, server, floor: false, make: () => through(transport === "gRPC" ? grpcClient({ url }) : restClient({ url })) },
      { label: `Node floor: ${label}`, transport, server, floor: true, make: () => (transport === "gRPC" ? grpcFloor : restFloor)(url, floorPair) },
    );
  }
}

// --only runs the targets whose label matches the regular expression, each
// in a process of its own when the caller loops over them.
if (flags.only) {
  const only = new RegExp(flags.only);
  targets.splice(0, targets.length, ...targets.filter((t) => only.test(t.label)));
}

// The targets take turns, so that a slow stretch of a shared machine moves
// no ratio; each run dials anew, within its warmup.
const runs = targets.map((): Run[] => []);
for (let i = 0; i < Number(flags.repeat); i++) {
  for (const [k, t] of targets.entries()) {
    const d = t.make();
    runs[k]!.push(await run(d));
    await d.close();
  }
}
const median = runs.map((rs) => rs.sort((a, b) => a.perSecond - b.perSecond)[Math.floor(rs.length / 2)]!);

console.log(`| call (TypeScript client, node ${process.version}) | concurrency | pairs/s | p50 | p99 | errors | node CPU/pair |\n|---|---|---|---|---|---|---|`);
for (const [k, t] of targets.entries()) {
  const m = median[k]!;
  console.log(`| ${t.label} | ${callers} | ${Math.round(m.perSecond)} | ${m.p50.toFixed(2)} ms | ${m.p99.toFixed(2)} ms | ${m.errors} | ${Math.round(m.cpuPerPair)} µs |`);
}

const rate = (transport: string, server: string, floor: boolean) => {
  const k = targets.findIndex((t) => t.transport === transport && t.server === server && t.floor === floor);
  return k < 0 ? NaN : median[k]!.perSecond;
};
const share = (a: number, b: number) => (Number.isFinite(a / b) ? `${Math.round((100 * a) / b)}%` : "");
console.log(`\n| TypeScript client | concurrency | share of Node floor, sealer | share of Node floor, echo | share of Go client |\n|---|---|---|---|---|`);
for (const transport of ["gRPC", "REST"] as const) {
  const client = rate(transport, "sealer", false);
  const go = Number(flags[transport === "gRPC" ? "go-grpc" : "go-rest"] ?? NaN);
  console.log(`| ${transport} Seal+Open (${payload.length} B) | ${callers} | ${share(client, rate(transport, "sealer", true))} | ` +
    `${share(rate(transport, "echo", false), rate(transport, "echo", true))} | ${share(client, go)} |`);
}
