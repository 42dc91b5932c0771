#!/usr/bin/env bash
# Runs the whole test suite, integration tests included: the README's test
# command. It installs and starts what the tests need.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

step "redis-server (Debian package) for the ledger and fleet tests"
apt_install redis-server redis-server
redis-server --version

step "Vault server built from Go modules (tools/vault), cached"
ensure_vault

step "Node 22, the MCP conformance suite and the TypeScript examples' packages (npm ci)"
ensure_node

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
