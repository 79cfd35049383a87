"""What ``pdlab sim`` reports about a run of :func:`pdlab.sim.simulator.simulate`: TPOT
p50 and its tail (each step gives every running decode ``1 + a + ... + a^K`` tokens, one
without speculative decoding, so a step's time over that is one TPOT sample), D's time to
first token (arrival at D to token 1 known; 0 where P's token is the answer) and to the
second token, the tokens a row emits per step, and the share of steps that are not
uniform decode batches (the full decode CUDA graph lost); the grid over routings and
designs; its table; its plots.

The tail is a p99 only where there are at least :data:`P99_MIN_SAMPLES` samples (a
nearest-rank p99 of fewer is the maximum); below that the report says ``max``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from pdlab.catalog import text
from pdlab.config import ModelConfig
from pdlab.disagg.designs import MODES
from pdlab.sim.profiles import DeviceProfile
from pdlab.sim.simulator import ROUTINGS, SimConfig, SimResult, simulate
from pdlab.ui.fmt import FitTable

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn: the table needs none
    from matplotlib.figure import Figure

P99_MIN_SAMPLES = 100


def tail(xs: Sequence[float]) -> tuple[str, float]:
    """``("p99", value)`` over at least :data:`P99_MIN_SAMPLES` samples, else ``("max",
    the largest)``."""
    if len(xs) >= P99_MIN_SAMPLES:
        return "p99", percentile(xs, 99)
    return "max", max(xs, default=0.0)


def percentile(xs: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100); 0 for no samples."""
    if not xs:
        return 0.0
    s = sorted(xs)
    k = max(1, -(-len(s) * q // 100))
    return s[int(k) - 1]


def summarize(res: SimResult) -> dict[str, Any]:
    """The run's figures. ``*_p99_s`` is the tail :func:`tail` gives, named by
    ``*_tail`` (``"p99"`` or ``"max"``)."""
    per_step = res.config.tokens_per_verify_step
    tpot = [s.time_s / per_step for s in res.steps if s.verifying_rows]
    ttft = [r.ttft_d for r in res.requests if r.ttft_d >= 0]
    t2t = [r.t2t_d for r in res.requests if r.t2t_d >= 0]
    mixed = sum(not s.uniform_decode for s in res.steps)
    rows = sum(len(s.query_lens) for s in res.steps)
    out = {
        "design": res.config.design,
        "routing": res.config.routing,
        "num_speculative_tokens": res.config.num_speculative_tokens,
        "acceptance_rate": res.config.acceptance_rate,
        "mla_backend": res.mla_backend,
        "reorder_batch_threshold": res.reorder_batch_threshold,
        "steps": len(res.steps),
        "arrivals": len(res.requests),
        "step_p50_s": percentile([s.time_s for s in res.steps], 50),
        "tpot_p50_s": percentile(tpot, 50),
        "ttft_d_p50_s": percentile(ttft, 50),
        "t2t_d_p50_s": percentile(t2t, 50),
        "tokens_per_step": sum(s.tokens for s in res.steps) / rows if rows else 0.0,
        "non_uniform_share": mixed / len(res.steps) if res.steps else 0.0,
        "simulated_s": res.steps[-1].t + res.steps[-1].time_s if res.steps else 0.0,
    }
    for name, xs in (("tpot", tpot), ("ttft_d", ttft), ("t2t_d", t2t)):
        out[f"{name}_tail"], out[f"{name}_p99_s"] = tail(xs)
    return out


def run_grid(
    base: SimConfig,
    model: ModelConfig,
    profile: DeviceProfile,
    gpu: str,
    designs: Sequence[str] = MODES,
    routings: Sequence[str] = ROUTINGS,
    progress: Callable[[int, int, float], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[tuple[str, str], SimResult]]:
    """Every (routing, design) of ``base``: the summaries and the runs. ``progress`` is
    told (runs done, runs, simulated seconds of the current run)."""
    rows, runs = [], {}
    pairs = [(r, d) for r in routings for d in designs]
    for i, (routing, design) in enumerate(pairs):
        cfg = replace(base, routing=routing, design=design)
        tick = None if progress is None else (lambda t, i=i: progress(i, len(pairs), t))
        res = simulate(cfg, model, profile, gpu, tick)
        runs[routing, design] = res
        rows.append(summarize(res))
    return rows, runs


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
    t = FitTable(
        title=escape(text(lang, "sim_title", gpu=profile.name)),
        caption=escape(
            text(lang, "sim_caption", source=source, backend=backends)
            + (
                text(
                    lang,
                    "sim_caption_mtp",
                    k=k,
                    a=f"{rows[0]['acceptance_rate']:.0%}",
                )
                if k
                else ""
            )
        ),
    )
    tail_word = "p99" if all(r["tpot_tail"] == "p99" for r in rows) else "max"
    for key, just in (
        ("sim_routing", "left"),
        ("sim_design", "left"),
        ("sim_tpot", "right"),
        ("sim_ttft", "right"),
        ("sim_t2t", "right"),
        ("sim_tokens", "right"),
        ("sim_mixed", "right"),
    ):
        t.add_column(escape(text(lang, key, tail=tail_word)), justify=just)
    for r in rows:
        t.add_row(
            text(lang, f"sim_r_{r['routing']}"),
            r["design"],
            _ms(r, "tpot"),
            _ms(r, "ttft_d"),
            _ms(r, "t2t_d"),
            f"{r['tokens_per_step']:.2f}",
            f"{100 * r['non_uniform_share']:.0f}%",
        )
    return t


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
    paths = []
    for design in dict.fromkeys(d for _, d in runs):
        p = out / f"sim_step_time_{design}.png"
        plot_step_times(runs, design).savefig(p, dpi=110)
        paths.append(p)
    p = out / "sim_tpot.png"
    plot_tpot(rows).savefig(p, dpi=110)
    return [*paths, p]
