"""Notebook 5's P/D explorer in a real browser: JupyterLab 4 + ipywidgets 8 + headless Chromium.

Opens ``notebooks/05_pd_decode_side.ipynb`` in a throwaway JupyterLab (``tests/nbtools.py``),
runs every cell, checks that every widget rendered, then changes prefill_context_parallel_size
and the prompt length through the widgets, the way a reader would, and checks that the displayed
routing decision and ``N - 1`` follow. A screenshot of the explorer is saved outside the repo
(``$PDLAB_SCREENSHOT_DIR`` or ``$TMPDIR/pdlab-screenshots``) and its path printed.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

import pytest
from nbtools import (
    lab_page,
    read_output_text,
    run_all_cells,
    set_dropdown,
    set_slider,
    wait_for_output_text,
    widget_errors,
)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "notebooks/05_pd_decode_side.ipynb"
BOUND_S = 300  # server start, run all cells, four widget changes, screenshot


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


@pytest.mark.browser
def test_pd_explorer_follows_pcp_and_prompt_length() -> None:
    t0 = time.monotonic()
    with lab_page(ROOT, viewport=(1400, 1800), timeout=90) as lp:
        page = lp.page
        lp.open(NOTEBOOK, timeout=90)
        run_all_cells(page, timeout=240)
        assert widget_errors(page) == []
        assert read_output_text(page, "pdlab-error") == ""

        # The notebook opens the explorer at N = 11, block size 4, upstream's defaults.
        assert _d_step_re(11).search(read_output_text(page, "pdlab-d-step"))
        route = read_output_text(page, "pdlab-route")
        assert "is_prefilling = 10 < 11 = True" in route
        assert "treat_short_extends_as_decodes = True" in route
        assert route.endswith("_forward_decode")
        kernels = read_output_text(page, "pdlab-kernels")
        assert "mla_decode" in kernels and "gather_cache" not in kernels
        assert "N-1 = 10" in read_output_text(page, "pdlab-cost")
        assert "equal ✓" in read_output_text(page, "pdlab-tokens")

        set_dropdown(page, "prefill_context_parallel_size", "2")
        wait_for_output_text(
            page,
            "pdlab-route",
            re.compile(r"treat_short_extends_as_decodes = False .*_forward_prefill$"),
        )
        assert "gather_cache" in read_output_text(page, "pdlab-kernels")

        set_slider(page, "prompt length", 40)
        wait_for_output_text(page, "pdlab-d-step", _d_step_re(40))
        assert "N-1 = 39" in read_output_text(page, "pdlab-cost")
        assert "equal ✓" in read_output_text(page, "pdlab-tokens")

        assert read_output_text(page, "pdlab-route").endswith("_forward_prefill")
        set_dropdown(page, "prefill_context_parallel_size", "1")
        wait_for_output_text(
            page,
            "pdlab-route",
            re.compile(r"is_prefilling = 39 < 40 = True.*_forward_decode$"),
        )
        assert widget_errors(page) == []
        assert read_output_text(page, "pdlab-error") == ""

        explorer = page.locator(".jp-OutputArea-output").filter(has=page.locator(".pdlab-route"))
        shot = _screenshot_path()
        explorer.screenshot(path=str(shot))
        print(f"screenshot of notebook 5's explorer: {shot}")
    seconds = time.monotonic() - t0
    print(f"browser test took {seconds:.0f} s")
    assert seconds < BOUND_S
