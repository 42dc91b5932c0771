#!/usr/bin/env bash
# Runs the test suite: the README's test command.
#
#   scripts/test.sh          everything, integration tests included (what CI
#                            runs): it installs, builds and starts what the
#                            tests need
#   scripts/test.sh quick    lint, vet and the unit tests of every module that
#                            need no external component (no Vault, Redis,
#                            Node, podman or Helm), the Python package's
#                            included; it installs nothing but Go modules,
#                            buf (npm, tools/buf) and the Python package's
#                            environment (clients/python/requirements.lock)
#
# Each step prints its wall and CPU time, and a table of all steps ends the
# run. The tools built from Go modules build in the background while the
# steps that need none of them run; a step waits for its tool (wait_build).
# The last part of the run has two lanes: some of the tests run in the
# background beside the steps in the foreground.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
trap steps_exit EXIT
trap 'exit 130' INT TERM

tier=${1:-full}
case $tier in
  full | quick) ;;
  *) echo "usage: scripts/test.sh [quick]" >&2; exit 2 ;;
esac

# root_packages_needing YES prints the root module's packages whose tests
# run a Vault or a Redis (they import internal/testvault or
# internal/testredis), or with NO, all the others.
root_packages_needing() {
  local want=$1
  go list -test -f '{{.ImportPath}} {{join .Deps " "}}' ./... |
    awk -v want="$want" '
      $1 ~ /\.test$/ {
        need = "no"
        for (i = 2; i <= NF; i++) if ($i ~ /\/internal\/test(vault|redis)$/) need = "yes"
        needs[substr($1, 1, length($1) - 5)] = need
        next
      }
      $2 ~ /^\[/ { next }
      { order[++n] = $1 }
      END { for (i = 1; i <= n; i++) if ((order[i] in needs ? needs[order[i]] : "no") == want) print order[i] }'
}

# go_release runs a go command with the flags of the release build
# (scripts/image.sh: static, -trimpath), which the end-to-end tests build the
# binaries with too: go vet, the release artifacts and the tests that need no
# race detector then share the packages they compile.
go_release() { local cmd=$1; shift; CGO_ENABLED=0 go "$cmd" -trimpath "$@"; }

# go_race runs a go command with the race detector, which needs cgo. Pebble
# (the embedded ledger) then links its cgo zstd, which no release has (they
# are built without cgo): the tag pebblegozstd keeps the release's Go zstd,
# and spares the run the compile of its C (about 40 s of CPU). The test
# binaries carry no debug information (-dwarf=false), which only a debugger
# reads: a race report's stacks come from the runtime's own tables. It
# saves a quarter of their compile time. go keeps the last -tags: pass
# none to go_race.
go_race() { local cmd=$1; shift; go "$cmd" -race -tags pebblegozstd -gcflags=all=-dwarf=false "$@"; }

npm_packages() {
  ensure_node
  ensure_ts_naive_server
}

# lint_and_vet runs gofmt and go vet on every module. Each go test of the
# run then turns its own vet off (-vet=off): that is a subset of go vet's
# checks, on files go vet has checked before it (here; with -tags deploy in
# deploy_tests; promqlcheck's in promqlcheck_tests).
lint_and_vet() {
  step "gofmt and go vet"
  unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null | grep -v '^gen/' || find . -name '*.go' -not -path './gen/*'))
  if [ -n "$unformatted" ]; then
    echo "gofmt would change: $unformatted" >&2
    exit 1
  fi
  for m in "${modules[@]}"; do (cd "$m" && go_release vet ./...); done
}

buf_lint() {
  step "buf lint (buf from npm, tools/buf)"
  scripts/buf lint
}

# promqlcheck_tests vets and tests promqlcheck (tools/promtool/promqlcheck)
# with the flags of the tools' builds (go_as_tool): the packages its binary
# compiled serve its tests.
promqlcheck_tests() {
  (cd tools && go_as_tool vet ./promtool/... && go_as_tool test -vet=off -count=1 ./promtool/...)
}

