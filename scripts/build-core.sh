#!/usr/bin/env bash
# Builds loopwarden-core (core/, Rust + PyO3), the daemon's per-event engine, into the venv with
# maturin, with cargo profile $CORE_PROFILE (default `quick`, core/Cargo.toml: the release profile
# without its whole-program optimisation, so a first `make serve` takes seconds, not minutes;
# `make wheel` and the image build the optimised `release`).
#
# The daemon cannot run without the core. A machine without cargo uses a core already installed in
# the venv (a wheel from `make wheel`) when it is the version of core/pyproject.toml, and otherwise
# stops here with one line saying how to get either a toolchain or that wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv}"
profile="${CORE_PROFILE:-quick}"

if ! command -v cargo >/dev/null; then
  # Only bash and the venv's Python from here on: a machine without Rust may lack much else.
  found="$("${venv}/bin/python" - 2>/dev/null <<'EOF' || true
import tomllib
import loopwarden_core
with open("core/pyproject.toml", "rb") as pyproject:
    wanted = tomllib.load(pyproject)["project"]["version"]
print("ok" if loopwarden_core.__version__ == wanted else f"{loopwarden_core.__version__}, not {wanted}")
EOF
)"
  if [[ "${found}" == ok ]]; then
    echo "==> no Rust toolchain (cargo): using the loopwarden-core already installed in ${venv} (a wheel from \`make wheel\`, say), not building it"
    exit 0
  fi
  echo "loopwarden-core cannot be built: no Rust toolchain (cargo)${found:+, and the loopwarden-core in ${venv} is ${found}}. Install Rust with rustup (https://rustup.rs), or on a machine with Rust run \`make wheel\` and here \`${venv}/bin/pip install dist/*.whl\`, then make again: the installed core is used." >&2
  exit 1
fi

# Measured on a 2-core machine (docs/performance.md, "Build profiles"); a busy machine takes longer.
case "${profile}" in
  quick) estimate="about 40 s of CPU: 25 s on 2 idle cores, more on a busy machine" ;;
  release) estimate="about 45 s of CPU: 35 s on 2 idle cores, its fat LTO on one core" ;;
  *) estimate="cargo profile ${profile}" ;;
esac
echo "==> building loopwarden-core (Rust, cargo profile ${profile}: ${estimate}) into ${venv}; cargo's lines follow"
"${venv}/bin/pip" install --disable-pip-version-check --progress-bar off -q "maturin>=1.7,<2"

# A line every BUILD_TICK_SECONDS while cargo runs: it prints nothing while it optimises and links
# the last crate, and a silent minute reads as a hang. The sleep gets no output stream of ours, so
# nothing waiting for this script's output waits for the last sleep after the build.
tick() {
  local started=${SECONDS}
  while sleep "${BUILD_TICK_SECONDS:-10}" </dev/null >/dev/null 2>&1; do
    echo "    ... still building loopwarden-core: $((SECONDS - started)) s so far"
  done
}
tick &
ticker=$!
trap 'kill "${ticker}" 2>/dev/null || true' EXIT
started=${SECONDS}
# --locked: the committed Cargo.lock is what gets built. No -q: cargo's "Compiling ..." lines are the progress.
# --features python,testing: the dev venv's core carries the test hooks the suite drives
# (core/Cargo.toml, src/python/testing.rs); the release wheel (build-wheels.sh) is built with
# pyproject.toml's features alone, without them. (A --features replaces pyproject.toml's list, so
# `python` is named again here.)
VIRTUAL_ENV="$(cd "${venv}" && pwd)" "${venv}/bin/maturin" develop --profile "${profile}" --locked --features python,testing -m core/Cargo.toml
kill "${ticker}" 2>/dev/null || true
"${venv}/bin/python" -c 'import loopwarden_core; print("==> loopwarden-core", loopwarden_core.__version__, "built into the venv in", '"$((SECONDS - started))"', "s")'
