// Builds dist/: copies the stubs that buf generate wrote into the
// repository's gen/es (never edited, never committed twice) into src/gen,
// then compiles src with tsc. npm ci runs it (prepare).
import { cpSync, rmSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const gen = fileURLToPath(new URL("../../../gen/es", import.meta.url));
rmSync(`${root}src/gen`, { recursive: true, force: true });
rmSync(`${root}dist`, { recursive: true, force: true });
cpSync(gen, `${root}src/gen`, { recursive: true });
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-p", root], { stdio: "inherit" });
