"""Every notebook in a real browser: JupyterLab 4 + ipywidgets 8 + headless Chromium.

Each notebook is opened in a throwaway JupyterLab, run top to bottom through JupyterLab's own
"Run All Cells", and checked for errors and for widgets that failed to render ("Error
displaying widget", a model not found, a widget stuck loading). Notebook 5's widgets are
also driven by hand in ``test_browser_pd.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nbtools import lab_page, run_all_cells, widget_errors

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb"))


def test_all_six_notebooks_are_covered() -> None:
    assert len(NOTEBOOKS) >= 6


@pytest.mark.browser
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[Path(n).stem for n in NOTEBOOKS])
def test_notebook_runs_and_renders_its_widgets(notebook: str, tmp_path: Path) -> None:
    with lab_page(ROOT, failure_screenshot=tmp_path / "failure.png", timeout=90) as lp:
        lp.open(notebook, timeout=90)
        run_all_cells(lp.page, timeout=240)
        assert widget_errors(lp.page) == []
