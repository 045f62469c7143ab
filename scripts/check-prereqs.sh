#!/usr/bin/env bash
# The tools `make test` needs and cannot install itself. Prints one line per missing tool saying
# how to get it and exits 1, so a machine that lacks one stops in its first seconds, before any
# install. Everything else (Python packages, helm, kubectl, promtool, npm and Go modules) the
# test set-up installs. docs/development.md ("make test: the whole suite") lists exactly these.
set -uo pipefail

missing=0
need() { printf 'make test: missing %s: %s\n' "$1" "$2" >&2; missing=1; }

version_at_least() {  # $1 actual (e.g. 20.11.1), $2 wanted major
  local major="${1%%.*}"
  [[ "${major}" =~ ^[0-9]+$ ]] && (( major >= $2 ))
}

command -v python3 >/dev/null || need python3 "install Python 3.11+ (Debian: apt-get install python3 python3-venv)"
if command -v python3 >/dev/null && ! python3 -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  need "python3 >= 3.11 with venv" "install Python 3.11+ and its venv module (Debian: apt-get install python3-venv)"
fi
if ! command -v node >/dev/null; then
  need "node (>= 20)" "install Node.js 20 or newer (https://nodejs.org, or Debian: apt-get install nodejs)"
elif ! version_at_least "$(node --version | tr -d v)" 20; then
  need "node >= 20" "found $(node --version); install Node.js 20 or newer"
fi
command -v npm >/dev/null || need npm "install npm with Node.js (Debian: apt-get install npm)"
if ! command -v go >/dev/null && [[ ! -x /usr/local/go/bin/go ]]; then
  need go "install Go 1.26 or newer (https://go.dev/dl)"
fi
# loopwarden-core (core/) is Rust: CI tests both engines, so make test needs cargo (make serve does not).
command -v cargo >/dev/null || need cargo "install Rust with cargo (https://rustup.rs, or Debian: apt-get install cargo)"
command -v apt-get >/dev/null || need apt-get "the test set-up installs Debian packages (prometheus, unzip): run on Debian/Ubuntu"
if [[ "$(id -u)" != 0 ]]; then
  need root "the set-up installs Debian packages with apt-get: run make test as root"
fi
exit "${missing}"
