"""Matplotlib views of a trace: the block table, ``num_computed_tokens`` per step, and the
cost of D's one-token step through either MLA path against context length.

Every figure is drawn from a :class:`pdlab.trace.Tracer` (or from the cost model), never
from numbers typed in, so the picture is what the engine did. The notebooks reuse these and
``pdlab tour --plots DIR`` writes them as PNG files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from pdlab.attention.cost import decode_path_cost, prefill_path_cost
from pdlab.config import ModelConfig
from pdlab.trace import Tracer


def _figure(w: float, h: float, ncols: int = 1) -> tuple[Figure, Any]:
    # Figures built without pyplot: no global state, no GUI window, nothing to close.
    fig = Figure(figsize=(w, h))
    axes = fig.subplots(1, ncols)
    return fig, axes


def plot_block_table(
    trace: Tracer, instance: str, step: int | None = None, block_size: int | None = None
) -> Figure:
    """Each scheduled request's block table at one step (default: the instance's first
    step that scheduled work): one row per request, one cell per block, labelled with the
    block id and shaded by how many of its slots hold tokens."""
    steps = trace.step_numbers(instance)
    if not steps:
        raise LookupError(f"the trace has no scheduled step for instance {instance!r}")
    if step is not None and step not in steps:
        raise LookupError(
            f"step={step} is invalid: expected one of {steps} for instance {instance!r}"
        )
    step = steps[0] if step is None else step
    bs = block_size or trace.meta.get("block_size") or 1
    reqs = trace.step_rows(instance, step)
    width = max(len(r["block_ids"]) for r in reqs)
    blues = colormaps["Blues"]
    fig, ax = _figure(max(4.0, 0.6 * width + 2), 0.7 * len(reqs) + 1.2)
    for row, r in enumerate(reqs):
        filled = r["num_computed_tokens_after"]
        for j, bid in enumerate(r["block_ids"]):
            frac = min(max(filled - j * bs, 0), bs) / bs
            ax.add_patch(Rectangle((j, row), 0.95, 0.9, color=blues(0.25 + 0.6 * frac)))
            ax.text(j + 0.47, row + 0.45, str(bid), ha="center", va="center", fontsize=9)
    ax.set_xlim(0, width)
    ax.set_ylim(len(reqs), 0)
    ax.set_yticks([i + 0.45 for i in range(len(reqs))])
    ax.set_yticklabels([r["req_id"] for r in reqs])
    ax.set_xlabel(f"logical block (block_size={bs}); cell = physical block id")
    ax.set_ylabel("request")
    ax.set_title(f"block table, instance {instance}, step {step}")
    fig.tight_layout()
    return fig


def plot_num_computed_tokens(trace: Tracer, instance: str | None = None) -> Figure:
    """``num_computed_tokens`` after each step, per request; hollow markers are steps routed
    to ``forward_mha``, filled ones to ``forward_mqa``."""
    fig, ax = _figure(7, 4)
    series: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
    for r in trace.step_rows(instance):
        series.setdefault((r["instance"], r["req_id"]), []).append(
            (r["step"], r["num_computed_tokens_after"], r["path"])
        )
    for (inst, rid), pts in series.items():
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        (line,) = ax.plot(xs, ys, "-", label=f"{inst}:{rid}")
        for x, y, path in pts:
            ax.plot(
                [x],
                [y],
                "o",
                color=line.get_color(),
                fillstyle="full" if path == "decode" else "none",
            )
    ax.set_xlabel("engine step")
    ax.set_ylabel("num_computed_tokens (after the step)")
    ax.set_title(
        "num_computed_tokens per step\n(hollow: forward_mha, filled: forward_mqa)",
        fontsize=10,
    )
    if series:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_path_costs(cfg: ModelConfig, contexts: list[int] | None = None) -> Figure:
    """Modelled FLOPs and bytes of D's one-token step, per layer, through both paths."""
    contexts = contexts or [2**k for k in range(6, 18)]
    pre = [prefill_path_cost(cfg, c) for c in contexts]
    dec = [decode_path_cost(cfg, c) for c in contexts]
    fig, (a1, a2) = _figure(10, 4, ncols=2)
    # A label starting with "_" is hidden from the legend by matplotlib: hence "path ...".
    a1.loglog(contexts, [p.flops for p in pre], "o-", label="path forward_mha (PCP > 1)")
    a1.loglog(contexts, [d.flops for d in dec], "s-", label="path forward_mqa (default)")
    a1.set_xlabel("context length (tokens cached before the step)")
    a1.set_ylabel("FLOPs per layer")
    a1.set_title(f"{cfg.name}: one token, FLOPs")
    a1.legend(fontsize=8)
    a2.loglog(contexts, [p.bytes for p in pre], "o-", label="path forward_mha")
    a2.loglog(contexts, [d.bytes for d in dec], "s-", label="path forward_mqa")
    a2.set_xlabel("context length (tokens cached before the step)")
    a2.set_ylabel("bytes moved per layer")
    a2.set_title(f"{cfg.name}: one token, bytes")
    a2.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save_all(
    trace: Tracer, cfg: ModelConfig, out_dir: str | Path, instance: str = "D"
) -> list[Path]:
    """Write the three views as PNG files; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs = {
        "block_table.png": plot_block_table(trace, instance),
        "num_computed_tokens.png": plot_num_computed_tokens(trace),
        "path_costs.png": plot_path_costs(cfg),
    }
    paths = []
    for name, fig in figs.items():
        fig.savefig(out / name, dpi=110)
        paths.append(out / name)
    return paths
