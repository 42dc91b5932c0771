#!/usr/bin/env bash
# packages-cold-npm.sh: the TypeScript author's first install, measured
# cold: a fresh project and an empty npm cache; the SDK, zod and the
# client's dependencies from the registry, the sealer and the client from
# the release files (scripts/release.sh --host writes them to dist/release);
# then the TypeScript README's server as written, against a sealer the npm
# package started. It prints the install's time and the time from the
# install's start to the README server's two rounds done. Not part of the
# test command: it needs the registry without a lock file, as an author
# does.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
T=$(mktemp -d)
mkdir -p "$T/a/proj/test" "$T/clients/typescript"
cp "$root/clients/typescript/README.md" "$T/clients/typescript/"
cp "$root/examples/typescript/test/readme.test.mjs" "$T/a/proj/test/"
export PATH="$root/tools/node/node_modules/.bin:/usr/bin:/bin"
(cd "$root/clients/typescript" && node scripts/build.mjs >/dev/null && npm pack --silent --ignore-scripts --pack-destination "$T" >/dev/null)
cd "$T/a/proj"
echo '{"name":"try-sealer","private":true,"type":"module"}' >package.json
rel=$root/dist/release
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/clients/python/pyproject.toml")
plat=$(node -p 'process.platform + "-" + process.arch')
start=$(date +%s.%N)
npm install --cache "$T/npmcache" --prefer-online --no-audit --no-fund --loglevel=error \
  @modelcontextprotocol/server@2.4.0 @modelcontextprotocol/client@2.4.0 zod@4.6.7 \
  "$T"/mcp-sealer-client-*.tgz "$rel/mcp-sealer-sealer-$version.tgz" "$rel/mcp-sealer-sealer-$plat-$version.tgz" >/dev/null
inst=$(date +%s.%N)
node --input-type=module -e '
  import { start } from "@mcp-sealer/sealer";
  const s = await start();
  console.log(s.grpcUrl);
  process.on("SIGTERM", async () => { await s.stop(); process.exit(0); });
  setInterval(() => {}, 1 << 30);
' >"$T/sealer-url" &
sp=$!
for _ in $(seq 150); do [ -s "$T/sealer-url" ] && break; sleep 0.1; done
SEALER_TEST_SEALER_URL=$(head -1 "$T/sealer-url") node --test --test-timeout=120000 test/readme.test.mjs | grep -E "^# (pass|fail)"
end=$(date +%s.%N)
kill $sp
awk -v a=$start -v b=$inst -v c=$end 'BEGIN { printf "npm install (cold cache): %.1f s; install to the README server done: %.1f s\n", b-a, c-a }'
du -sh node_modules | awk '{print "node_modules: " $1}'
rm -rf "$T"
