#!/usr/bin/env bash
# Runs the whole test suite, integration tests included: the README's test
# command. It installs and starts what the tests need.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"

step() { printf '\n== %s\n' "$*"; }

# apt_install installs Debian packages when a command is missing. It needs
# root (as CI and the developer machines run); elsewhere it says what to do.
apt_updated=""
apt_install() {
  local cmd=$1; shift
  command -v "$cmd" >/dev/null && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "$cmd is missing: install the Debian packages $* (needs root)" >&2
    return 1
  fi
  if [ -z "$apt_updated" ]; then
    apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

step "redis-server (Debian package) for the ledger and fleet tests"
apt_install redis-server redis-server
redis-server --version

step "Vault server built from Go modules (tools/vault), cached"
vault_sum=$(sha256sum tools/vault/go.sum tools/vault/go.mod tools/vault/main.go | sha256sum | cut -c1-12)
cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/sealer"
export SEALER_TEST_VAULT="$cache_dir/vault-v1.19.5-$vault_sum"
if [ ! -x "$SEALER_TEST_VAULT" ]; then
  echo "building Vault once (about 6 minutes on 2 cores) into $cache_dir"
  mkdir -p "$cache_dir"
  (cd tools/vault && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$SEALER_TEST_VAULT.tmp" .)
  mv "$SEALER_TEST_VAULT.tmp" "$SEALER_TEST_VAULT"
fi
"$SEALER_TEST_VAULT" version

step "Node 22, the MCP conformance suite and the TypeScript examples' packages (npm ci)"
npm ci --prefix tools/node --no-audit --no-fund
npm ci --prefix examples/typescript --no-audit --no-fund
export SEALER_TEST_NODE_BIN="$PWD/tools/node/node_modules/.bin"
"$SEALER_TEST_NODE_BIN/node" --version

step "buf lint"
go tool -modfile=tools/go.mod buf lint

step "gen/ matches proto/ (buf generate, then diff)"
go tool -modfile=tools/go.mod buf generate
if [ -d .git ] && [ -n "$(git status --porcelain -- gen)" ]; then
  git status --porcelain -- gen
  git diff --stat -- gen
  echo "gen/ is stale: run 'go tool -modfile=tools/go.mod buf generate' and commit the result" >&2
  exit 1
fi

step "gofmt and go vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null | grep -v '^gen/' || find . -name '*.go' -not -path './gen/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
go vet ./...

step "go test (unit, fuzz seed corpora, examples, end-to-end against the real binaries, Vault and Redis)"
go test -race -count=1 -skip 'TestConformance_MRTR' ./...

step "MCP conformance: the 14 input-required-result scenarios against the example MCP server and a real sealer"
go test -count=1 -v -run 'TestConformance_MRTR' ./e2e
