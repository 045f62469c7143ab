#!/usr/bin/env bash
# Builds loopwarden-hook (core/hook: the compiled command hook, docs/integrations/hooks.md) with
# cargo and installs it next to `loopwarden` in the venv's bin/, then prints its absolute path:
# hook configs name it by that path, never by a bare name that may not be on the host's PATH.
# Without cargo it says so and stops without failing: `loopwarden hook` is the fallback.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-${VENV:-.venv}}"
if ! command -v cargo >/dev/null; then
  echo "loopwarden-hook not built: no Rust toolchain (cargo); hook configs can run \`$(cd "${venv}/bin" && pwd)/loopwarden hook\` instead." >&2
  exit 0
fi
target="${CARGO_TARGET_DIR:-core/target}"
# --locked: the committed Cargo.lock is what gets built.
cargo build --locked --release -q --manifest-path core/Cargo.toml -p loopwarden-hook
mkdir -p "${venv}/bin"
install -m 0755 "${target}/release/loopwarden-hook" "${venv}/bin/loopwarden-hook"
echo "==> hook command installed: $(cd "${venv}/bin" && pwd)/loopwarden-hook (name this path in hook configs)"
