# Shared by scripts/test.sh and scripts/bench.sh: install and build what the
# tests and benchmarks need. Source it from the repository root.

command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"

# step starts a step of the output and ends the one before it, keeping its
# wall and CPU time for step_table. The CPU time is what the script's own
# processes spent in the step (the background tool builds apart).
step_names=() step_walls=() step_cpus=()
step_name="" step_t0=0 step_c0=0
step() {
  step_end
  step_name=$*
  step_t0=$(now_cs) step_c0=$(cpu_cs)
  printf '\n== %s\n' "$*"
}

# step_end ends the current step, if any, and prints its time.
step_end() {
  [ -n "$step_name" ] || return 0
  local wall=$(( $(now_cs) - step_t0 )) cpu=$(( $(cpu_cs) - step_c0 - bg_cpu_reaped ))
  bg_cpu_reaped=0
  step_names+=("$step_name") step_walls+=("$wall") step_cpus+=("$cpu")
  printf -- '-- %s wall, %s CPU\n' "$(fmt_cs "$wall")" "$(fmt_cs "$cpu")"
  step_name=""
}

# step_table prints every step's wall and CPU time, then the background
# builds' (lib.sh, start_tool) and the total.
step_table() {
  step_end
  local i total=0 name
  printf '\n== step times (wall, CPU of the step'"'"'s own processes)\n'
  printf '%8s %8s  %s\n' wall CPU step
  for i in "${!step_names[@]}"; do
    name=${step_names[$i]}
    [ ${#name} -le 90 ] || name="${name:0:87}..."
    printf '%8s %8s  %s\n' "$(fmt_cs "${step_walls[$i]}")" "$(fmt_cs "${step_cpus[$i]}")" "$name"
  done
  bg_table
  printf '%8s %8s  %s\n' "$(fmt_cs $(( $(now_cs) - script_t0 )))" "$(fmt_cs "$(cpu_cs)")" "total (CPU: all processes of the run, background builds included)"
}

# now_cs is the time in centiseconds; cpu_cs the CPU time in centiseconds
# of this script and of the processes it has waited for (Linux /proc).
now_cs() { local t=${EPOCHREALTIME/./}; echo $(( ${t:0:-4} )); }
clk_tck=$(getconf CLK_TCK)
cpu_cs() {
  local stat f
  read -r stat </proc/$$/stat
  read -r -a f <<<"${stat##*) }"
  echo $(( (f[11] + f[12] + f[13] + f[14]) * 100 / clk_tck ))
}
# fmt_cs prints centiseconds as minutes and seconds: 3m07s.
fmt_cs() { printf '%dm%02ds' $(( $1 / 6000 )) $(( $1 / 100 % 60 )); }
script_t0=$(now_cs)
bg_cpu_reaped=0
bg_table() { :; }

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

# go_build_once OUT DIR PKG [LDFLAGS] builds the package PKG of the Go module
# in DIR, static and stripped, into OUT, unless OUT is there already: OUT's
# name carries the hash of what it is built from, so a changed lock file
# builds anew. WHAT says what is built, and how long it takes the first time.
go_build_once() {
  local out=$1 dir=$2 pkg=$3 ldflags="-s -w ${4:-}"
  [ -x "$out" ] && return 0
  echo "building ${WHAT:-$pkg} once into $(dirname "$out")"
  mkdir -p "$(dirname "$out")"
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
}

# ensure_vault builds Vault from Go modules (tools/vault) once into the cache
# directory and exports its path as SEALER_TEST_VAULT.
ensure_vault() {
  local sum
  sum=$(sha256sum tools/vault/go.sum tools/vault/go.mod tools/vault/main.go | sha256sum | cut -c1-12)
  export SEALER_TEST_VAULT="$tools_cache/vault-v1.19.5-$sum"
  WHAT="Vault (about 6 minutes on 2 cores)" go_build_once "$SEALER_TEST_VAULT" tools/vault .
  "$SEALER_TEST_VAULT" version
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

# ensure_otelcol builds an OpenTelemetry Collector from pinned modules
# (tools/otelcol) once into the cache directory and exports its path as
# SEALER_TEST_OTELCOL, for the tracing test.
ensure_otelcol() {
  local sum
  sum=$(sha256sum tools/otelcol/go.sum tools/otelcol/go.mod tools/otelcol/main.go | sha256sum | cut -c1-12)
  export SEALER_TEST_OTELCOL="$tools_cache/otelcol-v0.165.0-$sum"
  WHAT="the OpenTelemetry Collector (about 3 minutes on 2 cores)" go_build_once "$SEALER_TEST_OTELCOL" tools/otelcol .
  "$SEALER_TEST_OTELCOL" --version
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

# ensure_helm builds Helm from Go modules (tools/helm) once into the cache
# directory and exports its path as SEALER_TEST_HELM.
ensure_helm() {
  local sum
  sum=$(sha256sum tools/helm/go.sum tools/helm/go.mod | sha256sum | cut -c1-12)
  export SEALER_TEST_HELM="$tools_cache/helm-v3.22.0-$sum"
  WHAT="Helm (about 2 to 7 minutes on 2 cores)" go_build_once "$SEALER_TEST_HELM" tools/helm helm.sh/helm/v3/cmd/helm \
    '-X helm.sh/helm/v3/internal/version.version=v3.22.0'
  "$SEALER_TEST_HELM" version --short
}

# ensure_kube_schemas fetches the k8s.io/kubernetes module of the pinned
# Kubernetes version through the Go module proxy (an 18 MB zip, checked
# against its pinned hash) and exports its OpenAPI document as
# SEALER_TEST_KUBE_OPENAPI and the version as SEALER_TEST_KUBE_VERSION.
ensure_kube_schemas() {
  local version=1.34.4 sum='h1:Yy6R4QB8C9kJPp25GFqEvX5XQwY5qzKeqD0Xx6oAcmk=' info dir
  info=$(cd / && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$version")
  if ! grep -qF "\"Sum\": \"$sum\"" <<<"$info"; then
    echo "k8s.io/kubernetes@v$version does not have the pinned hash $sum:" >&2
    echo "$info" >&2
    return 1
  fi
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
  export SEALER_TEST_KUBE_OPENAPI="$dir/api/openapi-spec/swagger.json"
  export SEALER_TEST_KUBE_VERSION=$version
  echo "Kubernetes API schemas of v$version: $SEALER_TEST_KUBE_OPENAPI"
}

# ensure_promtool builds promtool and promqlcheck (the check of the alerting
# rules and dashboard against a live /metrics) from the pinned Prometheus
# module (tools/promtool) once into the cache directory, and exports their
# paths as SEALER_TEST_PROMTOOL and SEALER_TEST_PROMQLCHECK.
ensure_promtool() {
  local sum
  sum=$(cat tools/promtool/go.sum tools/promtool/go.mod tools/promtool/promqlcheck/main.go | sha256sum | cut -c1-12)
  export SEALER_TEST_PROMTOOL="$tools_cache/promtool-v0.316.0-$sum"
  export SEALER_TEST_PROMQLCHECK="$tools_cache/promqlcheck-v0.316.0-$sum"
  WHAT="promtool (about 7 CPU-minutes: 4 to 12 minutes on 2 cores)" go_build_once "$SEALER_TEST_PROMTOOL" tools/promtool \
    github.com/prometheus/prometheus/cmd/promtool
  WHAT="promqlcheck" go_build_once "$SEALER_TEST_PROMQLCHECK" tools/promtool ./promqlcheck
  go version -m "$SEALER_TEST_PROMTOOL" | grep -E '^\s+(path|mod)\s'
}
