#!/usr/bin/env bash
# `make wheel`: the four wheels a machine without Rust installs the daemon from, in one directory
# (default dist/): loopwarden-core (core/, compiled, abi3: one wheel for every CPython >= 3.11 on
# this platform), loopwarden-hook (core/hook: the compiled command hook, a program in the wheel's
# scripts, so pip puts it on the environment's PATH), loopwarden-client (client/python/) and
# loopwarden (server/), both pure Python.
#
#   pip install dist/*.whl && loopwarden serve
#
# Both compiled wheels are built with the optimised release profile (fat LTO, one codegen unit),
# whatever CORE_PROFILE a venv's `make serve` used. The core wheel is rebuilt only when a core
# source is newer than it (maturin build --release --locked: the committed Cargo.lock); the hook
# wheel (seconds) and the two pure wheels (a few seconds) always.
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
  echo "==> building the loopwarden-core wheel (maturin build --release --locked: fat LTO, about 45 s of CPU, 35 s on 2 idle cores) into ${out}"
  "${venv}/bin/pip" install --disable-pip-version-check --progress-bar off -q "maturin>=1.7,<2"
  rm -f "${out}"/loopwarden_core-*.whl
  # A line every 10 s: cargo prints nothing while it optimises and links the last crate. The sleep
  # holds none of our output streams, so nothing reading them waits for it after the build.
  ( started=${SECONDS}; while sleep 10 </dev/null >/dev/null 2>&1; do
      echo "    ... still building the loopwarden-core wheel: $((SECONDS - started)) s so far"; done ) &
  ticker=$!
  trap 'kill "${ticker}" 2>/dev/null || true' EXIT
  # The venv's interpreter, as scripts/build-core.sh gives maturin develop.
  VIRTUAL_ENV="$(cd "${venv}" && pwd)" "${venv}/bin/maturin" build --release --locked -m core/Cargo.toml -o "${out}"
  kill "${ticker}" 2>/dev/null || true
  core_wheel="$(find "${out}" -maxdepth 1 -name 'loopwarden_core-*.whl' -print -quit)"
fi

echo "==> building the loopwarden-hook wheel (cargo build --release --locked, a few seconds) into ${out}"
cargo build --locked --release -q --manifest-path core/Cargo.toml -p loopwarden-hook
rm -f "${out}"/loopwarden_hook-*.whl
# Written here, not by maturin: maturin takes the workspace's pyproject.toml (the core's, with its
# `python` feature) for the hook crate too. One program in the wheel's .data/scripts, which pip
# installs into the environment's bin/ with its executable bit; the platform tag is the core
# wheel's (maturin's reading of the glibc symbols both programs link against), the version the crate's.
"${venv}/bin/python" - "${CARGO_TARGET_DIR:-core/target}/release/loopwarden-hook" "${core_wheel}" "${out}" <<'EOF'
import base64
import hashlib
import pathlib
import stat
import sys
import tomllib
import zipfile

binary, core_wheel, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
crate = tomllib.loads(pathlib.Path("core/hook/Cargo.toml").read_text())["package"]
name, version = crate["name"].replace("-", "_"), crate["version"]
tag = "py3-none-" + core_wheel.name.removesuffix(".whl").split("-")[-1]
info = f"{name}-{version}.dist-info"
files = {
    f"{name}-{version}.data/scripts/loopwarden-hook": (binary.read_bytes(), 0o755),
    f"{info}/METADATA": ((f"Metadata-Version: 2.1\nName: {crate['name']}\nVersion: {version}\n"
                          f"Summary: {crate['description']}\nLicense: {crate['license']}\n"
                          "License-File: LICENSE\n").encode(), 0o644),
    f"{info}/WHEEL": (("Wheel-Version: 1.0\nGenerator: loopwarden scripts/build-wheels.sh\n"
                       f"Root-Is-Purelib: false\nTag: {tag}\n").encode(), 0o644),
    f"{info}/licenses/LICENSE": (pathlib.Path("LICENSE").read_bytes(), 0o644),
}


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


record = "".join(f"{path},{digest(data)},{len(data)}\n" for path, (data, _) in files.items())
files[f"{info}/RECORD"] = ((record + f"{info}/RECORD,,\n").encode(), 0o644)
wheel = out / f"{name}-{version}-{tag}.whl"
with zipfile.ZipFile(wheel, "w") as archive:
    for path, (data, mode) in files.items():
        entry = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
        entry.external_attr = (stat.S_IFREG | mode) << 16
        entry.compress_type = zipfile.ZIP_DEFLATED
        archive.writestr(entry, data)
print(f"==> {wheel}")
EOF

echo "==> building the loopwarden-client and loopwarden wheels (pip wheel --no-deps) into ${out}"
rm -f "${out}"/loopwarden_client-*.whl "${out}"/loopwarden-*.whl
# From a copy (symlinks such as LICENSE followed) without the editable install's by-products:
# setuptools would otherwise add what an old *.egg-info/SOURCES.txt lists, or a file since
# deleted that lingers in build/lib.
stage="$(mktemp -d)"
trap 'rm -rf "${stage}"; kill "${ticker:-}" 2>/dev/null || true' EXIT
for project in client/python server; do
  mkdir -p "${stage}/${project}"
  tar -C "${project}" --dereference --exclude=build --exclude='*.egg-info' --exclude=__pycache__ -cf - . | tar -C "${stage}/${project}" -xf -
done
"${venv}/bin/pip" wheel --disable-pip-version-check --progress-bar off -q --no-deps -w "${out}" \
  "${stage}/client/python" "${stage}/server"
ls -l "${out}"/*.whl
