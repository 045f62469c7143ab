# The two set-up commands of the README: `make serve` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test tools proto clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

## serve: create .venv, install, start the daemon on its embedded default config
serve: $(STAMP)
	$(BIN)/loopwarden serve

## test: create .venv, install everything the tests need, run the whole suite
test: $(STAMP) tools
	$(BIN)/python -m pytest

## tools: the non-Python tools the tests drive (helm, kubectl, promtool, prometheus, ...)
tools:
	bash scripts/install-test-tools.sh

## proto: regenerate the committed Python stubs from proto/
proto: $(STAMP)
	$(BIN)/python scripts/gen_proto.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
