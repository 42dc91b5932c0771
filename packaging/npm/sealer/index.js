// @mcp-sealer/sealer: the sealer's static binary for this platform, from the
// optionalDependency @mcp-sealer/sealer-<platform>-<arch> that npm installed
// for this os and cpu, and start() for tests: a sealer on free loopback ports.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";

const require = createRequire(import.meta.url);

/** The platforms a package of this release exists for, as process.platform-process.arch. */
export const PLATFORMS = ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64"];

/** The path of the sealer binary of this platform's package. */
export function binaryPath() {
  const key = `${process.platform}-${process.arch}`;
  const pkg = `@mcp-sealer/sealer-${key}`;
  if (!PLATFORMS.includes(key)) {
    throw new Error(`sealer: no package of the sealer for ${key} (there are: ${PLATFORMS.join(", ")})`);
  }
  let manifest;
  try {
    manifest = require.resolve(`${pkg}/package.json`);
  } catch {
    throw new Error(
      `sealer: ${pkg} is not installed: it is an optionalDependency of @mcp-sealer/sealer, ` +
        "skipped by --omit=optional or --no-optional, or by a lockfile written on another platform; install it too",
    );
  }
  return join(dirname(manifest), "bin", process.platform === "win32" ? "sealer.exe" : "sealer");
}

/**
 * Starts a sealer on free loopback ports, its key file and ledger in a
 * temporary directory (or opts.dataDir), plus any serve flags in opts.flags.
 * Resolves once it listens, with { grpcUrl, restUrl, stop() }; stop()
 * resolves once the sealer exited.
 */
export function start(opts = {}) {
  const dir = opts.dataDir ?? mkdtempSync(join(tmpdir(), "sealer-"));
  const args = ["serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--data-dir", dir,
    "--log-format", "json", "--shutdown-delay", "0s", ...(opts.flags ?? [])];
  const child = spawn(binaryPath(), args, { stdio: ["ignore", "ignore", "pipe"] });
  const lines = [];
  // Resolves once the sealer exited and a data directory start made is gone.
  const stop = () =>
    new Promise((resolve) => {
      const done = () => {
        if (!opts.dataDir) rmSync(dir, { recursive: true, force: true });
        resolve();
      };
      if (child.exitCode !== null || child.signalCode !== null) return done();
      child.once("exit", done);
      child.kill("SIGTERM");
    });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { stop(); reject(new Error(`sealer did not start:\n${lines.join("\n")}`)); }, opts.timeoutMs ?? 15000);
    child.on("error", (e) => { clearTimeout(timer); reject(e); });
    child.on("exit", (code) => { clearTimeout(timer); reject(new Error(`sealer exited (${code}):\n${lines.join("\n")}`)); });
    createInterface({ input: child.stderr }).on("line", (line) => {
      lines.push(line);
      let rec;
      try { rec = JSON.parse(line); } catch { return; }
      if (rec.msg === "listening") {
        clearTimeout(timer);
        child.removeAllListeners("exit");
        resolve({ grpcUrl: `http://${rec.grpc}`, restUrl: `http://${rec.http}`, process: child, lines, stop });
      }
    });
  });
}