unit_tests() {
  # The unit tests, fuzz seed corpora and examples of the service and the Go
  # SDK adapter, but those that run a Vault or a Redis.
  step "go test: unit tests"
  go_race test -vet=off -count=1 $(root_packages_needing no)
  (cd client/gosdk && go_race test -vet=off -count=1 ./...)
}

# python_checks runs in the Python package's environment (SEALER_TEST_PYTHON):
# mcp_sealer/gen regenerated and compared with what is committed, ruff, mypy
# --strict, and the tests of clients/python (the arguments go to pytest).
python_checks() {
  local py=$SEALER_TEST_PYTHON bin
  bin=$(dirname "$py")
  PYTHON=$py clients/python/scripts/generate.sh
  if git rev-parse --git-dir >/dev/null 2>&1 && [ -n "$(git status --porcelain -- clients/python/src/mcp_sealer/gen)" ]; then
    git status --porcelain -- clients/python/src/mcp_sealer/gen
    echo "clients/python/src/mcp_sealer/gen is stale: run clients/python/scripts/generate.sh and commit the result" >&2
    exit 1
  fi
  (cd clients/python && "$bin/ruff" check --no-cache . && "$bin/mypy" && "$py" -m pytest -p no:cacheprovider "$@")
  (cd examples/python && "$bin/ruff" check --no-cache --config ../../clients/python/pyproject.toml .)
}

# python_integration runs the Python package's integration tests (the real
# sealer binary, the example servers on MCPServer and FastMCP, the attacks
# and their controls, the fleet), then python_package. They wait on
# processes and sockets more than they compute: they run in the background.
python_integration() {
  (cd clients/python && "$SEALER_TEST_PYTHON" -m pytest -p no:cacheprovider tests/integration)
  python_package
  scripts/packages-test.sh # the sealer as wheel and npm package, installed without Go
}

# python_package builds the wheel and the sdist of clients/python (python -m
# build, its backend from the lock: no download), installs the wheel into a
# fresh virtual environment (its dependencies from the lock, hashes
# checked, the wheel by its own hash) and runs the README's three lines
# there, outside the source tree, against a sealer.
python_package() {
  local dist venv reqs
  dist=$(mktemp -d) venv=$(mktemp -d)
  (cd clients/python && "$SEALER_TEST_PYTHON" -m build --no-isolation --outdir "$dist" . >/dev/null)
  ls "$dist"
  reqs="$venv/requirements.txt"
  cp clients/python/requirements.lock "$reqs"
  echo "mcp-sealer @ file://$(ls "$dist"/*.whl) --hash=sha256:$(sha256sum "$dist"/*.whl | cut -d' ' -f1)" >>"$reqs"
  python3 -m venv "$venv/env"
  "$venv/env/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r "$reqs"
  local root=$PWD
  (cd "$venv" && "$venv/env/bin/python" "$root/clients/python/tests/readme_lines.py" "$SEALER_TEST_SEALER")
  rm -rf "$dist" "$venv"
}

if [ "$tier" = quick ]; then
  lint_and_vet
  buf_lint
  unit_tests
  # gen/ check, ruff, mypy --strict, unit tests (the digest against the
  # vectors and against Go's, 10,000 generated params).
  step "Python package: checks and unit tests"
  ensure_python
  python_checks --ignore=tests/integration
  step "promqlcheck's own tests (tools/promtool/promqlcheck)"
  promqlcheck_tests
  exit 0
fi

