"""The table and the plots of ``pdlab sim``'s grid (the figures of
:mod:`pdlab.sim.report`): one row per (routing, design), every value whole at the width it
is printed at; D's step time and TPOT as figures. vLLM 0.33.0 has no counterpart.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from pdlab.catalog import text
from pdlab.sim.profiles import DeviceProfile
from pdlab.sim.simulator import SimResult
from pdlab.ui.fmt import FitTable

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn: the table needs none
    from matplotlib.figure import Figure


def _ms(r: dict[str, Any], name: str) -> str:
    p50, top, how = r[f"{name}_p50_s"], r[f"{name}_p99_s"], r[f"{name}_tail"]

    def f(s: float) -> str:  # three figures, without an exponent
        ms = 1e3 * s
        return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"

    return f"{f(p50)} / {f(top)}" + ("" if how == "p99" else " max")


def sim_table(rows: list[dict[str, Any]], profile: DeviceProfile, lang: str = "en") -> FitTable:
    """One row per (routing, design); every value whole at the width it is printed at."""
    k = rows[0]["num_speculative_tokens"] if rows else 0
    backends = ", ".join(dict.fromkeys(f"{r['mla_backend']}" for r in rows))
    key = f"sim_source_{profile.name}"
    source = text(lang, key, on=profile.measured_on, shape=profile.measured_shape)
    caption = text(lang, "sim_caption", source=source, backend=backends)
    caption += deployment_caption(rows, profile, lang)
    if k:
        caption += text(lang, "sim_caption_mtp", k=k, a=f"{rows[0]['acceptance_rate']:.0%}")
    if k and "weight_dtype" in rows[0]:
        caption += text(lang, "sim_caption_mtp_weights")
    title = escape(text(lang, "sim_title", gpu=profile.name))
    t = FitTable(title=title, caption=escape(caption))
    tail_word = "p99" if all(r["tpot_tail"] == "p99" for r in rows) else "max"
    for key in ("sim_routing", "sim_design"):
        t.add_column(escape(text(lang, key, tail=tail_word)))
    for key in ("sim_tpot", "sim_ttft", "sim_t2t", "sim_tokens", "sim_mixed"):
        t.add_column(escape(text(lang, key, tail=tail_word)), justify="right")
    for r in rows:
        times = (_ms(r, "tpot"), _ms(r, "ttft_d"), _ms(r, "t2t_d"))
        counts = (f"{r['tokens_per_step']:.2f}", f"{100 * r['non_uniform_share']:.0f}%")
        t.add_row(text(lang, f"sim_r_{r['routing']}"), r["design"], *times, *counts)
    return t


def deployment_caption(rows: list[dict[str, Any]], profile: DeviceProfile, lang: str) -> str:
    """The caption's sentences on how the model was deployed (a model with experts:
    :func:`pdlab.sim.report.deployment_figures`); empty for a one-GPU model."""
    r = rows[0] if rows else {}
    if "weight_dtype" not in r:
        return ""
    layers = {"dense": r["dense_layers"], "moe": r["layers"] - r["dense_layers"]}
    experts = {"experts": r["routed_experts"], "k": r["top_k"], "per": r["experts_per_gpu"]}
    gpus = {"gpus": r["num_gpus"], "redundant": r["redundant_experts"], "dtype": r["weight_dtype"]}
    gb, link = f"{r['weight_bytes_per_gpu'] / 1e9:.0f}", f"{profile.link_bytes_per_s / 1e9:g}"
    overlap = text(lang, "sim_caption_overlap_" + ("on" if r["overlap_all_to_all"] else "off"))
    peak = f"{profile.peak_flops / 1e12:,.0f}"
    said = {"gb": gb, "link": link, "overlap": overlap, "peak": peak}
    return text(lang, "sim_caption_moe", **layers, **experts, **gpus, **said)


def plot_step_times(runs: dict[tuple[str, str], SimResult], design: str) -> Figure:
    """Step time over simulated time under each routing, for one design."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.2))
    ax = fig.subplots()
    for (routing, d), res in runs.items():
        if d == design:
            ax.plot([s.t for s in res.steps], [1e3 * s.time_s for s in res.steps], label=routing)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("step time (ms)")
    ax.set_title(f"D's step time, design {design}")
    ax.legend()
    fig.tight_layout()
    return fig


def plot_tpot(rows: list[dict[str, Any]]) -> Figure:
    """TPOT p50 and its tail (p99, or max over fewer samples) per (routing, design)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.2))
    ax = fig.subplots()
    labels = [f"{r['routing']}\n{r['design']}" for r in rows]
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [1e3 * r["tpot_p50_s"] for r in rows], 0.4, label="p50")
    tails = {r["tpot_tail"] for r in rows}
    label = "p99" if tails == {"p99"} else "p99 or max"
    ax.bar([x + 0.2 for x in xs], [1e3 * r["tpot_p99_s"] for r in rows], 0.4, label=label)
    ax.set_xticks(list(xs), labels, fontsize=6)
    ax.set_ylabel("TPOT (ms)")
    ax.legend()
    fig.tight_layout()
    return fig


def write_plots(
    rows: list[dict[str, Any]], runs: dict[tuple[str, str], SimResult], out: Path
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    figs = {
        f"sim_step_time_{d}.png": plot_step_times(runs, d)
        for d in dict.fromkeys(d for _, d in runs)
    }
    figs["sim_tpot.png"] = plot_tpot(rows)
    for name, fig in figs.items():
        fig.savefig(out / name, dpi=110)
    return [out / name for name in figs]
