"""The matplotlib views draw what the trace (or the cost model) holds: checked on the Figure
objects, their titles, axis labels, lines and patches."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.patches import Rectangle

from pdlab.catalog import text
from pdlab.demo import Demo, run_demo
from pdlab.engine.config import ModelConfig
from pdlab.sim.kernel_costs import decode_path_cost, prefill_path_cost
from pdlab.ui.plots import plot_block_table, plot_num_computed_tokens, plot_path_costs, save_all


@pytest.fixture(scope="module")
def run() -> Demo:
    # Main run with the default routing; other_trace holds the same request under PCP = 2.
    return run_demo("hello block table", block_size=4, max_tokens=3, compare=True)


def test_block_table_draws_ds_blocks(run: Demo) -> None:
    fig = plot_block_table(run.trace, "D")
    ax = fig.axes[0]
    first = next(e for e in run.trace.filter("step", "D") if e["scheduled"])
    blocks = first["scheduled"][0]["block_ids"]
    assert ax.get_title() == text("en", "plot_bt_title", inst="D", step=first["step"])
    assert "block_size=4" in ax.get_xlabel() and ax.get_ylabel() == "request"
    assert len([p for p in ax.patches if isinstance(p, Rectangle)]) == len(blocks)
    assert [t.get_text() for t in ax.texts] == [str(b) for b in blocks]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["req-0"]


def test_block_table_of_p(run: Demo) -> None:
    ax = plot_block_table(run.trace, "P").axes[0]
    n = run.trace.first("add_request", "P")["num_prompt_tokens"]
    assert "instance P" in ax.get_title()
    assert len(ax.patches) == -(-n // 4)


def test_num_computed_tokens_has_a_line_per_request(run: Demo) -> None:
    fig = plot_num_computed_tokens(run.trace)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "engine step"
    assert ax.get_ylabel().startswith("num_computed_tokens")
    series: dict[str, list[tuple[int, int]]] = {}
    for ev in run.trace.filter("step"):
        for r in ev["scheduled"]:
            series.setdefault(f"{ev['instance']}:{r['req_id']}", []).append(
                (ev["step"], r["num_computed_tokens_after"])
            )
    labelled = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    assert set(labelled) == set(series) == {"P:req-0", "D:req-0", "local:local-0", "local:local-1"}
    for label, pts in series.items():
        assert list(labelled[label].get_xdata()) == [p[0] for p in pts]
        assert list(labelled[label].get_ydata()) == [p[1] for p in pts]
    # one line per request, one marker per step
    assert len(ax.get_lines()) == sum(1 + len(p) for p in series.values())
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(series)


def test_markers_show_the_path_of_ds_first_step(run: Demo) -> None:
    # Under PCP = 2 D's one-token step goes to forward_mha: a hollow marker.
    for trace, fill in ((run.other_trace, "none"), (run.trace, "full")):
        ax = plot_num_computed_tokens(trace, "D").axes[0]
        markers = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
        assert markers[0].get_fillstyle() == fill
        assert all(m.get_fillstyle() == "full" for m in markers[1:])


def test_path_costs_follow_the_cost_model() -> None:
    cfg = ModelConfig.deepseek_v3()
    contexts = [1024, 4096, 16384]
    fig = plot_path_costs(cfg, contexts)
    flops_ax, bytes_ax = fig.axes
    assert "FLOPs" in flops_ax.get_title() and "bytes" in bytes_ax.get_title()
    assert flops_ax.get_ylabel() == "FLOPs per layer"
    assert bytes_ax.get_ylabel() == "bytes moved per layer"
    for ax, attr in ((flops_ax, "flops"), (bytes_ax, "bytes")):
        assert ax.get_xscale() == ax.get_yscale() == "log"
        assert ax.get_xlabel().startswith("context length")
        pre, dec = ax.get_lines()
        assert list(pre.get_xdata()) == contexts
        np.testing.assert_allclose(
            pre.get_ydata(), [getattr(prefill_path_cost(cfg, c), attr) for c in contexts]
        )
        np.testing.assert_allclose(
            dec.get_ydata(), [getattr(decode_path_cost(cfg, c), attr) for c in contexts]
        )
        assert "forward_mha" in pre.get_label() and "forward_mqa" in dec.get_label()


def test_save_all_writes_three_pngs(run: Demo, tmp_path) -> None:
    paths = save_all(run.trace, ModelConfig.deepseek_v3(), tmp_path / "out")
    assert [p.name for p in paths] == [
        "block_table.png",
        "num_computed_tokens.png",
        "path_costs.png",
    ]
    for p in paths:
        assert p.read_bytes()[:4] == b"\x89PNG"


def test_a_point_two_instances_share_stays_visible(run: Demo) -> None:
    """P and the colocated engine both reach num_computed_tokens = N in step 1: the marker
    drawn later must be smaller (a ring inside the other), not the same size on top."""
    ax = plot_num_computed_tokens(run.trace).axes[0]
    at: dict[tuple[int, int], list[str]] = {}
    for r in run.trace.step_rows():
        at.setdefault((r["step"], r["num_computed_tokens_after"]), []).append(r["instance"])
    shared = [xy for xy, insts in at.items() if len(set(insts)) > 1]
    assert shared, "the demo should have a point two instances share"
    for x, y in shared:
        marks = [
            ln
            for ln in ax.get_lines()
            if ln.get_label().startswith("_")
            and list(ln.get_xdata()) == [x]
            and list(ln.get_ydata()) == [y]
        ]
        marks.sort(key=lambda ln: ln.get_zorder())
        sizes = [ln.get_markersize() for ln in marks]
        assert len(marks) >= 2 and sizes == sorted(sizes, reverse=True), sizes
        assert len(set(sizes)) == len(sizes), sizes
