#!/usr/bin/env bash
# Installs Codex (the npm package and its per-platform binary) into .cache/codex, for the test that
# runs `codex exec` with the hooks `loopwarden install-hooks codex` writes
# (tests/integrations/test_codex_hooks.py). Idempotent: a stamp holding the pinned version skips the install.
set -euo pipefail

CODEX_VERSION="0.169.0"

source "$(dirname "${BASH_SOURCE[0]}")/lib/npm-cache.sh"
# The binary is the optional dependency for this platform: optional packages stay included.
npm_cache_install codex node_modules/.bin/codex with "@openai/codex@${CODEX_VERSION}"
