"""ipywidgets views of a trace and of live runs, reused by the notebooks.

vLLM has no such views; each one renders pdlab objects that mirror vLLM files:

* :class:`BlockPoolExplorer`: the block pool of ``vllm/v1/core/block_pool.py`` and the block
  tables of ``vllm/v1/core/kv_cache_manager.py``, driven by a real ``Scheduler``
  (``vllm/v1/core/sched/scheduler.py``) with a model-less runner: add, step and free
  requests and watch blocks being allocated, shared by prefix hits, freed and evicted.
* :class:`StepPlayer`: a slider over the steps of a :class:`~pdlab.trace.Tracer`, showing
  what ``Scheduler.schedule()`` gave each request (``num_computed_tokens`` before and after,
  tokens scheduled) and how the attention layer routed it.
* :class:`PDExplorer`: reruns a small :class:`~pdlab.pd.PDPair` (vLLM's P/D proxy flow with
  ``NixlConnector``) whenever the prompt length, block size, ``prefill_context_parallel_size``
  or MLA backend profile changes, and shows D's first step, the path it took
  (``_forward_prefill``/``_forward_decode``, upstream ``forward_mha``/``forward_mqa`` in
  ``vllm/model_executor/layers/attention/mla_attention.py``), the kernels it called, the
  modelled cost for a DeepSeek preset, and whether the tokens equal a colocated run.

Everything shown is read from a trace or from pdlab objects, never typed in. Each widget that
shows a result carries a CSS class ``pdlab-...`` (``pdlab-route``, ``pdlab-cost``,
``pdlab-tokens``, ...) so a browser test can read it. ``lang="zh"`` gives Chinese labels;
vLLM identifiers stay in English.
"""

from __future__ import annotations

import html
import inspect
import textwrap
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets

from pdlab.attention.cost import Cost, decode_path_cost, prefill_path_cost
from pdlab.config import (
    MLA_BACKENDS,
    PRESETS,
    AttentionConfig,
    CacheConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from pdlab.request import Request, RequestStatus, SamplingParams
from pdlab.sched.fake_runner import FakeModelRunner
from pdlab.sched.scheduler import Scheduler
from pdlab.tokenizer import decode
from pdlab.trace import Tracer

LABELS: dict[str, dict[str, str]] = {
    "en": {
        "prompt_len": "prompt length",
        "block_size": "block size",
        "pcp": "prefill_context_parallel_size",
        "mla_backend": "MLA backend",
        "preset": "preset",
        "d_first": "D's first step",
        "route": "routing decision",
        "kernels": "kernels",
        "kernels_note": "D's first step, layer 0 of {layers}",
        "cost": "modelled cost",
        "tokens": "tokens",
        "p_trace": "P: the prefill instance",
        "d_trace": "D: the decode instance",
        "ran": "ran a P/D pair and a colocated engine ({model} model, backend {backend}) "
        "in {s:.2f} s",
        "equal": "equal",
        "differ": "DIFFER",
        "colocated": "colocated",
        "step": "step",
        "event": "event",
        "details": "details",
        "path": "path",
        "per_layer": "per layer",
        "all_layers": "all {n} layers",
        "ratio": "_forward_prefill costs {f:.3g}x the FLOPs "
        "and {b:.3g}x the bytes of _forward_decode",
        "context": "{preset}, one token over context N-1 = {ctx}",
        "error": "error",
        "free": "free",
        "used": "in use",
        "cached": "cached, free",
        "queue": "free queue, evicted first on the left",
        "none": "(none)",
        "prompt": "prompt",
        "add": "add request",
        "do_step": "step",
        "request": "request",
        "do_free": "free",
        "reset": "reset",
        "no_requests": "no requests yet",
    },
    "zh": {
        "prompt_len": "提示长度",
        "block_size": "块大小",
        "pcp": "prefill_context_parallel_size",
        "mla_backend": "MLA 后端",
        "preset": "预设模型",
        "d_first": "D 的第一步",
        "route": "路由结果",
        "kernels": "调用的算子",
        "kernels_note": "D 的第一步，第 0 层（共 {layers} 层）",
        "cost": "成本模型",
        "tokens": "生成的 token",
        "p_trace": "P：prefill 实例",
        "d_trace": "D：decode 实例",
        "ran": "运行了一个 P/D 对和一个单机引擎（{model} 模型，后端 {backend}），用时 {s:.2f} 秒",
        "equal": "一致",
        "differ": "不一致",
        "colocated": "单机",
        "step": "步",
        "event": "事件",
        "details": "内容",
        "path": "路径",
        "per_layer": "每层",
        "all_layers": "全部 {n} 层",
        "ratio": "_forward_prefill 的 FLOPs 是 _forward_decode 的 "
        "{f:.3g} 倍，访存字节是 {b:.3g} 倍",
        "context": "{preset}，一个 token，上下文 N-1 = {ctx}",
        "error": "错误",
        "free": "空闲",
        "used": "使用中",
        "cached": "已缓存、空闲",
        "queue": "空闲队列（左边最先被驱逐）",
        "none": "（无）",
        "prompt": "提示",
        "add": "添加请求",
        "do_step": "执行一步",
        "request": "请求",
        "do_free": "释放",
        "reset": "重置",
        "no_requests": "还没有请求",
    },
}

_TABLE = (
    "border-collapse:collapse;font-family:var(--jp-code-font-family,monospace);"
    "font-size:12px;margin:4px 0"
)
_CELL = "border:1px solid #ccc;padding:1px 6px;text-align:left;vertical-align:top;line-height:1.35;"
# Short columns stay on one line; the last (the long one) may break anywhere.
_NOWRAP, _WRAP = _CELL + "white-space:nowrap", _CELL + "overflow-wrap:anywhere"


def _labels(lang: str) -> dict[str, str]:
    if lang not in LABELS:
        raise ValueError(f"lang={lang!r} is invalid: expected one of {sorted(LABELS)}")
    return LABELS[lang]


def _esc(x: Any) -> str:
    return html.escape(str(x))


def html_table(headers: list[str], rows: list[list[Any]], raw: bool = False) -> str:
    """A small HTML table; cells are escaped unless ``raw``."""
    fmt = (lambda c: str(c)) if raw else _esc
    n = len(headers)
    styles = [_NOWRAP] * (n - 1) + [_WRAP]
    head = "".join(f"<th style='{st}'>{_esc(h)}</th>" for st, h in zip(styles, headers))
    body = "".join(
        "<tr>" + "".join(f"<td style='{st}'>{fmt(c)}</td>" for st, c in zip(styles, r)) + "</tr>"
        for r in rows
    )
    return f"<table style='{_TABLE}'><tr>{head}</tr>{body}</table>"


def fmt_flops(x: float) -> str:
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.3g} FLOP"


