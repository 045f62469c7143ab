#!/usr/bin/env bash
# Regenerate the committed Go stubs (client/go/loopwardenv1/) from proto/.
#
# Usage: scripts/gen_go_stubs.sh [OUT_DIR]   (default client/go; the freshness test passes a temp dir)
#
# The plugins are the versions pinned by the `tool` lines of client/go/go.mod, installed with
# `go install` into .cache/go-tools/bin (a plain build cache hit after the first run); buf, which
# stands in for protoc, is the PyPI buf-bin pinned in server/pyproject.toml (test extras).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-${repo_root}/client/go}"
buf="${BUF:-${repo_root}/.venv/bin/buf}"
[[ -x "${buf}" ]] || buf="$(command -v buf)" || { echo "gen_go_stubs: buf not found (make test installs it)" >&2; exit 1; }
command -v go >/dev/null || { echo "gen_go_stubs: go not found" >&2; exit 1; }

tools="${repo_root}/.cache/go-tools/bin"
mkdir -p "${tools}"
(cd "${repo_root}/client/go" && GOBIN="${tools}" go install \
  google.golang.org/protobuf/cmd/protoc-gen-go \
  google.golang.org/grpc/cmd/protoc-gen-go-grpc)

mkdir -p "${out}"
cd "${repo_root}"
PATH="${tools}:${PATH}" "${buf}" generate proto --template client/go/buf.gen.yaml --output "${out}"
