"""The notebooks: each runs top to bottom in a real Jupyter kernel within its time bound, each
``.ipynb`` is in sync with its jupytext ``.py`` twin and committed without outputs, and each
opens with what the reader will learn, then the same setup cell (pdlab imported, or installed
from the checkout, or one line saying how), and ends with a graded "check yourself" cell.

Execution uses ``tests/nbtools.py`` (nbclient, this venv's kernel, cwd = ``notebooks/``).
A notebook that test_browser_notebooks.py runs top to bottom in the same session (a browser
is there and its test is selected) is not executed here a second time (conftest.py).
"""

from __future__ import annotations

import importlib.util
import site
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbtools import check_in_sync, execute_notebook

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
# Each in English and in Chinese, both rendered from one bilingual source (test_bilingual.py).
EXPECTED = [
    "01_paged_kv_cache",
    "01_paged_kv_cache_zh",
    "02_scheduler",
    "02_scheduler_zh",
    "03_mla_two_forms",
    "03_mla_two_forms_zh",
    "04_kernels",
    "04_kernels_zh",
    "05_pd_decode_side",
    "05_pd_decode_side_zh",
    "07_pd_designs",
    "07_pd_designs_zh",
]
# A cell that runs this long is stuck (each notebook takes well under a minute on a 2-core
# CPU); how long a notebook takes is printed, never asserted (a loaded machine is slower).
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
    # graded: the learner's predictions, judged by pdlab (pdlab/exercises/notebook_checks.py)
    assert answer.cell_type == "code" and "notebook_check(" in answer.source


@pytest.mark.notebooks
@pytest.mark.slow
@pytest.mark.parametrize("name", EXPECTED)
def test_executes_top_to_bottom(name: str) -> None:
    nb, seconds = execute_notebook(_path(name), timeout=CELL_TIMEOUT_S)
    print(f"{name}.ipynb executed in {seconds:.1f} s")
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert errors == []


def _setup_cell(name: str) -> str:
    nb = nbformat.read(_path(name), as_version=4)
    return next(c.source for c in nb.cells if c.cell_type == "code")


def test_every_notebook_opens_with_the_same_setup_cell() -> None:
    sources = {name: _setup_cell(name) for name in EXPECTED}
    assert len(set(sources.values())) == 1, "the setup cells differ: copy one to all"
    cell = sources[EXPECTED[0]]
    assert "def ensure_pdlab(" in cell and cell.rstrip().endswith("ensure_pdlab()")
    # it must run where pdlab is missing, so it cannot import pdlab itself
    assert "import pdlab" not in cell and "from pdlab" not in cell


def _ensure_pdlab():
    """The setup cell's function, defined without running the cell's final call."""
    namespace: dict = {}
    exec(_setup_cell(EXPECTED[0]).rstrip().removesuffix("ensure_pdlab()"), namespace)
    return namespace["ensure_pdlab"]


@pytest.fixture
def calls(monkeypatch) -> list:
    """Records pip runs and site-dir additions instead of doing them."""
    seen: list = []
    monkeypatch.setattr(subprocess, "check_call", lambda cmd: seen.append(("run", cmd)))
    monkeypatch.setattr(site, "addsitedir", lambda d: seen.append(("addsitedir", d)))
    return seen


def _without_pdlab(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pdlab" else real(name, *a)
    )


def test_setup_cell_is_a_no_op_where_pdlab_imports(calls, tmp_path) -> None:
    namespace: dict = {}
    exec(_setup_cell(EXPECTED[0]), namespace)  # the whole cell, its call included
    _ensure_pdlab()(start=tmp_path)
    assert calls == []


def test_setup_cell_installs_from_the_checkout_it_was_opened_from(
    calls, monkeypatch, tmp_path
) -> None:
    (tmp_path / "pdlab").mkdir()
    (tmp_path / "pdlab" / "__init__.py").write_text("")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "notebooks").mkdir()
    _without_pdlab(monkeypatch)
    _ensure_pdlab()(start=tmp_path / "notebooks")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "-e", str(tmp_path.resolve())]
    assert calls[0] == ("run", cmd)
    assert [kind for kind, _ in calls] == ["run", "addsitedir"]


def test_setup_cell_says_in_one_line_how_to_install_elsewhere(calls, monkeypatch, tmp_path):
    _without_pdlab(monkeypatch)
    with pytest.raises(SystemExit) as exc:
        _ensure_pdlab()(start=tmp_path)  # like Colab's /content: no checkout above
    message = str(exc.value.code)
    assert "\n" not in message and "pip install /path/to/pdlab" in message
    assert sys.executable in message and calls == []