def fmt_bytes(x: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.3g} B"


def show_source(obj: Any, start: str | None = None, end: str | None = None) -> Any:
    """The real source of ``obj`` (from ``inspect``), syntax-highlighted in the notebook.

    ``start``/``end``: show only the lines from the first containing ``start`` through the
    first (after it) containing ``end``. A header names the module's file (as imported, e.g.
    ``pdlab/kernels/cache.py``) and the line, so the reader can open it; the code cannot
    drift from the package because it is read from it.
    """
    from IPython.display import Code

    lines, first = inspect.getsourcelines(obj)
    lo, hi = 0, len(lines)
    if start is not None:
        lo = next((i for i, s in enumerate(lines) if start in s), None)
        if lo is None:
            raise ValueError(f"start={start!r} is not in the source of {obj!r}")
    if end is not None:
        found = next((i for i in range(lo, len(lines)) if end in lines[i]), None)
        if found is None:
            raise ValueError(f"end={end!r} is not in the source of {obj!r} after start")
        hi = found + 1
    module = inspect.getmodule(obj)
    short = module.__name__.replace(".", "/") + ".py" if module else "?"
    header = f"# {short}, line {first + lo}\n"
    body = textwrap.dedent("".join(lines[lo:hi])).rstrip()
    return Code(header + body + "\n", language="python")


# ---- trace views ---------------------------------------------------------------------------
def step_rows(tracer: Tracer, instance: str, step: int) -> list[dict[str, Any]]:
    """What the scheduler gave each request at one step of one instance, with the path the
    attention layer took and the token sampled (if any)."""
    ev = tracer.filter("step", instance, step=step)
    if not ev:
        return []
    routes = {e["req_id"]: e for e in tracer.filter("route", instance, step=step)}
    samples = {e["req_id"]: e["token"] for e in tracer.filter("sample", instance, step=step)}
    rows = []
    for r in ev[0]["scheduled"]:
        route = routes.get(r["req_id"], {})
        rows.append(
            {
                **r,
                "forward": route.get("forward", ""),
                "query_len": route.get("query_len", r["num_scheduled_tokens"]),
                "sampled": samples.get(r["req_id"]),
            }
        )
    return rows


