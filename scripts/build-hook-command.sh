#!/usr/bin/env bash
# Builds loopwarden-hook (core/hook: the compiled command hook, docs/integrations/hooks.md) with
# cargo, profile $CORE_PROFILE (default `quick`, as scripts/build-core.sh), and installs it next to
# `loopwarden` in the venv's bin/, then prints its absolute path: hook configs name it by that path,
# never by a bare name that may not be on the host's PATH.
# Without cargo it says so and stops without failing: a hook installed from the loopwarden_hook
# wheel (`make wheel`) is used as it is, and `loopwarden hook` is the fallback.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-${VENV:-.venv}}"
profile="${CORE_PROFILE:-quick}"
if ! command -v cargo >/dev/null; then
  if [[ -x "${venv}/bin/loopwarden-hook" ]]; then
    echo "==> no Rust toolchain (cargo): using the hook command already installed: $(cd "${venv}/bin" && pwd)/loopwarden-hook"
  else
    echo "loopwarden-hook not built: no Rust toolchain (cargo); hook configs can run \`$(cd "${venv}/bin" && pwd)/loopwarden hook\` instead, or \`${venv}/bin/pip install dist/loopwarden_hook-*.whl\` from \`make wheel\` on a machine with Rust." >&2
  fi
  exit 0
fi
target="${CARGO_TARGET_DIR:-core/target}"
# One std-only crate: a few seconds (the release profile's fat LTO of std: about 4 s).
echo "==> building loopwarden-hook (Rust, cargo profile ${profile}: a few seconds)"
# --locked: the committed Cargo.lock is what gets built.
cargo build --locked --profile "${profile}" --manifest-path core/Cargo.toml -p loopwarden-hook
# cargo's own directory names: the dev profile builds into debug/.
case "${profile}" in dev | test) out=debug ;; bench) out=release ;; *) out="${profile}" ;; esac
mkdir -p "${venv}/bin"
install -m 0755 "${target}/${out}/loopwarden-hook" "${venv}/bin/loopwarden-hook"
echo "==> hook command installed: $(cd "${venv}/bin" && pwd)/loopwarden-hook (name this path in hook configs)"
