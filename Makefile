# The two commands for a fresh machine are `make demo` and `make test`; each sets up what it
# needs first (scripts/bootstrap.sh, then the embedded vLLM-CPU model), idempotently.
SHELL := /bin/bash
PRORL := .venv/bin/prorl
export UV_PYTHON_DOWNLOADS := never
export RAY_AUTH_MODE := disabled

.PHONY: setup model runtime demo test lint bench clean

setup:
	@bash scripts/bootstrap.sh

model: setup
	@$(PRORL) model setup

runtime: setup
	@$(PRORL) sandbox setup

demo: setup model runtime
	@$(PRORL) demo

test: setup model runtime
	@.venv/bin/python -m pytest

lint: setup
	@.venv/bin/ruff check . && .venv/bin/ruff format --check .

bench: setup runtime
	@$(PRORL) bench tools

clean:
	rm -rf .venv .pytest_cache .ruff_cache outputs cache results
