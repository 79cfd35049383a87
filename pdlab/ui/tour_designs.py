"""The tour's closing chapter (7): could D skip the recompute, and does it matter?

The tour's prompt under the four first-token designs (:mod:`pdlab.ui.designs_view`), then
``pdlab sim``'s grid on the H200 profile and the same under MTP (:mod:`pdlab.ui.tour_sims`
starts both before torch loads), and the answer in one paragraph with their numbers.
:func:`save_plots` writes the figures for ``pdlab tour --plots DIR``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from pdlab.demo import Demo
from pdlab.engine.config import CacheConfig, ModelConfig
from pdlab.sim.background import BackgroundGrids
from pdlab.sim.profiles import device_profile
from pdlab.sim.report import run_grid
from pdlab.sim.simulator import SimConfig
from pdlab.ui import fmt
from pdlab.ui.designs_view import compare_designs, designs_table
from pdlab.ui.sim_report import sim_table, write_plots
from pdlab.ui.tour_kv import printer

# MTP_*: re-exported for notebook 07
from pdlab.ui.tour_sims import MTP_BASE, MTP_DESIGNS, MTP_ROUTINGS, SIM_GRIDS, sim_rows  # noqa: F401

GPU = "H200"
# One run of the designs per prompt and block size, for the chapter and its plots; the
# last few are kept (a notebook or a test asks again for the prompt it showed before).
_RUNS: dict[tuple, Any] = {}
_KEEP = 4


def _runs(demo: Demo) -> tuple[list, dict]:
    key = (tuple(demo.prompt_ids), demo.block_size)
    if key not in _RUNS:
        traces: dict[str, Any] = {}
        cache = CacheConfig(block_size=demo.block_size)
        rows = compare_designs([demo.prompt_ids], demo.cfg, cache, traces=traces)
        while len(_RUNS) >= _KEEP:
            del _RUNS[next(iter(_RUNS))]  # the oldest
        _RUNS[key] = rows, traces
    return _RUNS[key]


def answer_values(
    sim_rows: list[dict[str, Any]], mtp_rows: list[dict[str, Any]], base: SimConfig | None = None
) -> dict:
    """The numbers the closing paragraph quotes, read off the simulation's rows (run
    with ``base``, by default ``SimConfig()``) and those of the same grid under MTP
    (:data:`MTP_BASE`)."""
    base = base or SimConfig()
    r = {(x["routing"], x["design"]): x for x in sim_rows}
    m = {(x["routing"], x["design"]): x for x in mtp_rows}
    s = fmt.seconds
    v2, pcp, dcp = r["v2", "recompute"], r["pcp", "recompute"], r["dcp", "recompute"]
    mv2 = m["v2", "recompute"]
    return {
        "gpu": GPU,
        "gpus": v2["num_gpus"],
        "dtype": v2.get("weight_dtype", "bf16"),
        "batch": base.batch_size,
        "ctx": fmt.tokens(base.context),
        "rate": f"{base.arrival_rate:g}",
        "plen": fmt.tokens(base.prompt_len),
        "steps": v2["steps"],
        "v2_p50": s(v2["tpot_p50_s"]),
        "v2_p99": s(v2["tpot_p99_s"]),
        "v2_tail": v2["tpot_tail"],
        "pcp_tail": pcp["tpot_tail"],
        "rc_t2t": s(v2["t2t_d_p50_s"]),
        "ft_t2t": s(r["v2", "first_token"]["t2t_d_p50_s"]),
        "rc_ttft": s(v2["ttft_d_p50_s"]),
        "hs_ttft": s(r["v2", "hidden_state"]["ttft_d_p50_s"]),
        "pcp_mixed": f"{100 * pcp['non_uniform_share']:.0f}%",
        "pcp_p99": s(pcp["tpot_p99_s"]),
        "pcp_x": fmt.ratio(pcp["tpot_p99_s"], v2["tpot_p99_s"]),
        "pcp_ttft": s(pcp["ttft_d_p50_s"]),
        "ft_pcp_p99": s(r["pcp", "first_token"]["tpot_p99_s"]),
        "hs_pcp_p99": s(r["pcp", "hidden_state"]["tpot_p99_s"]),
        "dcp_backend": dcp["mla_backend"],
        "dcp_t": dcp["reorder_batch_threshold"],
        "k": mv2["num_speculative_tokens"],
        "acc": f"{mv2['acceptance_rate']:.0%}",
        "mtp_step": s(mv2["step_p50_s"]),
        "mtp_tokens": f"{mv2['tokens_per_step']:.2f}",
        "mtp_p50": s(mv2["tpot_p50_s"]),
        "mtp_ttft": s(mv2["ttft_d_p50_s"]),
        "mtp_pcp_mixed": f"{100 * m['pcp', 'recompute']['non_uniform_share']:.0f}%",
        "link": f"{100 * v2['link_bound_share']:.0f}%",
        "mtp_link": f"{100 * mv2['link_bound_share']:.0f}%",
    }


def chapter7(c: Console, demo: Demo, lang: str, sims: BackgroundGrids | None = None) -> None:
    """The chapter; ``sims``: its grids, started earlier (``pdlab/ui/tour_sims.py``)."""
    rows, _ = _runs(demo)
    grid, mtp_rows = sim_rows(sims)
    profile, put = device_profile(GPU), printer(c, lang)
    put("ch7_intro")
    c.print(designs_table(rows, GPU, lang=lang))
    c.print(sim_table(grid, profile, lang))
    c.print(sim_table(mtp_rows, profile, lang))
    put("ch7_answer", **answer_values(grid, mtp_rows))


def save_plots(demo: Demo, out: Path, lang: str = "en") -> list[Path]:
    from pdlab.ui.plots_designs import plot_cache_grid, plot_timeline  # matplotlib

    _, traces = _runs(demo)
    profile, v3 = device_profile(GPU), ModelConfig.deepseek_v3()
    sim_rows, sim_runs = run_grid(SIM_GRIDS[0].base, v3, profile, SIM_GRIDS[0].gpu)
    out.mkdir(parents=True, exist_ok=True)
    figs = {
        "designs_cache_grid.png": plot_cache_grid(traces, "req-0", lang),
        "designs_timeline.png": plot_timeline(traces["recompute"], "req-0", lang),
    }
    for name, fig in figs.items():
        fig.savefig(out / name, dpi=110)
    return [out / n for n in figs] + write_plots(sim_rows, sim_runs, out)
