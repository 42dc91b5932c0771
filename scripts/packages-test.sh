#!/usr/bin/env bash
# packages-test.sh: the sealer as packages of its ecosystems, as a user
# without Go installs them. scripts/release.sh --host builds this machine's
# platform into a temporary directory; then, with no Go on PATH:
#  - a fresh virtual environment gets the lock's dependencies (hashes
#    checked), then mcp-sealer[mcp,fastmcp,server] and mcp-sealer-bin
#    offline from the release files only; the `sealer` shim runs; and
#    clients/python/tests/readme_lines.py --wheel runs the READMEs' Python
#    servers as written against a sealer started from the wheel;
#  - a fresh npm project gets @mcp-sealer/sealer and this platform's package
#    offline from the release files; `npx sealer version` runs; the
#    TypeScript README's server (examples/typescript/test/readme.test.mjs)
#    runs against a sealer the npm package started.
# It prints the sizes, the release step's time and the time from the start
# of the install to the first protected round trip. With --from DIR it tests
# release files already written there (scripts/release.sh's dist/release)
# instead of building.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
rel=$work/release
t=$(now)
if [ "${1:-}" = --from ]; then
  rel=$(cd "$2" && pwd)
else
  SEALER_RELEASE_DIR=$rel scripts/release.sh --host >/dev/null
  echo "release step (this platform only): $(since "$t")"
fi
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' clients/python/pyproject.toml)
(cd "$rel" && for f in *.whl *.tgz; do printf '  %-90s %6d KiB\n' "$f" $(( $(stat -c %s "$f") / 1024 )); done)

# No Go anywhere on PATH from here on.
nogo=/usr/bin:/bin
if PATH=$nogo command -v go >/dev/null; then echo "go is on $nogo: cannot test without Go" >&2; exit 1; fi

echo "Python: a fresh venv, the wheels offline from the release files"
t=$(now)
python3 -m venv "$work/venv"
py=$work/venv/bin/python
PATH=$nogo "$py" -m pip install -q --disable-pip-version-check --require-hashes -r clients/python/requirements.lock
t_ours=$(now)
PATH=$nogo "$py" -m pip install -q --disable-pip-version-check --no-index --find-links "$rel" "mcp-sealer[mcp,fastmcp,server]==$version"
echo "  pip install --no-index --find-links RELEASE 'mcp-sealer[mcp,fastmcp,server]': $(since "$t_ours")"
got=$(PATH=$work/venv/bin:$nogo sealer version)
case $got in "sealer v$version "*) echo "  sealer on PATH: $got" ;; *) echo "sealer version: $got, want v$version" >&2; exit 1 ;; esac
(cd "$work" && PATH=$work/venv/bin:$nogo "$py" "$root/clients/python/tests/readme_lines.py" --wheel)
echo "  from a fresh venv to the READMEs' servers done, install included: $(since "$t")"

echo "npm: a fresh project, the packages offline from the release files"
export PATH="$root/tools/node/node_modules/.bin:$nogo"
node --version >/dev/null
mkdir "$work/npm" && cd "$work/npm"
echo '{"name":"try-sealer","private":true,"type":"module"}' >package.json
t=$(now)
plat=$(node -p 'process.platform + "-" + process.arch')
npm install --offline --no-audit --no-fund --loglevel=error "$rel/mcp-sealer-sealer-$plat-$version.tgz" "$rel/mcp-sealer-sealer-$version.tgz" >/dev/null
echo "  npm install --offline (wrapper + $plat): $(since "$t")"
got=$(npx --offline sealer version)
case $got in "sealer v$version "*) echo "  npx sealer: $got" ;; *) echo "npx sealer version: $got, want v$version" >&2; exit 1 ;; esac
node --input-type=module -e '
  import { start } from "@mcp-sealer/sealer";
  const s = await start();
  console.log(s.grpcUrl);
  process.on("SIGTERM", async () => { await s.stop(); process.exit(0); });
  setInterval(() => {}, 1 << 30);
' >"$work/sealer-url" &
for _ in $(seq 150); do [ -s "$work/sealer-url" ] && break; sleep 0.1; done
url=$(head -1 "$work/sealer-url")
cd "$root/examples/typescript"
SEALER_TEST_SEALER_URL=$url node --test --test-timeout=120000 test/readme.test.mjs
echo "  from a fresh npm project to the README's server done, install included: $(since "$t")"
