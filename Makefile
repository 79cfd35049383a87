# pdlab: every target creates the environment it needs, so a fresh clone needs one command.
#   make tour        the guided walkthrough (the project's main job)
#   make test        the whole test suite (what CI runs)
#   make test-fast   the suite without the slow, browser and notebook tests
#   make lint        ruff check and ruff format --check
#   make notebooks   notebooks 05-08 from their bilingual sources, then every .ipynb from its .py
#   make lab         JupyterLab on the notebooks (LAB_ARGS="--port 8890 --ip 0.0.0.0 --notebook 05")
#   make doctor      what works on this machine
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# Set PDLAB_TORCH to install a torch build first, with any pip options: CI uses
# torch==2.13.0 (a CPU build on its disk); on Linux without a GPU,
#   make test PDLAB_TORCH="torch --index-url https://download.pytorch.org/whl/cpu"
# avoids the multi-GB CUDA build. Unset, torch resolves from pyproject.toml as usual.
PDLAB_TORCH ?=
LAB_ARGS    ?=
# pytest-xdist workers: one per core (at most 4; each loads torch). JOBS=0 runs in-process.
# loadgroup keeps the browser tests on one worker, one JupyterLab + Chromium at a time.
JOBS        ?= auto
PYTEST       = $(BIN)/python -m pytest -n $(JOBS) --maxprocesses 4 --dist loadgroup
FAST_MARKERS = not slow and not browser and not notebooks

.PHONY: tour test test-fast lint notebooks lab doctor bench env clean

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
	if [ -n "$(PDLAB_TORCH)" ]; then $$PIP install $(PDLAB_TORCH) || exit 1; fi; \
	$$PIP install -e ".[dev]"
	touch $(BIN)/pdlab

env: $(BIN)/pdlab

tour: env
	$(BIN)/pdlab tour

doctor: env
	$(BIN)/pdlab doctor

test: env
	$(PYTEST)

test-fast: env
	$(PYTEST) -m "$(FAST_MARKERS)"

notebooks: env
	$(BIN)/python -m pdlab.ui.bilingual
	$(BIN)/jupytext --sync notebooks/0*.py

lint: env
	$(BIN)/python -m ruff check .
	$(BIN)/python -m ruff format --check .

bench: env
	$(BIN)/pdlab bench kernels

lab: env
	$(BIN)/pdlab lab $(LAB_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
