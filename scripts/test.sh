#!/usr/bin/env bash
# Runs the whole test suite, integration tests included: the README's test
# command. It installs and starts what the tests need.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
trap step_table EXIT

step "redis-server (Debian package) for the ledger and fleet tests"
apt_install redis-server redis-server
redis-server --version

step "redis-cli (Debian package redis-tools) for the Redis Cluster tests; their Sentinels are redis-server --sentinel"
apt_install redis-cli redis-tools

step "Vault server built from Go modules (tools/vault), cached"
ensure_vault

step "OpenTelemetry Collector built from Go modules (tools/otelcol), cached"
ensure_otelcol

step "Node 22, the MCP conformance suite and the TypeScript examples' packages (npm ci)"
ensure_node

step "the TypeScript MCP server behind sealer-proxy in the e2e tests (npm ci)"
ensure_ts_naive_server

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
if git rev-parse --git-dir >/dev/null 2>&1 && [ -n "$(git status --porcelain -- gen)" ]; then
  git status --porcelain -- gen
  git diff --stat -- gen
  echo "gen/ is stale: run 'go tool -modfile=tools/go.mod buf generate' and commit the result" >&2
  exit 1
fi

step "buf breaking: the API is compatible with the last release (proto/releases)"
last_release=$(ls proto/releases/*.binpb | sort -V | tail -1)
go tool -modfile=tools/go.mod buf breaking --against "$last_release"
echo "proto/sealer/v1 is compatible with $(basename "$last_release" .binpb)"

step "release artifacts: the binary's version and its SBOM (CycloneDX)"
artifacts=$(mktemp -d)
buildvcs=false
git rev-parse --git-dir >/dev/null 2>&1 && buildvcs=true
CGO_ENABLED=0 go build -buildvcs=$buildvcs -trimpath -o "$artifacts/sealer" ./cmd/sealer
"$artifacts/sealer" --version
go tool -modfile=tools/go.mod cyclonedx-gomod bin -json -output "$artifacts/sealer.cdx.json" "$artifacts/sealer" 2>/dev/null
for module in github.com/mcp-sealer/sealer google.golang.org/grpc github.com/hashicorp/vault/api github.com/redis/go-redis/v9 go.opentelemetry.io/otel; do
  grep -q "\"name\": \"$module\"" "$artifacts/sealer.cdx.json" || { echo "the SBOM does not list $module" >&2; exit 1; }
done
echo "SBOM: $(grep -c '"purl": "pkg:golang/' "$artifacts/sealer.cdx.json") Go packages and modules listed"
rm -rf "$artifacts"

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
# The tests whose figures the README and the issues quote run verbosely in
# the next step, so that their lines are in the CI log.
shown='TestRedisHA|TestFleet_RollingRestart|TestProbes|TestShutdown|TestTracing|TestProxy|TestMonitoring_|TestTypeScript'
(cd e2e && go test -race -count=1 -skip "TestConformance_MRTR|$shown" ./...)

step "end-to-end, shown: Redis Sentinel and Cluster failovers, rolling restart, probes and shutdown, traces at a Collector, the proxy's refusals, the rules and dashboard against a live /metrics, the TypeScript client and codec"
(cd e2e && go test -race -count=1 -v -run "$shown" ./... | grep -vE '^=== (RUN|PAUSE|CONT)')

step "MCP conformance: the 14 input-required-result scenarios against the example MCP server and a real sealer"
(cd e2e && go test -count=1 -v -run 'TestConformance_MRTR' ./...)

step "TypeScript client: unit tests (node --test; the digest against sealer/testdata/vectors.json)"
(cd clients/typescript && PATH="$SEALER_TEST_NODE_BIN:$PATH" node --test "test/**/*.test.mjs")

step "container image and Helm chart: podman (Debian), Helm (tools/helm, cached), Kubernetes v1.34.4 API schemas (k8s.io/kubernetes module)"
ensure_podman
ensure_helm
ensure_kube_schemas
(cd e2e && go vet -tags deploy ./... && go test -tags deploy -count=1 -v -run '^(TestContainerImage|TestHelmChart)$' ./...)
