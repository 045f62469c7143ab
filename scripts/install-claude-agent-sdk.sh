#!/usr/bin/env bash
# Installs the published Claude Agent SDK (its .d.ts holds Claude Code's hook input and output
# types) and TypeScript into .cache/claude-agent-sdk, for the test that type-checks the hook
# payloads the Python tests send (tests/client/python/hooks/test_claude_code_types.py).
# Idempotent: a stamp holding the pinned versions skips the install. The SDK's optional
# per-platform packages (the bundled Claude Code binary, ~400 MB) are not installed: only the
# types are needed.
set -euo pipefail

SDK_VERSION="0.3.332"
# TypeScript 5 is plain JavaScript; 7 is a native binary in an optional package, which --omit=optional skips.
TYPESCRIPT_VERSION="5.9.3"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${repo_root}/.cache/claude-agent-sdk"
stamp="${prefix}/.installed"
want="@anthropic-ai/claude-agent-sdk@${SDK_VERSION} typescript@${TYPESCRIPT_VERSION}"

if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${want}" && -x "${prefix}/node_modules/.bin/tsc" ]]; then
  echo "install-claude-agent-sdk: ${want} already in ${prefix}" >&2
  exit 0
fi
command -v npm >/dev/null || { echo "install-claude-agent-sdk: npm is required" >&2; exit 1; }
mkdir -p "${prefix}"
echo "install-claude-agent-sdk: npm install ${want}" >&2
# shellcheck disable=SC2086 # two package specs
npm install --silent --no-audit --no-fund --omit=optional --prefix "${prefix}" ${want} >/dev/null
printf '%s' "${want}" >"${stamp}"
