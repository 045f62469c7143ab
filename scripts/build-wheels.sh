#!/usr/bin/env bash
# `make wheel`: the three wheels a machine without Rust installs the daemon from, in one directory
# (default dist/): loopwarden-core (core/, compiled, abi3: one wheel for every CPython >= 3.11 on
# this platform), loopwarden-client (client/python/) and loopwarden (server/), both pure Python.
#
#   pip install dist/*.whl && loopwarden serve
#
# The core wheel is rebuilt only when a core source is newer than it (maturin build --release
# --locked: the committed Cargo.lock); the two pure wheels, a few seconds, always.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv}"
out="${1:-dist}"
if ! command -v cargo >/dev/null; then
  echo "make wheel: cannot build the loopwarden-core wheel: no Rust toolchain (cargo). Install Rust with rustup (https://rustup.rs) or build the wheels on a machine that has it." >&2
  exit 1
fi
mkdir -p "${out}"

core_wheel="$(find "${out}" -maxdepth 1 -name 'loopwarden_core-*.whl' -print -quit)"
if [[ -n "${core_wheel}" ]] && [[ -z "$(find core/Cargo.toml core/Cargo.lock core/pyproject.toml \
    core/loopwarden_core.pyi core/src -newer "${core_wheel}" -print -quit)" ]]; then
  echo "==> ${core_wheel} is up to date"
else
  echo "==> building the loopwarden-core wheel (maturin build --release --locked) into ${out}"
  "${venv}/bin/pip" install --disable-pip-version-check --progress-bar off -q "maturin>=1.7,<2"
  rm -f "${out}"/loopwarden_core-*.whl
  # The venv's interpreter, as scripts/build-core.sh gives maturin develop: cargo then reuses that build.
  VIRTUAL_ENV="$(cd "${venv}" && pwd)" "${venv}/bin/maturin" build --release --locked -q -m core/Cargo.toml -o "${out}"
fi

echo "==> building the loopwarden-client and loopwarden wheels (pip wheel --no-deps) into ${out}"
rm -f "${out}"/loopwarden_client-*.whl "${out}"/loopwarden-*.whl
# From a copy (symlinks such as LICENSE followed) without the editable install's by-products:
# setuptools would otherwise add what an old *.egg-info/SOURCES.txt lists, or a file since
# deleted that lingers in build/lib.
stage="$(mktemp -d)"
trap 'rm -rf "${stage}"' EXIT
for project in client/python server; do
  mkdir -p "${stage}/${project}"
  tar -C "${project}" --dereference --exclude=build --exclude='*.egg-info' --exclude=__pycache__ -cf - . | tar -C "${stage}/${project}" -xf -
done
"${venv}/bin/pip" wheel --disable-pip-version-check --progress-bar off -q --no-deps -w "${out}" \
  "${stage}/client/python" "${stage}/server"
ls -l "${out}"/*.whl
