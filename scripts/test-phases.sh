#!/usr/bin/env bash
# `make test`: each phase of the whole suite, timed. pytest itself prints the time per test
# group (tests/<group>) at the end (see tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."

timings=()
phase() {  # phase NAME COMMAND...
  local name="$1"; shift
  local started=$SECONDS
  echo "==> ${name}"
  local status=0
  "$@" || status=$?
  timings+=("$(printf '%-28s %5ds' "${name}" $((SECONDS - started)))")
  return "${status}"
}
report() {
  echo "==> phase timings"
  printf '  %s\n' "${timings[@]}"
}
trap report EXIT

phase "core build (maturin)" make --no-print-directory .venv/.installed-core
phase "python install" make --no-print-directory .venv/.installed-test
# Lint and types first: seconds, where the suite takes minutes (ruff.toml, mypy.ini).
phase "ruff check" .venv/bin/ruff check
phase "mypy" .venv/bin/mypy
phase "core cargo test" cargo test --locked --manifest-path core/Cargo.toml --workspace -q
phase "core cargo clippy" cargo clippy --locked --manifest-path core/Cargo.toml --workspace --all-targets -q -- -D warnings
phase "test tools install" bash scripts/install-test-tools.sh
status=0
phase "pytest (whole suite)" .venv/bin/python -m pytest || status=$?
if [[ "${status}" -eq 5 ]]; then
  # pytest's "no tests were collected": a suite that ran nothing has not passed.
  echo "make test: pytest collected no tests" >&2
  exit 1
fi
exit "${status}"
