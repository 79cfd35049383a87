"""Every notebook in a real browser, once: JupyterLab 4 + ipywidgets 8 + headless Chromium.

One throwaway JupyterLab and one Chromium serve the whole module (starting them took a third
of each test), and one Lab page: the notebooks are opened in it one after another, as a
reader does (loading Lab afresh took half of what was left; a failed test closes the page,
and the next one loads Lab again). Each notebook gets a folder of its own under the
server's root, and it is closed and its kernel shut down when its test ends. Each is opened,
run top to bottom through JupyterLab's own "Run All Cells", and checked for errors and for
widgets that failed to render ("Error displaying widget", a model not found, a widget stuck
loading). In the same run, notebook 5's
P/D explorer is then driven by hand, the way a reader would: ``prefill_context_parallel_size``
and the prompt length change through the widgets, and the displayed routing decision and
``N - 1`` follow.
A screenshot of the explorer is saved outside the repo (``$PDLAB_SCREENSHOT_DIR`` or
``$TMPDIR/pdlab-screenshots``) and its path printed.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from nbtools import (
    browser_lab,
    lab_kernels,
    read_output_text,
    run_all_cells,
    set_dropdown,
    set_slider,
    wait_for_output_text,
    widget_errors,
)

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb"))
PD_EXPLORER = "notebooks/05_pd_decode_side.ipynb"


def test_every_notebook_is_covered_in_both_languages() -> None:
    assert len(NOTEBOOKS) >= 10 and PD_EXPLORER in NOTEBOOKS
    assert len([n for n in NOTEBOOKS if n.endswith("_zh.ipynb")]) >= 5


def _screenshot_path() -> Path:
    folder = Path(
        os.environ.get("PDLAB_SCREENSHOT_DIR") or Path(tempfile.gettempdir()) / "pdlab-screenshots"
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "05_pd_explorer.png"


def _d_step_re(n: int) -> re.Pattern:
    return re.compile(
        rf"query_len = 1, num_computed_tokens = N-1 = {n - 1}, "
        rf"num_prompt_tokens = N = {n}\b"
    )


def drive_pd_explorer(page) -> None:
    """Notebook 5's explorer follows its prefill_context_parallel_size and prompt length."""
    assert read_output_text(page, "pdlab-error") == ""

    # The notebook opens the explorer at N = 11, block size 4, upstream's defaults.
    assert _d_step_re(11).search(read_output_text(page, "pdlab-d-step"))
    route = read_output_text(page, "pdlab-route")
    assert "is_prefilling = 10 < 11 = True" in route
    assert "treat_short_extends_as_decodes = True" in route
    assert route.endswith("forward_mqa")
    kernels = read_output_text(page, "pdlab-kernels")
    assert "mla_decode" in kernels and "gather_cache" not in kernels
    assert "N-1 = 10" in read_output_text(page, "pdlab-cost")
    assert "equal ✓" in read_output_text(page, "pdlab-tokens")

    set_dropdown(page, "prefill_context_parallel_size", "2")
    wait_for_output_text(
        page,
        "pdlab-route",
        re.compile(r"treat_short_extends_as_decodes = False .*forward_mha$"),
    )
    assert "gather_cache" in read_output_text(page, "pdlab-kernels")

    set_slider(page, "prompt length", 40)
    wait_for_output_text(page, "pdlab-d-step", _d_step_re(40))
    assert "N-1 = 39" in read_output_text(page, "pdlab-cost")
    assert "equal ✓" in read_output_text(page, "pdlab-tokens")
    assert read_output_text(page, "pdlab-route").endswith("forward_mha")

    set_dropdown(page, "prefill_context_parallel_size", "1")
    wait_for_output_text(
        page,
        "pdlab-route",
        re.compile(r"is_prefilling = 39 < 40 = True.*forward_mqa$"),
    )
    assert widget_errors(page) == []
    assert read_output_text(page, "pdlab-error") == ""

    explorer = page.locator(".jp-OutputArea-output").filter(has=page.locator(".pdlab-route"))
    shot = _screenshot_path()
    explorer.screenshot(path=str(shot))
    print(f"screenshot of notebook 5's explorer: {shot}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One JupyterLab (its root a temp folder, never the checkout) and one Chromium for every
    test here; skips, or fails under PDLAB_REQUIRE_BROWSER, when there is no browser."""
    with browser_lab(tmp_path_factory.mktemp("lab-root"), timeout=90) as shared:
        yield shared


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.xdist_group("browser")  # one JupyterLab + Chromium for all of them under `make test`
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[Path(n).stem for n in NOTEBOOKS])
def test_notebook_runs_and_renders_its_widgets(notebook: str, lab, tmp_path: Path) -> None:
    folder = Path(notebook).stem  # this notebook's own folder: it sees no other test's files
    (lab.root_dir / folder).mkdir()
    rel = f"{folder}/{Path(notebook).name}"
    shutil.copyfile(ROOT / notebook, lab.root_dir / rel)
    viewport = (1400, 1800) if notebook == PD_EXPLORER else (1280, 1000)
    shot = tmp_path / "failure.png"
    with lab.notebook(rel, folder, failure_screenshot=shot, viewport=viewport, timeout=90) as lp:
        assert len(lab_kernels(lab.base_url, lab.token, under=folder)) == 1
        run_all_cells(lp.page, timeout=240)
        assert widget_errors(lp.page) == []
        if notebook == PD_EXPLORER:
            drive_pd_explorer(lp.page)
    # closing the notebook shut its kernel down: none pile up on the shared server
    assert lab_kernels(lab.base_url, lab.token, under=folder) == []


def _one_cell_notebook(path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("answer = 6 * 7\nanswer")]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.xdist_group("browser")
def test_a_failed_notebook_leaves_the_next_one_a_fresh_page(lab, tmp_path: Path) -> None:
    """The shared Lab page does not outlive a failure: it is closed with a screenshot, the
    notebook's kernel is shut down, and the next notebook loads Lab on a fresh page."""
    _one_cell_notebook(lab.root_dir / "fails" / "one.ipynb")
    _one_cell_notebook(lab.root_dir / "after" / "one.ipynb")
    shot = tmp_path / "failure.png"
    with pytest.raises(RuntimeError, match="the block failed"):
        with lab.notebook("fails/one.ipynb", "fails", failure_screenshot=shot) as lp:
            failed = lp.page
            assert len(lab_kernels(lab.base_url, lab.token, under="fails")) == 1
            raise RuntimeError("the block failed")
    assert failed.is_closed() and shot.stat().st_size > 0
    assert lab_kernels(lab.base_url, lab.token, under="fails") == []
    with lab.notebook("after/one.ipynb", "after") as lp:
        assert lp.page is not failed
        run_all_cells(lp.page, timeout=120)
        assert widget_errors(lp.page) == []
        assert lp.page.locator(".jp-OutputArea-output").last.inner_text().strip() == "42"
    assert lab_kernels(lab.base_url, lab.token, under="after") == []
