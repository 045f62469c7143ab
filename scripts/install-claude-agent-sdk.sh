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

source "$(dirname "${BASH_SOURCE[0]}")/lib/npm-cache.sh"
npm_cache_install claude-agent-sdk node_modules/.bin/tsc without \
  "@anthropic-ai/claude-agent-sdk@${SDK_VERSION}" "typescript@${TYPESCRIPT_VERSION}"
