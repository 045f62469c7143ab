#!/usr/bin/env bash
# Installs Claude Code itself (the npm package and its per-platform binary) into .cache/claude-code,
# for the tests that run its own plugin commands on the repo's plugin and marketplace (`claude
# plugin validate`, `claude plugin marketplace add`, `claude plugin install`):
# tests/integrations/test_claude_code_plugin.py. The version is the one the Claude Agent SDK types
# of scripts/install-claude-agent-sdk.sh ship with (SDK 0.3.332 = Claude Code 2.1.332).
# Idempotent: a stamp holding the pinned version skips the install.
set -euo pipefail

CLAUDE_CODE_VERSION="2.1.332"

source "$(dirname "${BASH_SOURCE[0]}")/lib/npm-cache.sh"
# The binary is the optional dependency for this platform: optional packages stay included.
npm_cache_install claude-code node_modules/.bin/claude with "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}"
