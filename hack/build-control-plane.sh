#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kubectl and etcd from the Go module proxy into a
# version-keyed cache directory outside the repository. Skips every binary that already reports
# the pinned version. Prints the directory on the last line of stdout.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
here="$(cd "$(dirname "$0")" && pwd)"
bin="${K8S_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/paddock/k8s/${K8S_VERSION}-etcd-${ETCD_VERSION}}"
mkdir -p "$bin"

say() { printf '[control-plane] %s\n' "$*" >&2; }

if ! command -v go >/dev/null 2>&1; then
  for g in /usr/local/go/bin/go; do [ -x "$g" ] && PATH="$(dirname "$g"):$PATH"; done
fi
command -v go >/dev/null 2>&1 || {
  say "Go is needed once to build the test control plane (or set KUBEBUILDER_ASSETS)."; exit 1; }

export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

# Runs a long build with a progress line every 15 s, so a first build (many minutes) never looks hung.
with_progress() {
  local what="$1"; shift
  local start=$SECONDS log
  log="$(mktemp)"
  "$@" >"$log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 15 &
    wait $! || true
    kill -0 "$pid" 2>/dev/null && say "building $what… $((SECONDS - start))s"
  done
  if ! wait "$pid"; then
    say "building $what failed:"; cat "$log" >&2; rm -f "$log"; return 1
  fi
  rm -f "$log"
  say "built $what in $((SECONDS - start))s"
}

minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done

for b in kube-apiserver kube-controller-manager; do
  if [ -x "$bin/$b" ] && "$bin/$b" --version 2>/dev/null | grep -qx "Kubernetes $K8S_VERSION"; then
    continue
  fi
  say "building $b $K8S_VERSION into $bin (first time only; takes several minutes)"
  (cd "$here/k8s-bins" && with_progress "$b" \
    go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags="$ld" -o "$bin/$b.tmp" "k8s.io/kubernetes/cmd/$b")
  mv "$bin/$b.tmp" "$bin/$b"
done

# kubectl for the tests that run the README's and the migration guide's commands as written.
if ! { [ -x "$bin/kubectl" ] && "$bin/kubectl" version --client 2>/dev/null | grep -qx "Client Version: $K8S_VERSION"; }; then
  say "building kubectl $K8S_VERSION into $bin"
  (cd "$here/k8s-bins" && with_progress kubectl \
    go build -trimpath -ldflags="$ld" -o "$bin/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl)
  mv "$bin/kubectl.tmp" "$bin/kubectl"
fi

if ! { [ -x "$bin/etcd" ] && "$bin/etcd" --version 2>/dev/null | grep -q "etcd Version: ${ETCD_VERSION#v}"; }; then
  say "building etcd $ETCD_VERSION into $bin"
  (cd "$here/etcd-bin" && with_progress etcd \
    go build -trimpath -ldflags="-s -w" -o "$bin/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$bin/etcd.tmp" "$bin/etcd"
fi

echo "$bin"
