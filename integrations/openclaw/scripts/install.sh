#!/usr/bin/env bash
# Installs the plugin into the OpenClaw on PATH and points it at the daemon you run. From a clone,
# with Node >= 24.16 (OpenClaw's own requirement):
#
#   bash integrations/openclaw/scripts/install.sh [--target HOST:PORT] [--no-check] [--openclaw COMMAND]
#
# 1. the client's contract inside its package (OpenClaw imports a plugin from a captured copy);
# 2. the plugin's runtime dependencies, a packed copy of the client among them (npm ci --omit=dev);
# 3. scripts/install.mjs: picks the daemon address (--target, else LOOPWARDEN_LISTEN, else
#    127.0.0.1:$GRPC_PORT, else 127.0.0.1:50051), checks with a gRPC health check that a loopwarden
#    daemon answers there (--no-check skips that), then `openclaw plugins install --link … --force
#    --accept-capabilities`, `openclaw plugins enable loopwarden` and
#    `openclaw config set plugins.entries.loopwarden.config.target …`.
set -euo pipefail

plugin_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo_root="$(cd "${plugin_dir}/../.." && pwd)"

for arg in "$@"; do
  case "${arg}" in -h|--help) exec node "${plugin_dir}/scripts/install.mjs" --help ;; esac
done
command -v node >/dev/null || { echo "loopwarden: node (>= 24.16) is required" >&2; exit 1; }
command -v npm >/dev/null || { echo "loopwarden: npm is required" >&2; exit 1; }

echo "$ node client/node/scripts/copy-proto.js"
node "${repo_root}/client/node/scripts/copy-proto.js"
echo "$ (cd integrations/openclaw && npm ci --omit=dev)"
(cd "${plugin_dir}" && npm ci --omit=dev --no-audit --no-fund --loglevel=error)
exec node "${plugin_dir}/scripts/install.mjs" "$@"