_QUIET = ("step", "route", "kernel", "sample")


def step_events(tracer: Tracer, instance: str, step: int) -> list[dict[str, Any]]:
    """The scheduler and connector events of one step (admit, preempt, finish, ...)."""
    return [e for e in tracer.filter(None, instance, step=step) if e["kind"] not in _QUIET]


# Fields of an event not worth a reader's attention in a table (where to connect, etc.).
_NOISE = {
    "kind",
    "instance",
    "step",
    "remote_host",
    "remote_port",
    "remote_request_id",
    "remote_engine_id",
    "reason",
}


def _event_details(e: dict[str, Any]) -> str:
    parts = []
    for k, v in e.items():
        if k in _NOISE or v is None or v == "" or v is False:
            continue
        if isinstance(v, dict):
            v = (
                "{"
                + ", ".join(f"{a}: {b}" for a, b in v.items() if a not in _NOISE and b is not False)
                + "}"
            )
        parts.append(f"{k}={v}")
    return ", ".join(parts)


def trace_rows(tracer: Tracer, instance: str, layer: int = 0) -> list[list[Any]]:
    """One instance's trace as ``[step, event, details]`` rows: every scheduler, connector,
    route and sample event, each step's schedule, and its kernels of one ``layer`` (the
    other layers call the same ones)."""
    rows: list[list[Any]] = []
    kernels: dict[int, list[str]] = {}
    for e in tracer.filter("kernel", instance, layer=layer):
        kernels.setdefault(e["step"], []).append(e["name"])
    for e in tracer.filter(None, instance):
        kind, step = e["kind"], e["step"]
        if kind == "kernel":
            continue
        if kind == "step":
            if not e["scheduled"]:
                continue
            for r in e["scheduled"]:
                rows.append(
                    [
                        step,
                        "schedule",
                        f"{r['req_id']}: num_computed_tokens {r['num_computed_tokens_before']}"
                        f" → {r['num_computed_tokens_after']} "
                        f"(+{r['num_scheduled_tokens']}), num_prompt_tokens "
                        f"{r['num_prompt_tokens']}, blocks {r['block_ids']}",
                    ]
                )
        elif kind == "route":
            rows.append(
                [
                    step,
                    "route",
                    f"{e['req_id']}: query_len={e['query_len']}, "
                    f"num_computed_tokens={e['num_computed_tokens']}, num_prompt_tokens="
                    f"{e['num_prompt_tokens']}, is_prefilling={e['is_prefilling']}, "
                    f"region={e['region']} → {e['forward']}",
                ]
            )
            if step in kernels:
                rows.append([step, f"kernels (layer {layer})", " → ".join(kernels.pop(step))])
        elif kind == "sample":
            rows.append(
                [step, "sample", f"{e['req_id']}: token {e['token']} at position {e['position']}"]
            )
        else:
            rows.append([step, kind, _event_details(e)])
    return rows


def trace_html(tracer: Tracer, instance: str, title: str = "", layer: int = 0) -> str:
    head = f"<b>{_esc(title or instance)}</b>"
    return head + html_table(["step", "event", "details"], trace_rows(tracer, instance, layer))


def trace_panels(
    tracer: Tracer, instances: tuple[str, ...] = ("P", "D"), lang: str = "en"
) -> widgets.HBox:
    """The traces of several instances side by side (P and D by default)."""
    lab = _labels(lang)
    titles = {"P": lab["p_trace"], "D": lab["d_trace"]}
    boxes = []
    for inst in instances:
        w = widgets.HTML(
            trace_html(tracer, inst, titles.get(inst, inst)),
            layout=widgets.Layout(flex="1 1 0", min_width="0"),
        )
        boxes.append(w.add_class(f"pdlab-trace-{inst.lower()}"))
    return widgets.HBox(boxes)


