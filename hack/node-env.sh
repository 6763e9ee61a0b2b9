#!/usr/bin/env bash
# Runs a command with Node.js 24 first on PATH and node_modules in step with package-lock.json.
# Usage: hack/node-env.sh COMMAND [ARGS...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
node_bin="$(bash "$root/hack/ensure-node.sh")"
export PATH="$node_bin:$root/node_modules/.bin:$PATH"

# npm ci when node_modules is missing or was installed from another lockfile.
stamp="$root/node_modules/.paddock-lock.sha256"
want="$(sha256sum "$root/package-lock.json" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[node] npm ci (node_modules missing or stale)" >&2
  (cd "$root" && npm ci --no-audit --no-fund --loglevel=error >&2)
  echo "$want" >"$stamp"
fi
cd "$root"
exec "$@"
