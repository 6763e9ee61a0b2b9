#!/usr/bin/env bash
# Builds the Helm v4 command pinned in hack/helm-bin/go.mod from the Go module proxy into a
# version-keyed cache directory outside the repository (the chart tests and `make manifests` use it).
# Skips the build when the cached binary already reports the pinned version. Prints the binary's
# path on the last line of stdout.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
pinned="$(awk '$1 == "require" && $2 == "helm.sh/helm/v4" { print $3 } $1 == "helm.sh/helm/v4" { print $2 }' \
  "$here/helm-bin/go.mod" | head -n1)"
HELM_VERSION="${HELM_VERSION:-$pinned}"
[ -n "$HELM_VERSION" ] || { echo "[helm] no helm.sh/helm/v4 requirement in hack/helm-bin/go.mod" >&2; exit 1; }
dir="${HELM_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/paddock/helm/${HELM_VERSION}}"
bin="$dir/helm"

say() { printf '[helm] %s\n' "$*" >&2; }

if [ -x "$bin" ] && [ "$("$bin" version --template '{{.Version}}' 2>/dev/null)" = "$HELM_VERSION" ]; then
  echo "$bin"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  for g in /usr/local/go/bin/go; do [ -x "$g" ] && PATH="$(dirname "$g"):$PATH"; done
fi
command -v go >/dev/null 2>&1 || {
  say "Go is needed once to build Helm $HELM_VERSION for the chart tests (or put a helm $HELM_VERSION at $bin)."; exit 1; }

export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
mkdir -p "$dir"

# The version lives in helm.sh/helm/v4/internal/version (what Helm's own Makefile sets); without
# it `helm version` would say only the minor version ("v4.3").
ld="-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean"

say "building helm $HELM_VERSION into $dir (first time only; takes a few minutes)"
start=$SECONDS
log="$(mktemp)"
(cd "$here/helm-bin" && go build -trimpath -ldflags="$ld" -o "$bin.tmp" helm.sh/helm/v4/cmd/helm) >"$log" 2>&1 &
pid=$!
# A progress line every 15 s, so a first build never looks hung.
while kill -0 "$pid" 2>/dev/null; do
  sleep 15 &
  wait $! || true
  kill -0 "$pid" 2>/dev/null && say "building helm… $((SECONDS - start))s"
done
if ! wait "$pid"; then
  say "building helm failed:"; cat "$log" >&2; rm -f "$log" "$bin.tmp"; exit 1
fi
rm -f "$log"
got="$("$bin.tmp" version --template '{{.Version}}')"
[ "$got" = "$HELM_VERSION" ] || { say "built helm reports $got, not $HELM_VERSION"; rm -f "$bin.tmp"; exit 1; }
mv "$bin.tmp" "$bin"
say "built helm $HELM_VERSION in $((SECONDS - start))s"
echo "$bin"
