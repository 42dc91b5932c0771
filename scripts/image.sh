#!/usr/bin/env bash
# Builds the sealer's container image (Containerfile) without any registry:
# the static binary is compiled here, then copied into a `scratch` image with
# the CA bundle and one non-root user.
#
#   scripts/image.sh [TAG]          default tag: sealer:$VERSION
#
# VERSION (default: `git describe`, or v0.0.0-dev), REVISION (default: the
# commit), CREATED (default: the commit's time, so that a rebuild of one
# commit is labelled alike), GOARCH and ENGINE (podman, or docker) may be set.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"

VERSION=${VERSION:-$(git describe --tags --match 'v*' --dirty 2>/dev/null || echo v0.0.0-dev)}
REVISION=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
CREATED=${CREATED:-$(git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || TZ=UTC date +%Y-%m-%dT%H:%M:%SZ)}
ENGINE=${ENGINE:-podman}
tag=${1:-sealer:$VERSION}
ca=/etc/ssl/certs/ca-certificates.crt
[ -r "$ca" ] || { echo "no CA bundle at $ca: install the Debian package ca-certificates" >&2; exit 1; }

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
pkg=github.com/mcp-sealer/sealer/internal/version
CGO_ENABLED=0 GOOS=linux go build -trimpath -buildvcs=false \
  -ldflags "-s -w -X $pkg.version=$VERSION -X $pkg.revision=$REVISION" \
  -o "$ctx/sealer" ./cmd/sealer
cp "$ca" "$ctx/ca-certificates.crt"
printf 'sealer:x:65532:65532:sealer:/var/lib/sealer:/sbin/nologin\n' >"$ctx/passwd"
printf 'sealer:x:65532:\n' >"$ctx/group"
mkdir -m 0700 "$ctx/data"
chmod 0555 "$ctx/sealer"
chmod 0444 "$ctx/passwd" "$ctx/group" "$ctx/ca-certificates.crt"

"$ENGINE" build --file Containerfile --tag "$tag" \
  --build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION" --build-arg "CREATED=$CREATED" \
  "$ctx"
echo "built $tag ($VERSION, commit $REVISION)"
