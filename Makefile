# The two set-up commands of the README: `make serve` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two stamps: `serve` installs only what the daemon runs on; `test` adds the test extras.
RUNTIME_STAMP := $(VENV)/.installed-runtime
TEST_STAMP := $(VENV)/.installed-test
PIP := $(BIN)/pip install --disable-pip-version-check --progress-bar off
DISTRIBUTIONS := client/python/pyproject.toml server/pyproject.toml
# loopwarden-core (core/): the compiled engine the daemon runs on, rebuilt when its sources change.
CORE_STAMP := $(VENV)/.installed-core
CORE_SOURCES := core/Cargo.toml core/Cargo.lock core/pyproject.toml core/loopwarden_core.pyi $(shell find core/src -name '*.rs')

# loopwarden-hook (core/hook/): the compiled command hook, installed next to `loopwarden`.
HOOK_COMMAND := $(BIN)/loopwarden-hook
HOOK_SOURCES := core/Cargo.toml core/Cargo.lock core/hook/Cargo.toml $(shell find core/hook/src -name '*.rs')

.PHONY: serve test test-fast core wheel prereqs tools proto tables clean

$(BIN)/python:
	@echo "==> creating $(VENV) (a few seconds)"
	$(PYTHON) -m venv $(VENV)

# The editable installs are built with the build backend the two pyproject.toml files name
# (setuptools), installed into the venv once, rather than in pip's throwaway build environments:
# those cost about 10 s of a first `make serve`, a fresh setuptools per project.
BUILD_REQUIRES = $(BIN)/python -c 'import sys, tomllib; print(*{r for p in sys.argv[1:] \
  for r in tomllib.load(open(p, "rb"))["build-system"]["requires"]})' $(DISTRIBUTIONS)
EDITABLE = $(PIP) -q $$($(BUILD_REQUIRES)) && $(PIP) --no-build-isolation

# The daemon depends on loopwarden-core, so the core is built (or found) first.
$(RUNTIME_STAMP): $(DISTRIBUTIONS) $(CORE_STAMP) | $(BIN)/python
	@echo "==> installing the daemon (loopwarden) and its client (loopwarden-client) into $(VENV) (about 10 s from pip's cache)"
	$(EDITABLE) -e ./client/python -e ./server
	touch $@

$(TEST_STAMP): $(DISTRIBUTIONS) $(CORE_STAMP) | $(BIN)/python
	@echo "==> installing the daemon, the client and the test extras into $(VENV) (about 40 s from pip's cache)"
	$(EDITABLE) -e './client/python[langchain,openai-agents,otel]' -e './server[test,redis,otel,mcp]'
	touch $@ $(RUNTIME_STAMP)

# `make serve` is one replica on a workstation: its runs are checkpointed to a local file (the
# embedded file store), so a Ctrl-C, a crash or a kill keeps the loop history. Override with
# `make serve SERVE_STATE=` (memory only) or another file:/redis:// URL.
SERVE_STATE ?= file:.loopwarden/runs.state

# `make serve` listens on 127.0.0.1: gRPC on GRPC_PORT, Prometheus metrics on METRICS_PORT, the
# agent-hook endpoints (Claude Code's and Codex's hooks: docs/integrations/hooks.md) on HOOKS_PORT.
# A port another process holds moves with `make serve GRPC_PORT=50061 METRICS_PORT=9474
# HOOKS_PORT=50062`; the daemon's own variables LOOPWARDEN_LISTEN, LOOPWARDEN_METRICS_LISTEN and
# LOOPWARDEN_HOOKS_LISTEN (HOST:PORT), when set, win over them.
GRPC_PORT ?= 50051
METRICS_PORT ?= 9464
HOOKS_PORT ?= 50052
SERVE_LISTEN = $(or $(LOOPWARDEN_LISTEN),127.0.0.1:$(GRPC_PORT))
SERVE_METRICS_LISTEN = $(or $(LOOPWARDEN_METRICS_LISTEN),127.0.0.1:$(METRICS_PORT))
SERVE_HOOKS_LISTEN = $(or $(LOOPWARDEN_HOOKS_LISTEN),127.0.0.1:$(HOOKS_PORT))
SERVE_FLAGS = --listen $(SERVE_LISTEN) --metrics-listen $(SERVE_METRICS_LISTEN) \
  --hooks-listen $(SERVE_HOOKS_LISTEN) $(if $(SERVE_STATE),--state-store $(SERVE_STATE))
# The daemon adds this to its "address already in use" line, after its own flag and variable.
serve: export LOOPWARDEN_PORT_HINT = make serve GRPC_PORT=PORT METRICS_PORT=PORT HOOKS_PORT=PORT moves them

