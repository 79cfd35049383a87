"""Matplotlib views of a trace: the block table, ``num_computed_tokens`` per step, and the
cost of D's one-token step through either MLA path against context length. Drawn from a
:class:`pdlab.engine.trace.Tracer` or the cost model, never from numbers typed in; labelled
in ``lang`` (English where :func:`cjk_font` finds no Chinese font).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from matplotlib import colormaps, font_manager, rc_context
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from pdlab.catalog import check_lang, text
from pdlab.engine.config import ModelConfig
from pdlab.engine.trace import Tracer
from pdlab.errors import PdlabLookupError, Phrase
from pdlab.sim.kernel_costs import decode_path_cost, prefill_path_cost

# Fonts with the Simplified Chinese glyphs, best first: Debian's fonts-noto-cjk and other
# Linux fonts, then what macOS and Windows ship.
_CJK_NAMES = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans SC", "Source Han Sans SC")
_CJK_NAMES += ("WenQuanYi Zen Hei", "PingFang SC", "Heiti SC", "Microsoft YaHei", "SimHei")


@functools.cache
def cjk_font() -> str | None:
    """The family name of an installed font with Chinese glyphs, or None. matplotlib's font
    cache predates fonts installed after it was built, so the system's font files whose names
    say CJK are added to it once before giving up."""
    known = {f.name for f in font_manager.fontManager.ttflist}
    hit = next((n for n in _CJK_NAMES if n in known), None)
    if hit is None:
        for path in font_manager.findSystemFonts():
            if "cjk" in Path(path).name.lower():
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):
                    continue
        known = {f.name for f in font_manager.fontManager.ttflist}
        hit = next((n for n in _CJK_NAMES if n in known), None)
    return hit


def plot_lang(lang: str) -> str:
    """The language a figure can be drawn in: ``lang``, except English for ``"zh"`` where no
    font has Chinese glyphs (a title of empty boxes helps no one)."""
    return "en" if check_lang(lang) == "zh" and cjk_font() is None else lang


@contextmanager
def lang_fonts(lang: str) -> Iterator[str]:
    """Inside, new text uses a CJK font first when ``lang`` is ``"zh"`` and one is
    installed; yields the language to label the figure in (:func:`plot_lang`)."""
    use = plot_lang(lang)
    if use != "zh":
        yield use
        return
    with rc_context({"font.family": [cjk_font(), "DejaVu Sans"], "axes.unicode_minus": False}):
        yield use


def _figure(w: float, h: float, ncols: int = 1) -> tuple[Figure, Any]:
    # Figures built without pyplot: no global state, no GUI window, nothing to close.
    fig = Figure(figsize=(w, h))
    return fig, fig.subplots(1, ncols)


def plot_block_table(
    trace: Tracer,
    instance: str,
    step: int | None = None,
    block_size: int | None = None,
    lang: str = "en",
) -> Figure:
    """Each scheduled request's block table at one step (default: the instance's first
    step that scheduled work): one row per request, one cell per block, labelled with the
    block id and shaded by how many of its slots hold tokens."""
    steps = trace.step_numbers(instance)
    if not steps:
        raise PdlabLookupError("err_no_scheduled_step", instance=instance)
    if step is not None and step not in steps:
        allowed = Phrase("err_x_for_instance", choices=steps, instance=instance)
        raise PdlabLookupError("err_invalid_str", name="step", value=step, allowed=allowed)
    step = steps[0] if step is None else step
    bs = block_size or trace.meta.get("block_size") or 1
    with lang_fonts(lang) as lang:
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
        ax.set_xlabel(text(lang, "plot_bt_x", bs=bs))
        ax.set_ylabel(text(lang, "plot_bt_y"))
        ax.set_title(text(lang, "plot_bt_title", inst=instance, step=step))
        fig.tight_layout()
        return fig


def plot_num_computed_tokens(
    trace: Tracer, instance: str | None = None, lang: str = "en"
) -> Figure:
    """``num_computed_tokens`` after each step, per request; hollow markers are steps routed
    to ``forward_mha``, filled ones to ``forward_mqa``."""
    with lang_fonts(lang) as lang:
        fig, ax = _figure(7, 4)
        series: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
        for r in trace.step_rows(instance):
            series.setdefault((r["instance"], r["req_id"]), []).append(
                (r["step"], r["num_computed_tokens_after"], r["path"])
            )
        # Two instances often share a point (P and the colocated engine both prefill the prompt
        # in step 1): each later series gets a different, smaller marker drawn on top, so every
        # point stays visible as a ring inside the one before it.
        for k, ((inst, rid), pts) in enumerate(series.items()):
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            (line,) = ax.plot(xs, ys, "-", label=f"{inst}:{rid}", zorder=2 + k)
            size = max(3.0, 11.0 - 2.0 * k)
            marker = {"markersize": size, "markeredgewidth": 1.5, "zorder": 2 + k}
            for x, y, path in pts:
                fill = "full" if path == "decode" else "none"
                ax.plot([x], [y], "osD^v"[k % 5], color=line.get_color(), fillstyle=fill, **marker)
        ax.set_xlabel(text(lang, "plot_nct_x"))
        ax.set_ylabel(text(lang, "plot_nct_y"))
        ax.set_title(text(lang, "plot_nct_title"), fontsize=10)
        if series:
            ax.legend(fontsize=8)
        fig.tight_layout()
        return fig


def plot_path_costs(
    cfg: ModelConfig, contexts: list[int] | None = None, lang: str = "en"
) -> Figure:
    """Modelled FLOPs and bytes of D's one-token step, per layer, through both paths."""
    contexts = contexts or [2**k for k in range(6, 18)]
    with lang_fonts(lang) as lang:
        pre = [prefill_path_cost(cfg, c) for c in contexts]
        dec = [decode_path_cost(cfg, c) for c in contexts]
        fig, (a1, a2) = _figure(10, 4, ncols=2)
        # A label starting with "_" is hidden from the legend by matplotlib: hence "path ...".
        for ax, what, (pf, dc) in (
            (a1, "flops", ("plot_pf_pcp", "plot_dc_default")),
            (a2, "bytes", ("plot_pf", "plot_dc")),
        ):
            ax.loglog(contexts, [getattr(p, what) for p in pre], "o-", label=text(lang, pf))
            ax.loglog(contexts, [getattr(d, what) for d in dec], "s-", label=text(lang, dc))
            ax.set_xlabel(text(lang, "plot_ctx_x"))
            ax.set_ylabel(text(lang, f"plot_{what}_y"))
            ax.set_title(text(lang, f"plot_{what}_title", model=cfg.name))
            ax.legend(fontsize=8)
        fig.tight_layout()
        return fig


def save_all(
    trace: Tracer, cfg: ModelConfig, out_dir: str | Path, instance: str = "D", lang: str = "en"
) -> list[Path]:
    """Write the three views as PNG files; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs = {
        "block_table.png": plot_block_table(trace, instance, lang=lang),
        "num_computed_tokens.png": plot_num_computed_tokens(trace, lang=lang),
        "path_costs.png": plot_path_costs(cfg, lang=lang),
    }
    for name, fig in figs.items():
        fig.savefig(out / name, dpi=110)
    return [out / name for name in figs]
