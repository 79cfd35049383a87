"""Pictures of the first-token designs, drawn from traces: :func:`plot_cache_grid` (per
design, what D's cache holds when its first step starts, what that step computes and what
token 1 needs) and :func:`plot_timeline` (proxy, P, transfer and D in the order the trace
recorded them, D's steps shaded by ``decode_graph_eligible``). ``pdlab tour --plots DIR``
writes both; notebook 07 shows them.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from pdlab.catalog import text
from pdlab.engine.trace import Tracer
from pdlab.ui.plots import lang_fonts

COLORS = {
    "held": "#9ecae1",  # K/V that landed from P
    "computed": "#fd8d3c",  # computed by D's first step
    "shipped": "#74c476",  # the hidden state that came with the K/V
    "token": "#9e9ac8",  # token 1 itself came from P (sampled from P's h[N-1])
    "missing": "#f0f0f0",
}
ELIGIBLE, NOT_ELIGIBLE = "#74c476", "#fb6a4a"  # a D step's decode_graph_eligible


def _grid_cells(trace: Tracer, req_id: str) -> tuple[int, int, dict[tuple[int, int], str]]:
    """``(layers, N, cells)`` for one design's trace: cell ``(row, position)`` -> what it
    is; row ``layers`` is the final hidden state."""
    layers = max(e["layer"] for e in trace.filter("kernel", "D")) + 1
    n = trace.first("add_request", "P", req_id=req_id)["num_prompt_tokens"]
    ft = trace.first("first_token", req_id=req_id)
    held = sum(
        min(len(e["local_block_ids"]) * trace.meta["block_size"], n)
        for e in trace.filter("kv_transfer", "D", req_id=req_id)
        if e["ok"]
    )
    cells = {(layer, p): "held" for layer in range(layers) for p in range(held)}
    routes = trace.filter("route", "D", req_id=req_id)
    if routes:
        c, q = routes[0]["num_computed_tokens"], routes[0]["query_len"]
        cells |= {(layer, p): "computed" for p in range(c, c + q) for layer in range(layers + 1)}
    if ft["mode"] == "hidden_state" and ft["payload_bytes"]:
        cells[layers, n - 1] = "shipped"
    elif ft["known_on"] == "P":
        cells[layers, n - 1] = "token"
    return layers, n, cells


def plot_cache_grid(traces: dict[str, Tracer], req_id: str = "req-0", lang: str = "en") -> Figure:
    """One panel per design (``traces``: design -> trace of a run of it), labelled in
    ``lang`` (English where no font has Chinese glyphs)."""
    with lang_fonts(lang) as lang:
        fig = Figure(figsize=(3.2 * len(traces), 3.4))
        axes = fig.subplots(1, len(traces), squeeze=False)[0]
        for ax, (mode, trace) in zip(axes, traces.items()):
            layers, n, cells = _grid_cells(trace, req_id)
            width = n + 1  # position N: token 1, the input of D's first decode
            for row in range(layers + 1):
                for p in range(width):
                    kind = cells.get((row, p), "missing")
                    ax.add_patch(Rectangle((p, row), 0.92, 0.88, color=COLORS[kind]))
                    if p < n and (row < layers or p == n - 1):  # what token 1 needs
                        ax.add_patch(Rectangle((p, row), 0.92, 0.88, fill=False, hatch="//", lw=0))
            ax.set_xlim(0, width)
            ax.set_ylim(0, layers + 1)
            ax.set_yticks([r + 0.45 for r in range(layers + 1)])
            rows = [text(lang, "pg_layer", r=r) for r in range(layers)] + [text(lang, "pg_hidden")]
            ax.set_yticklabels(rows, fontsize=7)
            ax.set_xlabel(text(lang, "pg_position", n=n), fontsize=8)
            ax.set_title(mode, fontsize=10)
        kinds = ("held", "computed", "shipped", "token")
        handles = [Patch(color=COLORS[k], label=text(lang, f"pg_{k}")) for k in kinds]
        handles.append(Patch(facecolor="white", hatch="//", label=text(lang, "pg_needs")))
        fig.legend(handles=handles, loc="lower center", ncol=5, fontsize=7)
        fig.suptitle(text(lang, "pg_grid_title", req=req_id), fontsize=10)
        fig.tight_layout(rect=(0, 0.08, 1, 0.95))
        return fig


def plot_timeline(trace: Tracer, req_id: str = "req-0", lang: str = "en") -> Figure:
    """Lanes proxy, P, transfer, D; x is the order of the steps in the trace."""
    with lang_fonts(lang) as lang:
        order: dict[tuple[str, int], int] = {}
        for e in trace.events:
            if e.kind == "step" or e.kind == "kv_transfer":
                order.setdefault((e.instance, e.step), len(order))
        lanes = {"proxy": 3, "P": 2, "transfer": 1, "D": 0}
        fig = Figure(figsize=(8, 2.8))
        ax = fig.subplots()
        for e in trace.filter("step", "P"):
            if any(r["req_id"] == req_id for r in e["scheduled"]):
                ax.add_patch(Rectangle((order["P", e.step], 2.1), 0.9, 0.8, color="#6baed6"))
                ax.text(order["P", e.step] + 0.45, 2.5, f"P{e.step}", ha="center", fontsize=7)
        for e in trace.filter("kv_transfer", "D", req_id=req_id):
            x = order["D", e.step]
            ax.add_patch(Rectangle((x - 0.5, 1.1), 1.4, 0.8, color="#bcbddc"))
            ax.text(x + 0.2, 1.5, f"{e['nbytes']} B", ha="center", fontsize=7)
        p_done = trace.filter("finish", "P", req_id=req_id)
        if p_done:
            x = order.get(("P", p_done[0].step), 0)
            ax.annotate("", (x + 1.5, 3.1), (x + 0.5, 3.5), arrowprops={"arrowstyle": "->"})
            ax.text(x + 0.5, 3.55, text(lang, "pg_handoff"), fontsize=7)
        for e in trace.filter("route", "D", req_id=req_id):
            x = order["D", e.step]
            color = ELIGIBLE if e["decode_graph_eligible"] else NOT_ELIGIBLE
            ax.add_patch(Rectangle((x, 0.1), 0.9, 0.8, color=color))
            label = "mqa" if e["forward"] == "forward_mqa" else "mha"
            ax.text(x + 0.45, 0.45, f"D{e.step}\n{label}", ha="center", va="center", fontsize=6)
        ax.set_xlim(-1, len(order) + 1)
        ax.set_ylim(0, 4)
        ax.set_yticks([v + 0.5 for v in lanes.values()])
        ax.set_yticklabels(list(lanes))
        ax.set_xlabel(text(lang, "pg_steps"))
        ax.set_title(text(lang, "pg_timeline_title", req=req_id))
        fig.tight_layout()
        return fig