# The cargo profile the core and the hook command are built with for this venv: `quick` (core/Cargo.toml)
# is release without whole-program optimisation, a first `make serve` in seconds at a few percent
# of per-event cost (docs/performance.md, "Build profiles"); `make wheel` and the image build
# `release`. `rm $(CORE_STAMP) $(HOOK_COMMAND) && make serve CORE_PROFILE=release` rebuilds optimised.
CORE_PROFILE ?= quick

# The script prints what it builds and how long that takes; without cargo it uses a core of the
# right version already installed in the venv (a wheel from `make wheel`), or stops with one line.
$(CORE_STAMP): $(CORE_SOURCES) | $(BIN)/python
	@VENV=$(VENV) CORE_PROFILE=$(CORE_PROFILE) bash scripts/build-core.sh
	@touch $@

# Built by cargo (it is in the core's workspace); `loopwarden hook` stays the fallback without it.
$(HOOK_COMMAND): $(HOOK_SOURCES) | $(BIN)/python
	@CORE_PROFILE=$(CORE_PROFILE) bash scripts/build-hook-command.sh $(VENV)

## core: build the compiled engine (loopwarden-core) into .venv
core: $(CORE_STAMP)

## wheel: the core's abi3 wheel and the client's and daemon's wheels in $(WHEEL_DIR)/ (no Rust to install)
WHEEL_DIR ?= dist
wheel: | $(BIN)/python
	@bash scripts/build-wheels.sh $(WHEEL_DIR)

## serve: create .venv, install the daemon, start it on its embedded default config
serve: $(RUNTIME_STAMP) $(HOOK_COMMAND)
	@echo "==> loopwarden serve: gRPC on $(SERVE_LISTEN), metrics on http://$(SERVE_METRICS_LISTEN)/metrics,"
	@echo "    agent hooks on http://$(SERVE_HOOKS_LISTEN)/v1/hooks/claude-code and /v1/hooks/codex"
	@echo "    (to move them: make serve GRPC_PORT=PORT METRICS_PORT=PORT HOOKS_PORT=PORT)"
	@echo "    command hooks: $(abspath $(HOOK_COMMAND)) claude-code|codex --url http://$(SERVE_HOOKS_LISTEN)"
	@echo "    to write them into a host's config: $(abspath $(BIN))/loopwarden install-hooks claude-code|codex|gemini-cli|cursor [--user] --url http://$(SERVE_HOOKS_LISTEN)"
	@echo "    OpenClaw plugin, installed and pointed at this gRPC address: bash $(abspath integrations/openclaw/scripts/install.sh) --target $(SERVE_LISTEN)"
	$(BIN)/loopwarden serve $(SERVE_FLAGS)

## test: check prerequisites, install everything the tests need, run the whole suite
test: prereqs
	@bash scripts/test-phases.sh full

## test-fast: the Python-and-core tier: Python and cargo only (no node, npm, go, root or apt), and no
## test that starts loopwarden processes (marker `daemon`: their start-ups were most of its time)
test-fast: $(TEST_STAMP)
	$(BIN)/ruff check
	$(BIN)/mypy
	$(BIN)/python -m pytest -m "not node and not system and not daemon" tests/core tests/engine tests/reference tests/config \
	  tests/differential tests/statestore tests/daemon tests/e2e tests/client/python tests/conformance tests/contract tests/replay \
	  tests/setup tests/tables tests/test_layering.py tests/test_docs_links.py -q

## prereqs: stop at once, one line per missing tool, when something make test cannot install is missing
prereqs:
	@bash scripts/check-prereqs.sh

## tools: the non-Python tools the tests drive (helm, kubectl, promtool, prometheus, ...)
tools:
	bash scripts/install-test-tools.sh

## tables: regenerate every copy of the shared tables (tables/loopwarden.toml), then the proto's
## stubs (the proto holds three generated regions); the test suite fails while any copy is stale
# These need the venv's tools (installed once), not a core rebuilt from the sources they are about
# to regenerate: a new proto field is named by generated Rust before the prost code has it.
TOOLS = @test -f $(TEST_STAMP) || $(MAKE) $(TEST_STAMP)
tables:
	$(TOOLS)
	$(BIN)/python -m tables.gen
	$(MAKE) proto

## proto: regenerate the committed stubs from proto/: Python, Go (needs go) and the core's prost code
proto:
	$(TOOLS)
	$(BIN)/python scripts/gen_proto.py
	bash scripts/gen_go_stubs.sh
	cd core && LOOPWARDEN_REGENERATE=1 cargo test --locked -p loopwarden-protogen -q

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
