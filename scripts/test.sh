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

step "promtool and promqlcheck from the pinned Prometheus module (tools/promtool), cached"
ensure_promtool

step "alerting rules: promtool check rules, promtool test rules; promqlcheck's own tests"
"$SEALER_TEST_PROMTOOL" check rules deploy/helm/sealer/files/alerts.yaml
"$SEALER_TEST_PROMTOOL" test rules deploy/prometheus/alerts_test.yaml
(cd tools/promtool && go vet ./... && go test -count=1 ./...)

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

# The Go modules: the service (root), the MCP Go SDK adapter, the examples
# and the end-to-end tests, each with its own go.mod so that the service and
# its client pull no MCP SDK.
modules=(. client/gosdk examples e2e)

step "gofmt and go vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null | grep -v '^gen/' || find . -name '*.go' -not -path './gen/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
for m in "${modules[@]}"; do (cd "$m" && go vet ./...); done

step "dependencies point down: sealer and client link no Vault, Redis, bbolt or MCP SDK"
for pkg in ./sealer ./client; do
  if go list -deps "$pkg" | grep -E 'vault|redis|bbolt|modelcontextprotocol'; then
    echo "$pkg depends on the packages above; the format and the client must not" >&2
    exit 1
  fi
done
if grep -E 'modelcontextprotocol|jsonschema-go' go.mod; then
  echo "the service's go.mod requires an MCP SDK; only client/gosdk, examples and e2e may" >&2
  exit 1
fi

step "go test (unit, fuzz seed corpora, examples, end-to-end against the real binaries, Vault and Redis)"
go test -race -count=1 ./...
(cd client/gosdk && go test -race -count=1 ./...)
(cd e2e && go test -race -count=1 -skip 'TestConformance_MRTR' ./...)

step "MCP conformance: the 14 input-required-result scenarios against the example MCP server and a real sealer"
(cd e2e && go test -count=1 -v -run 'TestConformance_MRTR' ./...)

step "alerting rules and dashboard against a live /metrics (promqlcheck; also run above, here with its log)"
(cd e2e && go test -count=1 -v -run 'TestMonitoring_' ./...)
