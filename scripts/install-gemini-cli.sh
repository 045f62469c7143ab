#!/usr/bin/env bash
# Installs Gemini CLI (its bundle holds the settings schema and the loader that validates
# settings.json) into .cache/gemini-cli, for the test that loads `loopwarden install-hooks
# gemini-cli`'s output with Gemini CLI's own settings loader (tests/integrations/test_hook_configs.py).
# Its optional native packages (a pty, a keychain) are not needed to read settings and are skipped.
# Idempotent: a stamp holding the pinned version skips the install.
set -euo pipefail

GEMINI_CLI_VERSION="0.61.0"

source "$(dirname "${BASH_SOURCE[0]}")/lib/npm-cache.sh"
npm_cache_install gemini-cli node_modules/@google/gemini-cli/bundle without "@google/gemini-cli@${GEMINI_CLI_VERSION}"