# The full run. The steps that need no tool built from Go modules come first,
# then those whose tools build fastest; Vault, the longest build, is needed
# last: by the service's integration tests and the end-to-end tests.
# In the background: the Go modules the run builds (download_modules), then
# the tools built from them (the protoc plugins, Vault, promtool, Helm, the
# OpenTelemetry Collector); the npm packages (Node 22, the conformance
# suite, the TypeScript client and examples).
step "background: Go modules, tools, npm packages"
vault_path
python_path
promtool_path
helm_path
otelcol_path
export SEALER_TEST_NODE_BIN="$PWD/tools/node/node_modules/.bin"
export SEALER_TEST_JAVA_EXAMPLE="$java_example"
start_build modules download_modules
start_build java build_java
start_build npm npm_packages
start_build python build_python
start_build vault after modules build_vault
start_build go-tools after modules build_go_tools
start_build promtool after go-tools build_promtool
start_build helm after promtool build_helm
start_build otelcol after helm build_otelcol

# Debian packages: redis-server and redis-cli (redis-tools) for the ledger,
# fleet and Redis Cluster tests (their Sentinels are redis-server
# --sentinel); jq and curl for the README's round trip; iproute2 for the
# nemesis test's network namespaces; podman and runc for the container
# image.
step "Debian packages"
apt_install redis-server redis-server
apt_install redis-cli redis-tools
apt_install jq jq
apt_install ip iproute2
apt_install curl curl
redis-server --version
ensure_podman

lint_and_vet

buf_lint

unit_tests

# buf generate rewrites gen/ (clean: true), which every build of the
# service reads: it runs before the background jobs below start building.
step "gen/ matches proto/ (buf generate, then diff)"
wait_build npm
wait_build go-tools
scripts/buf generate
if git rev-parse --git-dir >/dev/null 2>&1 && [ -n "$(git status --porcelain -- gen)" ]; then
  git status --porcelain -- gen
  git diff --stat -- gen
  echo "gen/ is stale: run 'scripts/buf generate' and commit the result" >&2
  exit 1
fi

