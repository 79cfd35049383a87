"""Views of a trace for notebooks: an instance's events as rows and HTML tables, several
instances side by side, and a slider over the steps (:class:`StepPlayer`). Every value is
read from the trace. vLLM has no equivalent; the closest are its ``SchedulerStats``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ipywidgets as widgets

from pdlab.catalog import labels, text
from pdlab.engine.trace import Tracer
from pdlab.errors import PdlabValueError
from pdlab.ui.fmt import esc, html_table

# Fields of an event not worth a reader's attention in a table (where to connect, etc.).
_NOISE = {"kind", "instance", "step", "reason"}
_NOISE |= {f"remote_{field}" for field in ("host", "port", "request_id", "engine_id")}


def event_details(e: Mapping[str, Any]) -> str:
    parts = []
    for k, v in e.items():
        if k in _NOISE or v is None or v == "" or v is False:
            continue
        if isinstance(v, dict):
            shown = [f"{a}: {b}" for a, b in v.items() if a not in _NOISE and b is not False]
            v = "{" + ", ".join(shown) + "}"
        parts.append(f"{k}={v}")
    return ", ".join(parts)


def trace_rows(tracer: Tracer, instance: str, layer: int = 0, lang: str = "en") -> list[list[Any]]:
    """One instance's trace as ``[step, event, details]`` rows: every scheduler, connector,
    route and sample event, each step's schedule, and its kernels of one ``layer`` (the
    other layers call the same ones). Event kinds are the trace's own names in any
    ``lang``; the words around the values are in ``lang``."""
    rows: list[list[Any]] = []
    kernels: dict[int, list[str]] = {}
    for e in tracer.filter("kernel", instance, layer=layer):
        kernels.setdefault(e["step"], []).append(e["name"])
    for e in tracer.filter(None, instance):
        kind, step = e["kind"], e["step"]
        if kind == "step":
            for r in e["scheduled"]:
                before, after = r["num_computed_tokens_before"], r["num_computed_tokens_after"]
                said = {"before": before, "after": after, "n": r["num_scheduled_tokens"]}
                said |= {"N": r["num_prompt_tokens"], "blocks": r["block_ids"]}
                detail = text(lang, "v_schedule_row", req=r["req_id"], **said)
                rows.append([step, text(lang, "v_schedule"), detail])
        elif kind == "route":
            said = (
                f"{e['req_id']}: query_len={e['query_len']}, "
                f"num_computed_tokens={e['num_computed_tokens']}, num_prompt_tokens="
                f"{e['num_prompt_tokens']}, is_prefilling={e['is_prefilling']}, "
                f"region={e['region']} → {e['forward']}"
            )
            rows.append([step, "route", said])
            if step in kernels:
                label = text(lang, "v_kernels_layer", layer=layer)
                rows.append([step, label, " → ".join(kernels.pop(step))])
        elif kind == "sample":
            detail = text(lang, "v_sample_row", req=e["req_id"], tok=e["token"], pos=e["position"])
            rows.append([step, "sample", detail])
        elif kind != "kernel":
            rows.append([step, kind, event_details(e)])
    return rows


def timeline_html(tracer: Tracer, instance: str = "local", lang: str = "en") -> str:
    """A step-by-request grid: each cell is ``before → after (+scheduled)``, ``*`` where a
    token was sampled; the second column is the step's total of scheduled tokens."""
    req_ids = tracer.requests(instance)
    rows = []
    for s in tracer.step_numbers(instance):
        cells = {
            r["req_id"]: f"{r['num_computed_tokens_before']} → "
            f"{r['num_computed_tokens_after']} (+{r['num_scheduled_tokens']})"
            + (" *" if r["sampled"] is not None else "")
            for r in tracer.step_rows(instance, s)
        }
        total = tracer.first("step", instance, step=s)["total_num_scheduled_tokens"]
        rows.append([s, total] + [cells.get(r, "") for r in req_ids])
    return html_table([text(lang, "w_step"), text(lang, "v_tokens"), *req_ids], rows)


def trace_html(
    tracer: Tracer, instance: str, title: str = "", layer: int = 0, lang: str = "en"
) -> str:
    head = f"<b>{esc(title or instance)}</b>"
    lab = labels(lang)
    headers = [lab["step"], lab["event"], lab["details"]]
    return head + html_table(headers, trace_rows(tracer, instance, layer, lang))


def trace_panels(tracer: Tracer, lang: str = "en") -> widgets.HBox:
    """The traces of P and D side by side."""
    lab = labels(lang)
    boxes = []
    for inst, title in (("P", lab["p_trace"]), ("D", lab["d_trace"])):
        html = trace_html(tracer, inst, title, lang=lang)
        w = widgets.HTML(html, layout=widgets.Layout(flex="1 1 0", min_width="0"))
        boxes.append(w.add_class(f"pdlab-trace-{inst.lower()}"))
    return widgets.HBox(boxes)


class StepPlayer(widgets.VBox):
    """A slider over the steps of one instance of a trace, showing the step table."""

    def __init__(self, tracer: Tracer, instance: str | None = None, lang: str = "en") -> None:
        instances = tracer.instances("step")
        if not (instance in instances if instance else instances):
            raise PdlabValueError("err_no_step_events", instance=instance)
        self.tracer = tracer
        self.instance = instance or instances[0]
        self.steps = tracer.step_numbers(self.instance)
        self.lang, self.lab = lang, labels(lang)
        self.slider = widgets.IntSlider(
            value=self.steps[0], min=self.steps[0], max=self.steps[-1], description=self.lab["step"]
        )
        self.title = widgets.HTML().add_class("pdlab-step-title")
        self.table = widgets.HTML().add_class("pdlab-step-table")
        self.events = widgets.HTML().add_class("pdlab-step-events")
        self.slider.observe(lambda _: self.render(), names="value")
        super().__init__([self.slider, self.title, self.table, self.events])
        self.render()

    def render(self) -> None:
        step = self.slider.value
        ev = self.tracer.filter("step", self.instance, step=step)
        total = ev[0]["total_num_scheduled_tokens"] if ev else 0
        usage = ev[0]["kv_cache_usage"] if ev else 0.0
        head = text(self.lang, "v_player_title", inst=self.instance, step=step)
        sub = text(self.lang, "v_player_sub", total=total, usage=f"{usage:.0%}")
        self.title.value = f"<b>{esc(head)}</b>{esc(sub)}"
        errors = self.tracer.filter("request_error", self.instance, step=step)
        failed = {e["req_id"]: e["error"] for e in errors}
        rows = []
        for r in self.tracer.step_rows(self.instance, step):
            rid, shown = r["req_id"], "" if r["sampled"] is None else r["sampled"]
            if rid in failed:
                shown = f"{self.lab['error']}: {failed[rid]}"
            done = f"{r['num_computed_tokens_before']} → {r['num_computed_tokens_after']}"
            counts = [r["num_prompt_tokens"], r["num_tokens"], done, r["num_scheduled_tokens"]]
            rows.append([rid, *counts, r["forward"], r["block_ids"], shown])
        heads = ["req_id", "num_prompt_tokens", "num_tokens", "num_computed_tokens"]
        heads += ["num_scheduled_tokens", text(self.lang, "v_path"), "block_ids"]
        heads.append(text(self.lang, "v_sampled"))
        self.table.value = html_table(heads, rows or [[self.lab["none"]] + [""] * 7])
        lifecycle = self.tracer.lifecycle_events(self.instance, step)
        evs = [[e.kind, event_details(e)] for e in lifecycle] or [[self.lab["none"], ""]]
        self.events.value = html_table([self.lab["event"], self.lab["details"]], evs)
