"""``SimExplorer``: ``pdlab sim`` behind widgets (notebook 07); each change reruns the
simulator (DeepSeek-V3 as deployed) and shows TPOT, D's time to first token, the share of
steps that are not uniform decode batches, and the step times.
"""

from __future__ import annotations

import ipywidgets as widgets
from matplotlib.figure import Figure

from pdlab.catalog import text
from pdlab.disagg.designs import MODES
from pdlab.engine.config import ModelConfig
from pdlab.sim.profiles import GPUS, device_profile
from pdlab.sim.report import summarize
from pdlab.sim.simulator import ROUTINGS, SimConfig, SimResult, simulate
from pdlab.ui.fmt import esc, html_table, seconds, widget_error_html


class SimExplorer(widgets.VBox):
    """Rerun :func:`pdlab.sim.simulator.simulate` whenever a control changes."""

    def __init__(self, lang: str = "en", duration_s: float = 1.0) -> None:
        self.lang, self.duration_s = lang, duration_s
        self.v3 = ModelConfig.deepseek_v3()
        self._profiles = {g: device_profile(g) for g in GPUS}
        t = lambda key: text(lang, key)  # noqa: E731 - a label's source

        def slider(kind: type, key: str, **values: float) -> widgets.Widget:
            style = {"description_width": "initial"}
            return kind(description=t(key), style=style, continuous_update=False, **values)

        self.design = widgets.Dropdown(options=list(MODES), description=t("sim_design"))
        self.routing = widgets.Dropdown(options=list(ROUTINGS), description=t("sim_routing"))
        # the running decodes' context: 2**10 .. 2**17 tokens
        self.context = slider(widgets.IntSlider, "w_sim_context", value=12, min=10, max=17)
        self.batch = slider(widgets.IntSlider, "w_sim_batch", value=64, min=1, max=256)
        self.rate = slider(
            widgets.FloatLogSlider, "w_sim_rate", value=20.0, base=10, min=0, max=2.5
        )
        self.gpu = widgets.Dropdown(options=list(GPUS), value="H200", description="GPU")
        self.k = widgets.Dropdown(options=[0, 1, 2, 3], value=0, description=t("w_sim_k"))
        self.summary = widgets.HTML().add_class("pdlab-sim-summary")
        self.plot = widgets.Output()
        self.error = widgets.HTML()
        self.result: SimResult | None = None
        controls = [self.design, self.routing, self.context, self.batch, self.rate]
        controls += [self.gpu, self.k]
        for w in controls:
            w.observe(lambda _: self.rerun(), names="value")
        wrap = widgets.Layout(flex_flow="row wrap")
        super().__init__([widgets.HBox(controls, layout=wrap), self.error, self.summary, self.plot])
        self.rerun()

    @property
    def config(self) -> SimConfig:
        ctx = 2**self.context.value
        chosen = {"design": self.design.value, "routing": self.routing.value}
        chosen |= {"batch_size": self.batch.value, "context": ctx, "prompt_len": ctx}
        chosen |= {"arrival_rate": float(self.rate.value), "duration_s": self.duration_s}
        return SimConfig(**chosen, num_speculative_tokens=self.k.value)

    def rerun(self) -> None:
        try:
            self._rerun()
            self.error.value = ""
        except Exception as e:  # shown in the widget: an observer's exception is invisible
            self.error.value = widget_error_html(e, self.lang)

    def _rerun(self) -> None:
        profile = self._profiles[self.gpu.value]
        self.result = res = simulate(self.config, self.v3, profile, gpu=self.gpu.value.lower())
        s = summarize(res)
        lang = self.lang
        keys = ("sim_tpot", "sim_ttft", "sim_t2t", "sim_tokens", "sim_mixed")
        head = [text(lang, k, tail=s["tpot_tail"]) for k in keys]

        def pair(name: str) -> str:
            tail = "" if s[f"{name}_tail"] == "p99" else " max"
            return f"{seconds(s[f'{name}_p50_s'])} / {seconds(s[f'{name}_p99_s'])}{tail}"

        cells = [pair(name) for name in ("tpot", "ttft_d", "t2t_d")]
        cells += [f"{s['tokens_per_step']:.2f}", f"{100 * s['non_uniform_share']:.0f}%"]
        counts = {"steps": s["steps"], "n": s["arrivals"], "gpus": s["num_gpus"]}
        note = text(lang, "w_sim_note", gpu=profile.name, dtype=s["weight_dtype"], **counts)
        self.summary.value = html_table(head, [cells]) + f"<div>{esc(note)}</div>"
        fig = Figure(figsize=(7, 2.4))
        ax = fig.subplots()
        ax.plot([x.t for x in res.steps], [1e3 * x.time_s for x in res.steps], lw=0.8)
        ax.set_xlabel("simulated time (s)")
        ax.set_ylabel("step time (ms)")
        fig.tight_layout()
        self.plot.clear_output(wait=True)
        with self.plot:
            from IPython.display import display

            display(fig)
