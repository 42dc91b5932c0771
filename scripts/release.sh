#!/usr/bin/env bash
# release.sh [--host] [VERSION] writes the release files into dist/release:
# the sealer cross-built as a static binary (CGO_ENABLED=0) for linux
# amd64/arm64, darwin amd64/arm64 and windows amd64, each packed as a
# platform wheel (mcp-sealer-bin) and an npm package
# (@mcp-sealer/sealer-<os>-<cpu>), the npm wrapper @mcp-sealer/sealer, the
# client packages (mcp-sealer's wheel, @mcp-sealer/client's tarball, the
# Java client io.github.mcp-sealer:mcp-sealer: its jar, sources, javadoc
# and POM), and SHA256SUMS, which it prints. --host builds this machine's platform only
# (the test command's way). VERSION (default: the Python client's) is
# stamped into the binary (internal/version) and every package.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

host=""
if [ "${1:-}" = --host ]; then host=1; shift; fi
version=${1:-$(sed -n 's/^version = "\(.*\)"$/\1/p' clients/python/pyproject.toml)}
out=${SEALER_RELEASE_DIR:-dist/release}
rm -rf "$out" && mkdir -p "$out" && out=$(cd "$out" && pwd)
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT

platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64)
if [ -n "$host" ]; then platforms=("$(go env GOOS)/$(go env GOARCH)"); fi
ldflags="-s -w -X github.com/mcp-sealer/sealer/internal/version.version=v$version"
ldflags+=" -X github.com/mcp-sealer/sealer/internal/version.revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
specs=()
for p in "${platforms[@]}"; do
  exe=sealer
  [ "${p%/*}" = windows ] && exe=sealer.exe
  mkdir -p "$build/$p"
  CGO_ENABLED=0 GOOS=${p%/*} GOARCH=${p#*/} go build -trimpath -ldflags "$ldflags" -o "$build/$p/$exe" ./cmd/sealer
  specs+=("$p=$build/$p/$exe")
done
python3 packaging/pack.py --version "$version" --out "$out" "${specs[@]}" >/dev/null

# The clients of the same release, so that the release files install offline.
ensure_python >/dev/null
(cd clients/python && "$SEALER_TEST_PYTHON" -m build --no-isolation --wheel --outdir "$out" . >/dev/null)
# Its dist/ is built by npm ci (prepare), which the test command runs.
if [ -d clients/typescript/dist ]; then
  (cd clients/typescript && PATH="$PWD/../../tools/node/node_modules/.bin:$PATH" npm pack --silent --ignore-scripts --pack-destination "$out" >/dev/null)
fi
# The Java client's version is its POM's: it must be the release's.
java_version=$(sed -n '0,/<version>/s|^  <version>\(.*\)</version>$|\1|p' clients/java/pom.xml)
if [ "$java_version" != "$version" ]; then
  echo "clients/java/pom.xml is version $java_version, the release $version" >&2
  exit 1
fi
clients/java/scripts/mvn -q -f clients/java/pom.xml package -DskipTests
for f in "mcp-sealer-$version.jar" "mcp-sealer-$version-sources.jar" "mcp-sealer-$version-javadoc.jar"; do
  cp "clients/java/target/$f" "$out/"
done
cp clients/java/pom.xml "$out/mcp-sealer-$version.pom"

(cd "$out" && sha256sum -- * >SHA256SUMS && cat SHA256SUMS)
