#!/usr/bin/env node
// The sealer command: runs the binary of this platform's package (an
// optionalDependency of @mcp-sealer/sealer), passing arguments, signals and
// the exit code on. Nothing is downloaded.
import { spawn } from "node:child_process";
import { binaryPath } from "../index.js";

let bin;
try {
  bin = binaryPath();
} catch (e) {
  console.error(String(e.message ?? e));
  process.exit(1);
}
const child = spawn(bin, process.argv.slice(2), { stdio: "inherit" });
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => child.kill(sig));
}
child.on("error", (e) => {
  console.error(`sealer: ${e.message}`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) process.kill(process.pid, signal);
  else process.exit(code ?? 1);
});
