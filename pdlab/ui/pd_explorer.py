"""The P/D explorer for notebooks: reruns :func:`pdlab.demo.run_demo` whenever a control
changes and shows D's first step, its path (named as in
``vllm/model_executor/layers/attention/mla_attention.py``), its kernels, the modelled cost
for a DeepSeek preset and whether the tokens equal a colocated run. Each result widget has a
CSS class ``pdlab-...`` for the browser tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets

from pdlab.catalog import labels, text
from pdlab.demo import Demo, run_demo
from pdlab.engine.config import MLA_BACKENDS, PRESETS, AttentionConfig, ModelConfig
from pdlab.engine.tokenizer import printable
from pdlab.sim.kernel_costs import Cost, decode_path_cost, prefill_path_cost
from pdlab.ui.fmt import esc, flops, html_table, nbytes, widget_error_html
from pdlab.ui.trace_views import trace_panels


def route_text(route: Mapping[str, Any], lang: str = "en") -> str:
    """The routing decision in one line, with the values ``split_decodes_and_prefills`` read
    (upstream's test: ``query_len > decode_threshold``, OR-ed with ``is_prefilling`` when
    ``treat_short_extends_as_decodes`` is False)."""
    c, p, q = route["num_computed_tokens"], route["num_prompt_tokens"], route["query_len"]
    t, treat = route["decode_threshold"], route["treat_short_extends_as_decodes"]
    prefilling = f"is_prefilling = {c} {'<' if c < p else '>='} {p} = {route['is_prefilling']}"
    threshold = f"query_len = {q} {'>' if q > t else '<='} decode_threshold = {t}"
    switch = f"treat_short_extends_as_decodes = {treat}"
    region = text(lang, "w_region", region=route["region"])
    kind = text(lang, "w_kind", path=route["path"])
    return f"{prefilling}; {region}; {threshold}; {switch} → {kind} → {route['forward']}"


def path_costs(preset: str, context_len: int) -> tuple[ModelConfig, Cost, Cost]:
    """The preset's config and the modelled cost, per layer, of one token over
    ``context_len`` cached tokens through ``forward_mha`` and ``forward_mqa``."""
    cfg = ModelConfig.preset(preset)
    return cfg, prefill_path_cost(cfg, context_len), decode_path_cost(cfg, context_len)


def cost_html(preset: str, context_len: int, forward: str, lang: str = "en") -> str:
    lab = labels(lang)
    cfg, pre, dec = path_costs(preset, context_len)
    n = cfg.num_hidden_layers
    rows = []
    for name, c in (("forward_mha", pre), ("forward_mqa", dec)):
        mark = "▶ " if name == forward else ""
        per_layer = [flops(c.flops), nbytes(c.bytes)]
        rows.append([f"{mark}{name}", *per_layer, flops(n * c.flops), nbytes(n * c.bytes)])
    ratio = lab["ratio"].format(f=pre.flops / dec.flops, b=pre.bytes / dec.bytes)
    heads = [lab["path"], lab["flops_per_layer"], lab["bytes_per_layer"]]
    table = html_table([*heads, lab["flops_all"].format(n=n), lab["bytes_all"].format(n=n)], rows)
    return (
        f"<div>{esc(lab['context'].format(preset=cfg.name, ctx=context_len))}</div>"
        f"{table}<div>{esc(ratio)}</div>"
    )


def tokens_text(run: Demo, lang: str = "en") -> str:
    lab = labels(lang)
    verdict = lab["equal"] + " ✓" if run.tokens_equal else lab["differ"] + " ✗"
    return (
        f"P/D: {run.pd_tokens} {printable(run.pd_tokens)} | {lab['colocated']}: "
        f"{run.colocated_tokens} {printable(run.colocated_tokens)} → {verdict} "
        f"({lab['weights']}: {run.trace.meta.get('weights', 'random')})"
    )


class PDExplorer(widgets.VBox):
    """The explorer (see the module docstring); the cost is at context ``N - 1``."""

    def __init__(
        self,
        prompt_len: int = 11,
        block_size: int = 4,
        pcp: int = 1,
        preset: str = "deepseek-v3",
        lang: str = "en",
        max_tokens: int = 3,
        backend: str = "torch",
        mla_backend: str | None = None,
    ) -> None:
        self.lang, self.lab = lang, labels(lang)
        self.max_tokens, self.backend = max_tokens, backend
        lab, style = self.lab, {"description_width": "initial"}

        def dropdown(options: list, value: Any, key: str, width: str) -> widgets.Dropdown:
            layout = widgets.Layout(width=width)
            return widgets.Dropdown(
                options=options, value=value, description=lab[key], style=style, layout=layout
            )

        look = {"style": style, "layout": widgets.Layout(width="360px"), "continuous_update": False}
        self.prompt_len = widgets.IntSlider(
            value=prompt_len, min=2, max=96, description=lab["prompt_len"], **look
        )
        self.block_size = dropdown([1, 2, 4, 8, 16, 64], block_size, "block_size", "170px")
        self.pcp = dropdown([1, 2], pcp, "pcp", "260px")
        backend = AttentionConfig(mla_backend).backend
        self.mla_backend = dropdown(list(MLA_BACKENDS), backend, "mla_backend", "240px")
        self.preset = dropdown(list(PRESETS), preset, "preset", "240px")
        self.status = widgets.HTML().add_class("pdlab-status")
        self.error = widgets.HTML().add_class("pdlab-error")
        self.d_step = widgets.HTML().add_class("pdlab-d-step")
        self.route = widgets.HTML().add_class("pdlab-route")
        self.kernels = widgets.HTML().add_class("pdlab-kernels")
        self.cost = widgets.HTML().add_class("pdlab-cost")
        self.tokens = widgets.HTML().add_class("pdlab-tokens")
        self.traces = widgets.HBox()
        self.run: Demo | None = None
        for w in (self.prompt_len, self.block_size, self.pcp, self.mla_backend):
            w.observe(lambda _: self.rerun(), names="value")
        self.preset.observe(lambda _: self._guard(self.render_cost), names="value")

        def row(key: str, w: widgets.Widget) -> widgets.HBox:
            narrow = widgets.Layout(min_width="130px")
            return widgets.HBox([widgets.HTML(f"<b>{esc(self.lab[key])}</b>", layout=narrow), w])

        controls = [self.prompt_len, self.block_size, self.pcp, self.mla_backend, self.preset]
        head = [widgets.HBox(controls, layout=widgets.Layout(flex_flow="row wrap"))]
        shown = {"d_first": self.d_step, "route": self.route, "kernels": self.kernels}
        shown |= {"cost": self.cost, "tokens": self.tokens}
        rows = [row(key, w) for key, w in shown.items()]
        super().__init__([*head, self.status, self.error, *rows, self.traces])
        self.rerun()

    def _guard(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
            self.error.value = ""
        except Exception as e:  # shown in the widget: an observer's exception is invisible
            self.error.value = widget_error_html(e, self.lang)

    def rerun(self) -> None:
        self._guard(self._rerun)

    def _rerun(self) -> None:
        chosen = {"block_size": self.block_size.value, "pcp": self.pcp.value}
        chosen |= {"mla_backend": self.mla_backend.value, "max_tokens": self.max_tokens}
        self.run = run = run_demo(self.prompt_len.value, backend=self.backend, **chosen)
        lab = self.lab
        ran = lab["ran"].format(model=run.cfg.name, backend=run.backend, s=run.seconds)
        self.status.value = esc(ran)
        r = run.d_first_step
        n = r["num_prompt_tokens"]
        n1 = "N-1" if r["num_computed_tokens"] == n - 1 else "≠ N-1"
        self.d_step.value = (
            f"<code>query_len = {r['query_len']}, num_computed_tokens = {n1} = "
            f"{r['num_computed_tokens']}, num_prompt_tokens = N = {n}</code>"
        )
        self.route.value = f"<code>{esc(route_text(r, self.lang))}</code>"
        layers = run.trace.num_layers("D")
        self.kernels.value = (
            f"<code>{esc(' → '.join(run.kernels('D')))}</code>"
            f"<div style='font-size:11px'>"
            f"{esc(lab['kernels_note'].format(layers=layers))}</div>"
        )
        self.render_cost()
        self.tokens.value = f"<code>{esc(tokens_text(run, self.lang))}</code>"
        self.traces.children = trace_panels(run.trace, self.lang).children

    def render_cost(self) -> None:
        if self.run is None:
            return
        r = self.run.d_first_step
        self.cost.value = cost_html(
            self.preset.value, r["num_computed_tokens"], r["forward"], self.lang
        )
