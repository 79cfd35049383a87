"""Shared test set-up.

Import pdlab.kernels before anything else can import triton: the backend module sets
TRITON_INTERPRET on a machine without a GPU, and triton reads it when it is first imported.

Markers (pyproject.toml): ``triton`` tests skip where triton is not installed (macOS, or a
Linux venv without it), so ``make test`` is green there too; ``slow``, ``browser`` and
``notebooks`` are what ``make test-fast`` leaves out.
"""

import pytest

import pdlab.kernels  # noqa: F401
from pdlab.kernels.backend import triton_installed


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if triton_installed():
        return
    skip = pytest.mark.skip(reason="needs triton, which is not installed here")
    for item in items:
        if item.get_closest_marker("triton") is not None:
            item.add_marker(skip)