class StepPlayer(widgets.VBox):
    """A slider over the steps of one instance of a trace, showing the step table."""

    def __init__(self, tracer: Tracer, instance: str | None = None, lang: str = "en") -> None:
        steps = tracer.filter("step", instance)
        if not steps:
            raise ValueError(f"the trace has no step events for instance={instance!r}")
        self.tracer = tracer
        self.instance = instance or steps[0]["instance"]
        self.steps = [e["step"] for e in tracer.filter("step", self.instance)]
        self.lab = _labels(lang)
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
        self.title.value = (
            f"<b>instance {_esc(self.instance)}, engine step {step}</b>: "
            f"{total} tokens scheduled, KV cache usage {usage:.0%}"
        )
        rows = [
            [
                r["req_id"],
                r["num_prompt_tokens"],
                r["num_tokens"],
                f"{r['num_computed_tokens_before']} → {r['num_computed_tokens_after']}",
                r["num_scheduled_tokens"],
                r["forward"],
                r["block_ids"],
                "" if r["sampled"] is None else r["sampled"],
            ]
            for r in step_rows(self.tracer, self.instance, step)
        ]
        self.table.value = html_table(
            [
                "req_id",
                "num_prompt_tokens",
                "num_tokens",
                "num_computed_tokens",
                "num_scheduled_tokens",
                "path",
                "block_ids",
                "sampled",
            ],
            rows or [[self.lab["none"]] + [""] * 7],
        )
        evs = [
            [e["kind"], _event_details(e)] for e in step_events(self.tracer, self.instance, step)
        ]
        self.events.value = html_table(
            [self.lab["event"], self.lab["details"]], evs or [[self.lab["none"], ""]]
        )


# ---- the block pool ------------------------------------------------------------------------
def pool_state(scheduler: Scheduler) -> list[dict[str, Any]]:
    """Every block of the scheduler's pool: ``state`` is ``"used"`` (held by a request),
    ``"cached"`` (free but still holding a hashed prefix, can be hit until evicted) or
    ``"free"``; ``queue_pos`` is its place in the free queue (0 is evicted first)."""
    mgr = scheduler.kv_cache_manager
    pool = mgr.block_pool
    queue = {b.block_id: i for i, b in enumerate(pool.free_block_queue)}
    owners: dict[int, list[tuple[str, int]]] = {}
    for rid, blocks in mgr.req_to_blocks.items():
        for j, b in enumerate(blocks):
            owners.setdefault(b.block_id, []).append((rid, j))
    bs = mgr.block_size
    out = []
    for b in pool.blocks:
        held = owners.get(b.block_id, [])
        if b.ref_cnt > 0:
            state = "used"
        else:
            state = "cached" if b.block_hash is not None else "free"
        tokens: list[int] = list(b.token_ids or ())
        if not tokens and held:
            rid, j = held[0]
            req = scheduler.requests[rid]
            tokens = req.all_token_ids[j * bs : min((j + 1) * bs, req.num_computed_tokens)]
        out.append(
            {
                "block_id": b.block_id,
                "state": state,
                "ref_cnt": b.ref_cnt,
                "hash": None if b.block_hash is None else b.block_hash.hex()[:6],
                "owners": [rid for rid, _ in held],
                "queue_pos": queue.get(b.block_id),
                "tokens": tokens,
            }
        )
    return out


_COLORS = {"used": "#9fd19f", "cached": "#f6d28b", "free": "#eeeeee"}


