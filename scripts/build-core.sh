#!/usr/bin/env bash
# Builds loopwarden-core (core/, Rust + PyO3), the daemon's per-event engine, into the venv with
# maturin. The daemon cannot run without it, so a machine without cargo stops here with one line
# saying how to get either a toolchain or a prebuilt wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv}"
if ! command -v cargo >/dev/null; then
  echo "loopwarden-core cannot be built: no Rust toolchain (cargo). Install Rust with rustup (https://rustup.rs), or pip install a loopwarden_core wheel built elsewhere with \`make wheel\`." >&2
  exit 1
fi
"${venv}/bin/pip" install --disable-pip-version-check --progress-bar off -q "maturin>=1.7,<2"
# --locked: the committed Cargo.lock is what gets built.
VIRTUAL_ENV="$(cd "${venv}" && pwd)" "${venv}/bin/maturin" develop --release --locked -q -m core/Cargo.toml
"${venv}/bin/python" -c 'import loopwarden_core; print("loopwarden-core", loopwarden_core.__version__, "built into the venv")'
