"""Shared test set-up.

Import pdlab.kernels before anything else can import triton: the backend module sets
TRITON_INTERPRET on a machine without a GPU, and triton reads it when it is first imported.

Markers (pyproject.toml): ``triton`` tests skip where triton is not installed (macOS, or a
Linux venv without it), so ``make test`` is green there too; ``slow``, ``browser`` and
``notebooks`` are what ``make test-fast`` leaves out.

Every test must pass under pytest-xdist (``make test`` runs one worker per core): no fixed
ports, no shared files outside ``tmp_path``, no order between tests.
"""

import os

import pytest
import torch

import pdlab.kernels  # noqa: F401
from pdlab.kernels.backend import triton_installed

# Under pytest-xdist (`make test`), the workers share the cores: give each its share of torch
# threads instead of every worker starting one per core.
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _workers > 1:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // _workers))
if "PYTEST_XDIST_WORKER" in os.environ:
    # xdist's workers start with COLUMNS=80 and LINES=24, which a plain run does not have
    # (pdlab's consoles take COLUMNS as "a terminal of that width" and narrow their tables).
    for _var in ("COLUMNS", "LINES"):
        os.environ.pop(_var, None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if triton_installed():
        return
    skip = pytest.mark.skip(reason="needs triton, which is not installed here")
    for item in items:
        if item.get_closest_marker("triton") is not None:
            item.add_marker(skip)
