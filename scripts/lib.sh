# Shared by scripts/test.sh and scripts/bench.sh: install and build what the
# tests and benchmarks need. Source it from the repository root.

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

# ensure_vault builds Vault from Go modules (tools/vault) once into the cache
# directory and exports its path as SEALER_TEST_VAULT.
ensure_vault() {
  local sum cache_dir
  sum=$(sha256sum tools/vault/go.sum tools/vault/go.mod tools/vault/main.go | sha256sum | cut -c1-12)
  cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/sealer"
  export SEALER_TEST_VAULT="$cache_dir/vault-v1.19.5-$sum"
  if [ ! -x "$SEALER_TEST_VAULT" ]; then
    echo "building Vault once (about 6 minutes on 2 cores) into $cache_dir"
    mkdir -p "$cache_dir"
    (cd tools/vault && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$SEALER_TEST_VAULT.tmp" .)
    mv "$SEALER_TEST_VAULT.tmp" "$SEALER_TEST_VAULT"
  fi
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
  local sum cache_dir
  sum=$(sha256sum tools/otelcol/go.sum tools/otelcol/go.mod tools/otelcol/main.go | sha256sum | cut -c1-12)
  cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/sealer"
  export SEALER_TEST_OTELCOL="$cache_dir/otelcol-v0.165.0-$sum"
  if [ ! -x "$SEALER_TEST_OTELCOL" ]; then
    echo "building the OpenTelemetry Collector once (about 3 minutes on 2 cores) into $cache_dir"
    mkdir -p "$cache_dir"
    (cd tools/otelcol && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$SEALER_TEST_OTELCOL.tmp" .)
    mv "$SEALER_TEST_OTELCOL.tmp" "$SEALER_TEST_OTELCOL"
  fi
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
  local sum cache_dir
  sum=$(sha256sum tools/helm/go.sum tools/helm/go.mod | sha256sum | cut -c1-12)
  cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/sealer"
  export SEALER_TEST_HELM="$cache_dir/helm-v3.22.0-$sum"
  if [ ! -x "$SEALER_TEST_HELM" ]; then
    echo "building Helm once (about 2 to 7 minutes on 2 cores) into $cache_dir"
    mkdir -p "$cache_dir"
    (cd tools/helm && CGO_ENABLED=0 go build -trimpath \
      -ldflags '-s -w -X helm.sh/helm/v3/internal/version.version=v3.22.0' \
      -o "$SEALER_TEST_HELM.tmp" helm.sh/helm/v3/cmd/helm)
    mv "$SEALER_TEST_HELM.tmp" "$SEALER_TEST_HELM"
  fi
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
  local sum cache_dir
  sum=$(cat tools/promtool/go.sum tools/promtool/go.mod tools/promtool/promqlcheck/main.go | sha256sum | cut -c1-12)
  cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/sealer"
  export SEALER_TEST_PROMTOOL="$cache_dir/promtool-v0.316.0-$sum"
  export SEALER_TEST_PROMQLCHECK="$cache_dir/promqlcheck-v0.316.0-$sum"
  if [ ! -x "$SEALER_TEST_PROMTOOL" ] || [ ! -x "$SEALER_TEST_PROMQLCHECK" ]; then
    echo "building promtool and promqlcheck once (about 7 CPU-minutes: 4 to 12 minutes on 2 cores) into $cache_dir"
    mkdir -p "$cache_dir"
    (cd tools/promtool &&
      CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$SEALER_TEST_PROMTOOL.tmp" github.com/prometheus/prometheus/cmd/promtool &&
      CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$SEALER_TEST_PROMQLCHECK.tmp" ./promqlcheck)
    mv "$SEALER_TEST_PROMTOOL.tmp" "$SEALER_TEST_PROMTOOL"
    mv "$SEALER_TEST_PROMQLCHECK.tmp" "$SEALER_TEST_PROMQLCHECK"
  fi
  go version -m "$SEALER_TEST_PROMTOOL" | grep -E '^\s+(path|mod)\s'
}
