#!/usr/bin/env bash
# Builds loopwarden-core (core/, Rust + PyO3) into the venv with maturin.
#   build-core.sh serve: without cargo, say so in one line and go on (the daemon runs --engine python)
#   build-core.sh test:  without cargo, stop (CI needs both engines)
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-test}"
venv="${VENV:-.venv}"
if ! command -v cargo >/dev/null; then
  if [[ "${mode}" == serve ]]; then
    echo "loopwarden-core not built: no Rust toolchain (cargo); the daemon uses --engine python" >&2
    exit 0
  fi
  echo "make test: missing cargo: install Rust (https://rustup.rs) to build loopwarden-core" >&2
  exit 1
fi
"${venv}/bin/pip" install --disable-pip-version-check --progress-bar off -q "maturin>=1.7,<2"
# --locked: the committed Cargo.lock is what gets built.
VIRTUAL_ENV="$(cd "${venv}" && pwd)" "${venv}/bin/maturin" develop --release --locked -q -m core/Cargo.toml
"${venv}/bin/python" -c 'import loopwarden_core; print("loopwarden-core", loopwarden_core.__version__, "built into the venv")'
