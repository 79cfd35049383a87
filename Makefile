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
#   make test-tritons   the kernel tests under each triton pyproject.toml admits
#                       (TRITON_VERSIONS, each in its own venv, .venv-triton-<version>)
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
# make test-tritons: every triton that pyproject.toml admits (keep the two in step), each in
# .venv-triton-<version> with torch chosen as for .venv, except that Linux always takes the
# CPU build (the checks need no GPU, and PyPI's Linux torch pins one triton). The tests:
# the ahead-of-time builds for sm_80 and sm_90 (no spills) and the kernels' numerics.
TRITON_VERSIONS ?= 3.8.0 3.9.0
TRITON_TESTS    ?= tests/engine/test_kernels_*.py

.PHONY: tour test test-fast test-upstream test-tritons lint notebooks lab doctor bench env clean

# $(call venv_pip,VENV): the shell that sets PIP for VENV. A venv made by `uv venv` has no
# pip: install with uv's pip when uv is on PATH, else bootstrap pip into the venv (ensurepip
# ships with Python).
define venv_pip
if $(1)/bin/python -m pip --version >/dev/null 2>&1; then \
  PIP="$(1)/bin/python -m pip"; $$PIP install --upgrade pip; \
elif command -v uv >/dev/null 2>&1; then \
  PIP="env VIRTUAL_ENV=$(abspath $(1)) uv pip"; \
else \
  $(1)/bin/python -m ensurepip --upgrade && PIP="$(1)/bin/python -m pip"; \
fi
endef

# $(call install_torch,VENV,WHEN): the shell that puts torch into VENV first, with $$PIP
# set: PDLAB_TORCH, else on Linux the CPU build from CPU_INDEX when WHEN is "always" or no
# NVIDIA GPU is here (see PDLAB_TORCH above), else nothing (pip resolves it later).
define install_torch
if [ -n "$(PDLAB_TORCH)" ]; then \
  $$PIP install $(PDLAB_TORCH) || exit 1; \
elif [ "$$(uname -s)" = Linux ] && ! $(1)/bin/python -c "import torch" 2>/dev/null \
    && { [ "$(2)" = always ] || { ! command -v nvidia-smi >/dev/null 2>&1 \
    && [ ! -e /proc/driver/nvidia ]; }; }; then \
  if $(1)/bin/python -c "import sys, urllib.request as u; \
      u.urlopen(u.Request(sys.argv[1] + '/torch/', method='HEAD'), timeout=15)" \
      "$(CPU_INDEX)" >/dev/null 2>&1; then \
    echo "make: installing the CPU build of torch from $(CPU_INDEX) into $(1)"; \
    $$PIP install torch --index-url "$(CPU_INDEX)" || exit 1; \
  else \
    echo "make: $(CPU_INDEX) cannot be reached: torch comes from the default index (on Linux the CUDA build, several GB)"; \
  fi; \
fi
endef

$(BIN)/pdlab: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(call venv_pip,$(VENV)); \
	$(call install_torch,$(VENV),no-gpu); \
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

.PRECIOUS: .venv-triton-%/.installed
# One venv per triton, stamped once the version pip kept is the one asked for (a version
# outside pyproject.toml's range fails pip's resolution, with pip's own words).
.venv-triton-%/.installed: pyproject.toml
	test -x .venv-triton-$*/bin/python || $(PYTHON) -m venv .venv-triton-$*
	@echo "make test-tritons: installing triton $* into .venv-triton-$*"
	$(call venv_pip,.venv-triton-$*); \
	$(call install_torch,.venv-triton-$*,always); \
	$$PIP install "triton==$*" -e ".[dev]" || { \
	  echo "make test-tritons: pip could not install triton $* with torch and pdlab" >&2; \
	  echo "  (outside pyproject.toml's range? PyPI's Linux torch pins its own triton:" >&2; \
	  echo "  PDLAB_TORCH can name a CPU build of torch)" >&2; exit 1; }; \
	.venv-triton-$*/bin/python -c "import sys, triton; v = triton.__version__; \
	  sys.exit(0 if v == sys.argv[1] else f'make test-tritons: asked for triton {sys.argv[1]}, pip kept {v}')" "$*"
	touch $@

# Every version's tests run, and then the target fails if any of them failed. Off Linux
# there is no triton wheel to install, and nothing to run.
TRITON_VENVS = $(if $(filter Linux,$(shell uname -s)),\
               $(foreach v,$(TRITON_VERSIONS),.venv-triton-$(v)/.installed))
test-tritons: $(TRITON_VENVS)
	@if [ "$$(uname -s)" != Linux ]; then \
	  echo "make test-tritons: triton ships Linux wheels only; nothing to test here"; exit 0; fi; \
	failed=""; \
	for v in $(TRITON_VERSIONS); do \
	  py=.venv-triton-$$v/bin/python; start=$$(date +%s); \
	  echo "make test-tritons: triton $$v, torch $$($$py -c 'import torch; print(torch.__version__)')"; \
	  $$py -m pytest -n $(JOBS) --maxprocesses 4 --dist loadgroup --no-loadscope-reorder \
	    $(TRITON_TESTS) || failed="$$failed $$v"; \
	  echo "make test-tritons: triton $$v took $$(( $$(date +%s) - start )) s"; \
	done; \
	if [ -n "$$failed" ]; then echo "make test-tritons: failed under triton$$failed" >&2; exit 1; fi

clean:
	rm -rf $(VENV) $(UPSTREAM_VENV) .venv-triton-* build dist *.egg-info .pytest_cache \
	  .ruff_cache .hypothesis
