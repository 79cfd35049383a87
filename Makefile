# pdlab: every target creates the environment it needs, so a fresh clone needs one command.
#   make tour        the guided walkthrough (the project's main job)
#   make test        the whole test suite
#   make lab         JupyterLab on the notebooks
#   make doctor      what works on this machine
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# Set PDLAB_TORCH to pin the torch build pip installs first (CI uses torch==2.13.0, the CPU
# build on its disk); unset, pip resolves torch from pyproject.toml as usual.
PDLAB_TORCH ?=

.PHONY: tour test lab doctor bench env clean

$(BIN)/pdlab: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	if [ -n "$(PDLAB_TORCH)" ]; then $(BIN)/python -m pip install "$(PDLAB_TORCH)"; fi
	$(BIN)/python -m pip install -e ".[dev]"
	touch $(BIN)/pdlab

env: $(BIN)/pdlab

tour: env
	$(BIN)/pdlab tour

doctor: env
	$(BIN)/pdlab doctor

test: env
	$(BIN)/python -m pytest

bench: env
	$(BIN)/pdlab bench kernels

lab: env
	$(BIN)/jupyter lab notebooks/

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
