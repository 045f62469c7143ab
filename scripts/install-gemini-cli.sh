#!/usr/bin/env bash
# Installs Gemini CLI (its bundle holds the settings schema and the loader that validates
# settings.json) into .cache/gemini-cli, for the test that loads `loopwarden install-hooks
# gemini-cli`'s output with Gemini CLI's own settings loader (tests/integrations/test_hook_configs.py).
# Its optional native packages (a pty, a keychain) are not needed to read settings and are skipped.
# Idempotent: a stamp holding the pinned version skips the install.
set -euo pipefail

GEMINI_CLI_VERSION="0.61.0"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${repo_root}/.cache/gemini-cli"
stamp="${prefix}/.installed"
want="@google/gemini-cli@${GEMINI_CLI_VERSION}"

if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${want}" && -d "${prefix}/node_modules/@google/gemini-cli/bundle" ]]; then
  echo "install-gemini-cli: ${want} already in ${prefix}" >&2
  exit 0
fi
command -v npm >/dev/null || { echo "install-gemini-cli: npm is required" >&2; exit 1; }
mkdir -p "${prefix}"
echo "install-gemini-cli: npm install ${want}" >&2
npm install --silent --no-audit --no-fund --omit=optional --prefix "${prefix}" "${want}" >/dev/null
printf '%s' "${want}" >"${stamp}"
