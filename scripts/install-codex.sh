#!/usr/bin/env bash
# Installs Codex (the npm package and its per-platform binary) into .cache/codex, for the test that
# runs `codex exec` with the hooks `loopwarden install-hooks codex` writes
# (tests/integrations/test_codex_hooks.py). Idempotent: a stamp holding the pinned version skips the install.
set -euo pipefail

CODEX_VERSION="0.169.0"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${repo_root}/.cache/codex"
stamp="${prefix}/.installed"
want="@openai/codex@${CODEX_VERSION}"

if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${want}" && -x "${prefix}/node_modules/.bin/codex" ]]; then
  echo "install-codex: ${want} already in ${prefix}" >&2
  exit 0
fi
command -v npm >/dev/null || { echo "install-codex: npm is required" >&2; exit 1; }
mkdir -p "${prefix}"
echo "install-codex: npm install ${want}" >&2
# The binary is the optional dependency for this platform: optional packages stay included.
npm install --silent --no-audit --no-fund --prefix "${prefix}" "${want}" >/dev/null
printf '%s' "${want}" >"${stamp}"
