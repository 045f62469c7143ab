#!/usr/bin/env bash
# Installs Claude Code itself (the npm package and its per-platform binary) into .cache/claude-code,
# for the tests that run its own plugin commands on the repo's plugin and marketplace (`claude
# plugin validate`, `claude plugin marketplace add`, `claude plugin install`):
# tests/integrations/test_claude_code_plugin.py. The version is the one the Claude Agent SDK types
# of scripts/install-claude-agent-sdk.sh ship with (SDK 0.3.332 = Claude Code 2.1.332).
# Idempotent: a stamp holding the pinned version skips the install.
set -euo pipefail

CLAUDE_CODE_VERSION="2.1.332"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${repo_root}/.cache/claude-code"
stamp="${prefix}/.installed"
want="@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}"

if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${want}" && -x "${prefix}/node_modules/.bin/claude" ]]; then
  echo "install-claude-code: ${want} already in ${prefix}" >&2
  exit 0
fi
command -v npm >/dev/null || { echo "install-claude-code: npm is required" >&2; exit 1; }
mkdir -p "${prefix}"
echo "install-claude-code: npm install ${want}" >&2
# The binary is the optional dependency for this platform: optional packages stay included.
npm install --silent --no-audit --no-fund --prefix "${prefix}" "${want}" >/dev/null
printf '%s' "${want}" >"${stamp}"
