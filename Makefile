# pdlab: every target creates the environment it needs, so a fresh clone needs one command.
#   make tour        the guided walkthrough (the project's main job; TOUR_ARGS="--lang zh")
#   make test        the whole test suite (what CI runs)
#   make test-fast   the suite without the slow, browser and notebook tests
#   make lint        ruff check and ruff format --check
#   make notebooks   every notebook's .py in both languages from its bilingual source, then the .ipynb
#   make lab         JupyterLab on your working copy, ~/pdlab-notebooks (never notebooks/)
#                    LAB_ARGS="--port 8890 --ip 0.0.0.0 --notebook 05"
#   make doctor      what works on this machine
#   make test-upstream  pdlab's scheduler beside vLLM's own (its own venv, .venv-upstream)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# Which torch goes in first. PDLAB_TORCH (any pip arguments; CI: torch==2.13.0, a CPU build
# on its disk) wins. Otherwise, on Linux without an NVIDIA GPU (no nvidia-smi, no
# /proc/driver/nvidia), the CPU build from CPU_INDEX, or, where that index cannot be
# reached, the registry's default with one line saying so; elsewhere (macOS, whose PyPI
# torch is the CPU build; a GPU machine) torch resolves from pyproject.toml as usual.
PDLAB_TORCH ?=
CPU_INDEX   ?= https://download.pytorch.org/whl/cpu
LAB_ARGS    ?=
TOUR_ARGS   ?=
# pytest-xdist workers: one per core (at most 4; each loads torch). JOBS=0 runs in-process.
# loadgroup keeps the browser tests on one worker, one JupyterLab + Chromium at a time;
# without the reorder xdist hands work out in collection order, and tests/conftest.py puts
# the two long groups (browser, AOT) first, so they start on different workers.
JOBS        ?= auto
PYTEST       = $(BIN)/python -m pytest -n $(JOBS) --maxprocesses 4 --dist loadgroup \
               --no-loadscope-reorder
FAST_MARKERS = not slow and not browser and not notebooks
# make test-upstream: vLLM's own scheduler beside pdlab's (tests/upstream, docs/upstream.md),
# in a venv of its own so that vLLM never lands in the one above. vLLM goes in with
# --no-deps (its pins want a CUDA torch); the pure-Python packages its scheduler imports
# are pdlab's `upstream` extra in pyproject.toml.
VLLM_VERSION  ?= 0.33.0
UPSTREAM_VENV ?= .venv-upstream
UPSTREAM_BIN   = $(UPSTREAM_VENV)/bin

.PHONY: tour test test-fast test-upstream lint notebooks lab doctor bench env clean

# A venv made by `uv venv` has no pip: install with uv's pip when uv is on PATH, else
# bootstrap pip into the venv (ensurepip ships with Python).
$(BIN)/pdlab: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	if $(BIN)/python -m pip --version >/dev/null 2>&1; then \
	  PIP="$(BIN)/python -m pip"; $$PIP install --upgrade pip; \
	elif command -v uv >/dev/null 2>&1; then \
	  PIP="env VIRTUAL_ENV=$(abspath $(VENV)) uv pip"; \
	else \
	  $(BIN)/python -m ensurepip --upgrade && PIP="$(BIN)/python -m pip"; \
	fi; \
	if [ -n "$(PDLAB_TORCH)" ]; then \
	  $$PIP install $(PDLAB_TORCH) || exit 1; \
	elif [ "$$(uname -s)" = Linux ] && ! command -v nvidia-smi >/dev/null 2>&1 \
	    && [ ! -e /proc/driver/nvidia ] && ! $(BIN)/python -c "import torch" 2>/dev/null; then \
	  if $(BIN)/python -c "import sys, urllib.request as u; \
	      u.urlopen(u.Request(sys.argv[1] + '/torch/', method='HEAD'), timeout=15)" \
	      "$(CPU_INDEX)" >/dev/null 2>&1; then \
	    echo "make: no NVIDIA GPU here: installing the CPU build of torch from $(CPU_INDEX)"; \
	    $$PIP install torch --index-url "$(CPU_INDEX)" || exit 1; \
	  else \
	    echo "make: $(CPU_INDEX) cannot be reached: torch comes from the default index (on Linux the CUDA build, several GB)"; \
	  fi; \
	fi; \
	$$PIP install -e ".[dev]"
	touch $(BIN)/pdlab

env: $(BIN)/pdlab

tour: env
	$(BIN)/pdlab tour $(TOUR_ARGS)

doctor: env
	$(BIN)/pdlab doctor

test: env
	$(PYTEST)

test-fast: env
	$(PYTEST) -m "$(FAST_MARKERS)"

notebooks: env
	$(BIN)/python -m pdlab.tools.bilingual
	$(BIN)/jupytext --sync notebooks/0*.py

lint: env
	$(BIN)/python -m ruff check .
	$(BIN)/python -m ruff format --check .

bench: env
	$(BIN)/pdlab bench kernels

lab: env
	$(BIN)/pdlab lab $(LAB_ARGS)

# One stamp per vLLM version, so that VLLM_VERSION=0.34.0 reinstalls. The pip output goes to
# a log; a vLLM wheel that cannot be fetched fails with one line naming the log.
$(UPSTREAM_VENV)/.installed-vllm-$(VLLM_VERSION): pyproject.toml
	@start=$$(date +%s); \
	test -x $(UPSTREAM_BIN)/python || $(PYTHON) -m venv $(UPSTREAM_VENV) || exit 1; \
	log=$(UPSTREAM_VENV)/install.log; : > $$log; \
	if $(UPSTREAM_BIN)/python -m pip --version >/dev/null 2>&1; then \
	  PIP="$(UPSTREAM_BIN)/python -m pip"; \
	elif command -v uv >/dev/null 2>&1; then \
	  PIP="env VIRTUAL_ENV=$(abspath $(UPSTREAM_VENV)) uv pip"; \
	else \
	  $(UPSTREAM_BIN)/python -m ensurepip --upgrade >>$$log 2>&1 && PIP="$(UPSTREAM_BIN)/python -m pip"; \
	fi; \
	echo "make test-upstream: installing vLLM $(VLLM_VERSION) into $(UPSTREAM_VENV) (log: $$log)"; \
	if [ -n "$(PDLAB_TORCH)" ]; then \
	  $$PIP install $(PDLAB_TORCH) >>$$log 2>&1 || { echo "make test-upstream: pip could not install PDLAB_TORCH=$(PDLAB_TORCH); see $$log" >&2; exit 1; }; \
	fi; \
	$$PIP install --no-deps "vllm==$(VLLM_VERSION)" >>$$log 2>&1 || { \
	  echo "make test-upstream: could not fetch the vllm==$(VLLM_VERSION) wheel from PyPI or PIP_FIND_LINKS, so vLLM's reference check cannot run (pip's log: $$log)" >&2; exit 1; }; \
	$$PIP install -e ".[dev,upstream]" >>$$log 2>&1 || { echo "make test-upstream: pip could not install pdlab's dev and upstream extras; see $$log" >&2; exit 1; }; \
	touch $@; \
	echo "make test-upstream: installed in $$(( $$(date +%s) - start )) s"

test-upstream: $(UPSTREAM_VENV)/.installed-vllm-$(VLLM_VERSION)
	PDLAB_VLLM_VERSION=$(VLLM_VERSION) $(UPSTREAM_BIN)/python -m pytest -n 0 -m upstream tests/upstream

clean:
	rm -rf $(VENV) $(UPSTREAM_VENV) build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