# The API is compatible with the last release (proto/releases).
step "buf breaking"
last_release=$(ls proto/releases/*.binpb | sort -V | tail -1)
scripts/buf breaking --against "$last_release"
echo "proto/sealer/v1 is compatible with $(basename "$last_release" .binpb)"

# The binary's version and its SBOM (CycloneDX).
step "release artifacts"
artifacts=$(mktemp -d)
buildvcs=false
git rev-parse --git-dir >/dev/null 2>&1 && buildvcs=true
go_release build -buildvcs=$buildvcs -o "$artifacts/sealer" ./cmd/sealer
"$artifacts/sealer" --version
go_tool cyclonedx-gomod bin -json -output "$artifacts/sealer.cdx.json" "$artifacts/sealer" 2>/dev/null
for module in github.com/mcp-sealer/sealer google.golang.org/grpc github.com/hashicorp/vault/api github.com/redis/go-redis/v9 go.opentelemetry.io/otel; do
  grep -q "\"name\": \"$module\"" "$artifacts/sealer.cdx.json" || { echo "the SBOM does not list $module" >&2; exit 1; }
done
echo "SBOM: $(grep -c '"purl": "pkg:golang/' "$artifacts/sealer.cdx.json") Go packages and modules listed"
rm -rf "$artifacts"

# From here the run has two lanes, so that both cores stay busy to the end
# (the tools are built by now, or nearly): the steps below in the
# foreground, and in the background, one after the other, the MCP
# conformance scenarios, the container image and Helm chart, and the
# end-to-end tests that are not shown; their output is shown in full at the
# end. The two Redis failover tests, which wait on Redis for most of their
# two and a half minutes, run in the background beside both. Each
# end-to-end test names its lane (testenv.Lane); a lane's run skips the
# others' tests.
# e2e_lane LANE CMD... runs CMD ./... in e2e for the tests of LANE; -v
# output drops the lines of the tests skipped as the other lanes'.
e2e_lane() {
  local lane=$1; shift
  (cd e2e && export SEALER_TEST_LANE=$lane && "$@" ./...) | awk '
    /^=== (RUN|PAUSE|CONT)/ { next }
    held != "" { if ($0 ~ /^ *--- SKIP: /) { held = ""; next } print held; held = "" }
    /^ +[^ ]+_test\.go:[0-9]+: runs in the [a-z0-9]+ lane$/ { held = $0; next }
    { print }
    END { if (held != "") print held }'
}
e2e_shown() { e2e_lane shown go_race test -vet=off -count=1 -timeout 30m -v; }
conformance() {
  echo "MCP conformance: the 14 input-required-result scenarios against the example MCP servers (Go, TypeScript, Python on MCPServer and FastMCP, Java), each with a real sealer"
  e2e_lane conformance go_release test -vet=off -count=1 -timeout 30m -v
}
deploy_tests() {
  echo "container image and Helm chart: podman (Debian), Helm (tools/go.mod), Kubernetes v$kube_version API schemas (k8s.io/kubernetes module)"
  ensure_helm
  ensure_kube_schemas
  (cd e2e && go_release vet -tags deploy ./...)
  e2e_lane deploy go_release test -tags deploy -vet=off -count=1 -v
}
e2e_tests() {
  echo "end-to-end against the real binaries, Vault and Redis, but those shown in the last step"
  ensure_vault
  e2e_lane e2e go_race test -vet=off -count=1 -timeout 30m
}
start_build failovers after vault e2e_lane failover go_race test -vet=off -count=1 -timeout 30m -v
start_build conformance after npm after python after java conformance
start_build deploy after conformance after helm deploy_tests
start_build e2e after deploy after vault after python after java e2e_tests

# node --test; the digest against sealer/testdata/vectors.json.
step "TypeScript client: unit tests"
"$SEALER_TEST_NODE_BIN/node" --version
(cd clients/typescript && PATH="$SEALER_TEST_NODE_BIN:$PATH" node --test --test-timeout=120000 "test/**/*.test.mjs")

# clients/python: gen/ check, ruff, mypy --strict, unit tests (the digest
# against the vectors and against Go's, 10,000 generated params); its
# integration tests start in the background.
step "Python package: checks and unit tests"
wait_build python
ensure_python
python_checks --ignore=tests/integration
export SEALER_TEST_SEALER="$bg_dir/sealer"
go_release build -o "$SEALER_TEST_SEALER" ./cmd/sealer
start_build python-integration after java python_integration
# clients/java: the client, the digest (the shared vectors, and parity with
# Go's on generated params) and the MCP adapter's unit tests; the client
# against the real sealer.
start_build java-tests after python-integration after java clients/java/scripts/mvn -q -f clients/java/pom.xml test

# promtool check rules, promtool test rules; promqlcheck's own tests
# (promtool and promqlcheck from the pinned Prometheus module, tools/go.mod).
step "alerting rules"
wait_build promtool
ensure_promtool
"$SEALER_TEST_PROMTOOL" check rules deploy/helm/sealer/files/alerts.yaml
"$SEALER_TEST_PROMTOOL" test rules deploy/prometheus/alerts_test.yaml
promqlcheck_tests

# Vault built from Go modules (tools/vault).
step "go test: the packages that need Vault or Redis"
wait_build vault
ensure_vault
go_race test -vet=off -count=1 $(root_packages_needing yes)

# The tests whose figures the README and the issues quote run verbosely in
# the last step, so that their lines are in the CI log.
# The shown lane: Redis Sentinel and Cluster, rolling restart, probes and
# shutdown, traces at a Collector (OpenTelemetry Collector from Go modules,
# tools/otelcol), flows under attack, the proxy's refusals, the rules and
# dashboard against a live /metrics, the TypeScript client and codec.
step "end-to-end, shown lane"
wait_build otelcol
ensure_otelcol
e2e_shown

# MCP conformance, the container image and Helm chart, the e2e lane, the
# failovers, the Python package's integration tests and wheel.
step "background lanes: their output"
for job in python-integration java-tests failovers conformance deploy e2e; do wait_build "$job" all; done
