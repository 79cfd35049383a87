"""The notebooks: each runs top to bottom in a real Jupyter kernel within its time bound, each
``.ipynb`` is in sync with its jupytext ``.py`` twin and committed without outputs, and each
opens with what the reader will learn and ends with a computed "check yourself" cell.

Execution uses ``tests/nbtools.py`` (nbclient, this venv's kernel, cwd = ``notebooks/``).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbtools import check_in_sync, execute_notebook

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
EXPECTED = [
    "01_paged_kv_cache",
    "02_scheduler",
    "03_mla_two_forms",
    "04_kernels",
    "05_pd_decode_side",
    "06_pd_decode_side_zh",
]
# Seconds for the whole notebook, kernel start included. Each takes well under 60 s on a
# 2-core CPU; the bound leaves room for a loaded machine.
BOUND_S = 120
CELL_TIMEOUT_S = 180
OPENINGS = ("**What you will learn.**", "**你会学到什么。**")
CHECKS = ("## Check yourself", "## 自测")


def _path(name: str) -> Path:
    return NOTEBOOKS / f"{name}.ipynb"


def test_the_notebooks_are_the_expected_ones() -> None:
    found = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    assert found == EXPECTED
    assert sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.py")) == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_in_sync_with_py_twin(name: str) -> None:
    assert check_in_sync(_path(name)) == []


@pytest.mark.parametrize("name", EXPECTED)
def test_committed_without_outputs(name: str) -> None:
    nb = nbformat.read(_path(name), as_version=4)
    dirty = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and (c.outputs or c.execution_count is not None)
    ]
    assert dirty == [], f"{name}.ipynb has outputs in cells {dirty}: clear them before commit"
    assert nb.metadata.get("jupytext", {}).get("formats") == "ipynb,py:percent"


@pytest.mark.parametrize("name", EXPECTED)
def test_opens_with_goals_and_ends_with_a_computed_check(name: str) -> None:
    nb = nbformat.read(_path(name), as_version=4)
    assert nb.cells[0].cell_type == "markdown"
    assert any(o in nb.cells[0].source for o in OPENINGS)
    *_, question, answer = nb.cells
    assert question.cell_type == "markdown" and any(c in question.source for c in CHECKS)
    assert answer.cell_type == "code" and "assert " in answer.source


@pytest.mark.notebooks
@pytest.mark.parametrize("name", EXPECTED)
def test_executes_top_to_bottom(name: str) -> None:
    nb, seconds = execute_notebook(_path(name), timeout=CELL_TIMEOUT_S)
    print(f"{name}.ipynb executed in {seconds:.1f} s")
    assert seconds < BOUND_S
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert errors == []