class BlockPoolExplorer(widgets.VBox):
    """A live ``Scheduler`` over a small block pool, with a runner that has no model.

    ``add(prompt)`` queues a request (it is admitted, with any prefix hit, at the next step);
    ``step()`` runs one ``schedule() -> execute_model() -> update_from_output()``;
    ``free(req_id)`` aborts a request, giving its blocks back tail first. The buttons call the
    same methods. Each request generates ``max_tokens`` tokens (all ``'.'``) and then finishes.
    """

    def __init__(
        self,
        block_size: int = 4,
        num_blocks: int = 12,
        max_tokens: int = 6,
        max_num_batched_tokens: int = 64,
        lang: str = "en",
    ) -> None:
        self.lab = _labels(lang)
        self.block_size, self.num_blocks, self.max_tokens = block_size, num_blocks, max_tokens
        self.max_num_batched_tokens = max_num_batched_tokens
        self.prompt = widgets.Text(value="the cat sat on the mat", description=self.lab["prompt"])
        self.add_button = widgets.Button(description=self.lab["add"])
        self.step_button = widgets.Button(description=self.lab["do_step"])
        self.request = widgets.Dropdown(options=[], description=self.lab["request"])
        self.free_button = widgets.Button(description=self.lab["do_free"])
        self.reset_button = widgets.Button(description=self.lab["reset"])
        self.pool_html = widgets.HTML().add_class("pdlab-pool")
        self.tables_html = widgets.HTML().add_class("pdlab-block-tables")
        self.log_html = widgets.HTML().add_class("pdlab-log")
        self.error_html = widgets.HTML().add_class("pdlab-error")
        self.add_button.on_click(lambda _: self._guard(lambda: self.add(self.prompt.value)))
        self.step_button.on_click(lambda _: self._guard(self.step))
        self.free_button.on_click(lambda _: self._guard(lambda: self.free(self.request.value)))
        self.reset_button.on_click(lambda _: self._guard(self.reset))
        super().__init__(
            [
                widgets.HBox([self.prompt, self.add_button, self.step_button]),
                widgets.HBox([self.request, self.free_button, self.reset_button]),
                self.error_html,
                self.pool_html,
                self.tables_html,
                self.log_html,
            ]
        )
        self.reset()

    def reset(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.scheduler = Scheduler(
            SchedulerConfig(max_num_batched_tokens=self.max_num_batched_tokens),
            CacheConfig(block_size=self.block_size, num_blocks=self.num_blocks),
            max_model_len=4096,
            event_hook=lambda kind, f: self.events.append((kind, f)),
        )
        self.runner = FakeModelRunner(sample=lambda rid, pos: ord("."))
        self._ids = 0
        self.render()

    def add(self, prompt: str) -> str:
        rid = f"r{self._ids}"
        self.scheduler.add_request(
            Request(rid, list(prompt.encode("utf-8")), SamplingParams(max_tokens=self.max_tokens))
        )
        self._ids += 1
        self.events.append(("add_request", {"req_id": rid, "num_prompt_tokens": len(prompt)}))
        self.render()
        return rid

    def step(self) -> None:
        so = self.scheduler.schedule()
        out = self.runner.execute_model(so)
        self.scheduler.update_from_output(so, out)
        self.render()

    def free(self, req_id: str | None) -> None:
        if req_id:
            self.scheduler.finish_requests(req_id, RequestStatus.FINISHED_ABORTED)
        self.render()

    def _guard(self, fn: Callable[[], Any]) -> None:
        try:
            self.error_html.value = ""
            fn()
        except Exception as exc:  # shown in the widget: an observer's exception is invisible
            self.error_html.value = (
                f"<pre style='color:#b00'>{self.lab['error']}: {_esc(exc)}</pre>"
            )

    def render(self) -> None:
        sched, bs = self.scheduler, self.block_size
        cells = []
        for b in pool_state(sched):
            text = decode(b["tokens"]).replace(" ", "␣") if b["tokens"] else ""
            sub = [f"ref {b['ref_cnt']}"]
            if b["hash"]:
                sub.append(f"#{b['hash']}")
            if b["queue_pos"] is not None:
                sub.append(f"q{b['queue_pos']}")
            cells.append(
                f"<div style='display:inline-block;width:92px;margin:2px;padding:3px;"
                f"background:{_COLORS[b['state']]};border:1px solid #999;font-size:11px;"
                f"font-family:monospace'><b>block {b['block_id']}</b><br>{_esc(' '.join(sub))}"
                f"<br>{_esc(text) or '&nbsp;'}<br>{_esc(','.join(b['owners'])) or '&nbsp;'}</div>"
            )
        legend = " ".join(
            f"<span style='background:{c};padding:0 6px'>{_esc(self.lab[s])}</span>"
            for s, c in _COLORS.items()
        )
        queue = [
            f"{b.block_id}{'*' if b.block_hash else ''}"
            for b in sched.kv_cache_manager.block_pool.free_block_queue
        ]
        self.pool_html.value = (
            f"<div>{legend} &nbsp; block_size={bs}, "
            f"num_blocks={self.num_blocks}</div><div>{''.join(cells)}</div>"
            f"<div style='font-size:12px'>{_esc(self.lab['queue'])}: "
            f"{_esc(' '.join(queue))} (* = cached)</div>"
        )
        rows = []
        for rid, req in sched.requests.items():
            ids = sched.kv_cache_manager.get_block_ids(rid)
            slots = [
                ids[p // bs] * bs + p % bs
                for p in range(req.num_computed_tokens)
                if p // bs < len(ids)
            ]
            rows.append(
                [
                    rid,
                    req.status.name,
                    f"{req.num_computed_tokens}/{req.num_tokens}",
                    ids,
                    slots[-bs:],
                ]
            )
        self.tables_html.value = html_table(
            [
                "req_id",
                "status",
                "num_computed_tokens/num_tokens",
                "block table",
                "slot_mapping (last computed tokens)",
            ],
            rows or [[self.lab["no_requests"]] + [""] * 4],
        )
        self.request.options = [r for r, q in sched.requests.items() if not q.is_finished()]
        self.log_html.value = html_table(
            [self.lab["event"], self.lab["details"]],
            [[k, _event_details(f)] for k, f in self.events[-8:]] or [[self.lab["none"], ""]],
        )


# ---- the P/D explorer ----------------------------------------------------------------------
_TEXT = "The quick brown fox jumps over the lazy dog. "


def prompt_of_length(n: int) -> str:
    """An ASCII prompt of exactly ``n`` tokens under the byte tokenizer."""
    if n < 1:
        raise ValueError(f"n={n} is invalid: expected a prompt length >= 1")
    return (_TEXT * (n // len(_TEXT) + 1))[:n]


@dataclass
class PDRun:
    """One P/D run and its colocated twin, with the values the explorer shows."""

    prompt_len: int
    block_size: int
    pcp: int
    mla_backend: str
    tracer: Tracer
    pd_tokens: list[int]
    colocated_tokens: list[int]
    seconds: float
    backend: str
    model: str

    @property
    def d_first_step(self) -> dict[str, Any]:
        """D's first step that computed tokens: ``route`` event fields (query_len,
        num_computed_tokens before the step, num_prompt_tokens, is_prefilling, region,
        decode_threshold, treat_short_extends_as_decodes, path, forward)."""
        return self.tracer.first("route", "D")

    @property
    def remote_kv_ready(self) -> dict[str, Any]:
        return self.tracer.first("remote_kv_ready", "D")

    def kernels(self, instance: str = "D", layer: int = 0) -> list[str]:
        """Kernels of the instance's first computing step, one layer."""
        step = self.tracer.first("route", instance)["step"]
        return [
            e["name"] + (f" ({e['shapes']['part']})" if "part" in e["shapes"] else "")
            for e in self.tracer.filter("kernel", instance, step=step, layer=layer)
        ]

    def traced_cost(self, instance: str = "D") -> Cost:
        """FLOPs and bytes of the instance's first computing step, summed over its kernels."""
        step = self.tracer.first("route", instance)["step"]
        c = Cost()
        for e in self.tracer.filter("kernel", instance, step=step):
            c.add(f"{e['name']} (layer {e['layer']})", e["flops"], e["bytes"])
        return c

    @property
    def tokens_equal(self) -> bool:
        return self.pd_tokens == self.colocated_tokens


def run_pd(
    prompt_len: int,
    block_size: int = 4,
    pcp: int = 1,
    max_tokens: int = 3,
    backend: str = "torch",
    model_config: ModelConfig | None = None,
    mla_backend: str = "triton_mla",
) -> PDRun:
    """Run a prompt of ``prompt_len`` tokens through a P/D pair and a colocated engine."""
    from pdlab.engine import LLMEngine, one_thread
    from pdlab.pd import PDPair

    cfg = model_config or ModelConfig.tiny()
    cache = CacheConfig(block_size=block_size)
    sched = SchedulerConfig()
    routing = {
        "attention_config": AttentionConfig(mla_backend),
        "parallel_config": ParallelConfig(pcp),
    }
    prompt = prompt_of_length(prompt_len)
    sp = SamplingParams(max_tokens=max_tokens)
    t0 = time.perf_counter()
    with one_thread():
        pair = PDPair(cfg, cache, sched, backend=backend, **routing)
        pd_out = pair.generate(prompt, sp)[0]
        colocated = LLMEngine(cfg, cache, sched, backend=backend, **routing)
        colocated_out = colocated.generate(prompt, sp)[0]
    return PDRun(
        prompt_len,
        block_size,
        pcp,
        routing["attention_config"].backend,
        pair.tracer,
        list(pd_out.output_token_ids),
        list(colocated_out.output_token_ids),
        time.perf_counter() - t0,
        backend,
        cfg.name,
    )


def route_text(route: dict[str, Any], lang: str = "en") -> str:
    """The routing decision in one line, with the values ``split_decodes_and_prefills`` read
    (upstream's test: ``query_len > decode_threshold``, OR-ed with ``is_prefilling`` when
    ``treat_short_extends_as_decodes`` is False)."""
    c, p, q = route["num_computed_tokens"], route["num_prompt_tokens"], route["query_len"]
    t, treat = route["decode_threshold"], route["treat_short_extends_as_decodes"]
    prefilling = f"is_prefilling = {c} {'<' if c < p else '>='} {p} = {route['is_prefilling']}"
    threshold = f"query_len = {q} {'>' if q > t else '<='} decode_threshold = {t}"
    switch = f"treat_short_extends_as_decodes = {treat}"
    region = {"en": f"region {route['region']}", "zh": f"{route['region']} 区"}[lang]
    kind = {"en": f"a {route['path']}", "zh": f"按 {route['path']} 处理"}[lang]
    return f"{prefilling}; {region}; {threshold}; {switch} → {kind} → {route['forward']}"


def path_costs(preset: str, context_len: int) -> tuple[ModelConfig, Cost, Cost]:
    """The preset's config and the modelled cost, per layer, of one token over
    ``context_len`` cached tokens through ``_forward_prefill`` and ``_forward_decode``."""
    cfg = ModelConfig.preset(preset)
    return cfg, prefill_path_cost(cfg, context_len), decode_path_cost(cfg, context_len)


def cost_html(preset: str, context_len: int, forward: str, lang: str = "en") -> str:
    lab = _labels(lang)
    cfg, pre, dec = path_costs(preset, context_len)
    n = cfg.num_hidden_layers
    rows = []
    for name, c in (("_forward_prefill", pre), ("_forward_decode", dec)):
        mark = "▶ " if name == forward else ""
        rows.append(
            [
                f"{mark}{name}",
                fmt_flops(c.flops),
                fmt_bytes(c.bytes),
                fmt_flops(n * c.flops),
                fmt_bytes(n * c.bytes),
            ]
        )
    ratio = lab["ratio"].format(f=pre.flops / dec.flops, b=pre.bytes / dec.bytes)
    table = html_table(
        [
            lab["path"],
            f"FLOPs, {lab['per_layer']}",
            f"bytes, {lab['per_layer']}",
            f"FLOPs, {lab['all_layers'].format(n=n)}",
            f"bytes, {lab['all_layers'].format(n=n)}",
        ],
        rows,
    )
    return (
        f"<div>{_esc(lab['context'].format(preset=cfg.name, ctx=context_len))}</div>"
        f"{table}<div>{_esc(ratio)}</div>"
    )


def tokens_text(run: PDRun, lang: str = "en") -> str:
    lab = _labels(lang)
    verdict = lab["equal"] + " ✓" if run.tokens_equal else lab["differ"] + " ✗"
    return (
        f"P/D: {run.pd_tokens} {decode(run.pd_tokens)!r} | {lab['colocated']}: "
        f"{run.colocated_tokens} {decode(run.colocated_tokens)!r} → {verdict}"
    )


class PDExplorer(widgets.VBox):
    """Rerun a small P/D pair (tiny model, torch backend) whenever a control changes, and
    show D's first step, its routing decision, its kernels, the modelled cost for a preset
    at context ``N - 1``, and whether P/D's tokens equal a colocated run's."""

    def __init__(
        self,
        prompt_len: int = 11,
        block_size: int = 4,
        pcp: int = 1,
        preset: str = "deepseek-v3",
        lang: str = "en",
        max_tokens: int = 3,
        backend: str = "torch",
        mla_backend: str = "triton_mla",
    ) -> None:
        self.lang, self.lab = lang, _labels(lang)
        self.max_tokens, self.backend = max_tokens, backend
        style = {"description_width": "initial"}
        self.prompt_len = widgets.IntSlider(
            value=prompt_len,
            min=2,
            max=96,
            description=self.lab["prompt_len"],
            continuous_update=False,
            style=style,
            layout=widgets.Layout(width="360px"),
        )
        small = widgets.Layout(width="170px")
        self.block_size = widgets.Dropdown(
            options=[1, 2, 4, 8, 16, 64],
            value=block_size,
            description=self.lab["block_size"],
            style=style,
            layout=small,
        )
        self.pcp = widgets.Dropdown(
            options=[1, 2],
            value=pcp,
            description=self.lab["pcp"],
            style=style,
            layout=widgets.Layout(width="260px"),
        )
        self.mla_backend = widgets.Dropdown(
            options=list(MLA_BACKENDS),
            value=AttentionConfig(mla_backend).backend,
            description=self.lab["mla_backend"],
            style=style,
            layout=widgets.Layout(width="240px"),
        )
        self.preset = widgets.Dropdown(
            options=list(PRESETS),
            value=preset,
            description=self.lab["preset"],
            style=style,
            layout=widgets.Layout(width="240px"),
        )
        self.status = widgets.HTML().add_class("pdlab-status")
        self.error = widgets.HTML().add_class("pdlab-error")
        self.d_step = widgets.HTML().add_class("pdlab-d-step")
        self.route = widgets.HTML().add_class("pdlab-route")
        self.kernels = widgets.HTML().add_class("pdlab-kernels")
        self.cost = widgets.HTML().add_class("pdlab-cost")
        self.tokens = widgets.HTML().add_class("pdlab-tokens")
        self.traces = widgets.HBox()
        self.run: PDRun | None = None
        for w in (self.prompt_len, self.block_size, self.pcp, self.mla_backend):
            w.observe(lambda _: self.rerun(), names="value")
        self.preset.observe(lambda _: self._guard(self.render_cost), names="value")

        def row(key: str, w: widgets.Widget) -> widgets.HBox:
            label = widgets.HTML(
                f"<b>{_esc(self.lab[key])}</b>", layout=widgets.Layout(min_width="130px")
            )
            return widgets.HBox([label, w])

        wrap = widgets.Layout(flex_flow="row wrap")
        super().__init__(
            [
                widgets.HBox(
                    [self.prompt_len, self.block_size, self.pcp, self.mla_backend, self.preset],
                    layout=wrap,
                ),
                self.status,
                self.error,
                row("d_first", self.d_step),
                row("route", self.route),
                row("kernels", self.kernels),
                row("cost", self.cost),
                row("tokens", self.tokens),
                self.traces,
            ]
        )
        self.rerun()

    def _guard(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
            self.error.value = ""
        except Exception:  # shown in the widget: an observer's exception is invisible
            self.error.value = f"<pre style='color:#b00'>{_esc(traceback.format_exc())}</pre>"

    def rerun(self) -> None:
        self._guard(self._rerun)

    def _rerun(self) -> None:
        run = run_pd(
            self.prompt_len.value,
            self.block_size.value,
            self.pcp.value,
            self.max_tokens,
            self.backend,
            mla_backend=self.mla_backend.value,
        )
        self.run = run
        lab = self.lab
        self.status.value = _esc(
            lab["ran"].format(model=run.model, backend=run.backend, s=run.seconds)
        )
        r = run.d_first_step
        n = r["num_prompt_tokens"]
        n1 = "N-1" if r["num_computed_tokens"] == n - 1 else "≠ N-1"
        self.d_step.value = (
            f"<code>query_len = {r['query_len']}, num_computed_tokens = {n1} = "
            f"{r['num_computed_tokens']}, num_prompt_tokens = N = {n}</code>"
        )
        self.route.value = f"<code>{_esc(route_text(r, self.lang))}</code>"
        layers = len({e["layer"] for e in run.tracer.filter("kernel", "D")})
        self.kernels.value = (
            f"<code>{_esc(' → '.join(run.kernels('D')))}</code>"
            f"<div style='font-size:11px'>"
            f"{_esc(lab['kernels_note'].format(layers=layers))}</div>"
        )
        self.render_cost()
        self.tokens.value = f"<code>{_esc(tokens_text(run, self.lang))}</code>"
        self.traces.children = trace_panels(run.tracer, ("P", "D"), self.lang).children

    def render_cost(self) -> None:
        if self.run is None:
            return
        r = self.run.d_first_step
        self.cost.value = cost_html(
            self.preset.value, r["num_computed_tokens"], r["forward"], self.lang
        )
