"""A live block pool for notebooks: a real ``Scheduler`` (``vllm/v1/core/sched/scheduler.py``)
over a small pool (``vllm/v1/core/block_pool.py``) with a runner that has no model. Add, step
and free requests and watch blocks being allocated, shared by prefix hits, freed and evicted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from pdlab.catalog import labels
from pdlab.engine.config import CacheConfig, SchedulerConfig
from pdlab.engine.core.sched.scheduler import Scheduler
from pdlab.engine.request import Request, RequestStatus, SamplingParams
from pdlab.engine.tokenizer import printable
from pdlab.engine.worker.fake_runner import FakeModelRunner
from pdlab.errors import error_text
from pdlab.ui.fmt import esc, html_table
from pdlab.ui.trace_views import event_details


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
        state = "used" if b.ref_cnt > 0 else "cached" if b.block_hash is not None else "free"
        tokens: list[int] = list(b.token_ids or ())
        if not tokens and held:
            rid, j = held[0]
            req = scheduler.requests[rid]
            tokens = req.all_token_ids[j * bs : min((j + 1) * bs, req.num_computed_tokens)]
        digest = None if b.block_hash is None else b.block_hash.hex()[:6]
        row = {"block_id": b.block_id, "state": state, "ref_cnt": b.ref_cnt, "hash": digest}
        row["owners"] = [rid for rid, _ in held]
        out.append(row | {"queue_pos": queue.get(b.block_id), "tokens": tokens})
    return out


_COLORS = {"used": "#9fd19f", "cached": "#f6d28b", "free": "#eeeeee"}


class BlockPoolExplorer(widgets.VBox):
    """``add(prompt)`` queues a request (admitted, with any prefix hit, at the next step);
    ``step()`` runs one ``schedule() -> execute_model() -> update_from_output()``;
    ``free(req_id)`` aborts a request, giving its blocks back tail first. The buttons call the
    same methods. Each request generates ``max_tokens`` tokens (all ``'.'``) and finishes."""

    def __init__(
        self,
        block_size: int = 4,
        num_blocks: int = 12,
        max_tokens: int = 6,
        max_num_batched_tokens: int = 64,
        lang: str = "en",
    ) -> None:
        self.lang, self.lab = lang, labels(lang)
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
        add = widgets.HBox([self.prompt, self.add_button, self.step_button])
        free = widgets.HBox([self.request, self.free_button, self.reset_button])
        shown = [self.error_html, self.pool_html, self.tables_html, self.log_html]
        super().__init__([add, free, *shown])
        self.reset()

    def reset(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        sched = SchedulerConfig(max_num_batched_tokens=self.max_num_batched_tokens)
        cache = CacheConfig(block_size=self.block_size, num_blocks=self.num_blocks)
        emit = lambda kind, **f: self.events.append((kind, f))
        self.scheduler = Scheduler(sched, cache, max_model_len=4096, emit=emit)
        self.runner = FakeModelRunner(sample=lambda rid, pos: ord("."))
        self._ids = 0
        self.render()

    def add(self, prompt: str) -> str:
        rid = f"r{self._ids}"
        sp = SamplingParams(max_tokens=self.max_tokens)
        self.scheduler.add_request(Request(rid, list(prompt.encode("utf-8")), sp))
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
            said = esc(exc) if self.lang != "zh" else esc(error_text(exc, "zh"))
            colon = "：" if self.lang == "zh" else ": "
            said = f"{self.lab['error']}{colon}{said}"
            self.error_html.value = f"<pre style='color:#b00'>{said}</pre>"

    def render(self) -> None:
        sched, bs = self.scheduler, self.block_size
        cells = []
        for b in pool_state(sched):
            text = printable(b["tokens"], quote=False).replace(" ", "␣") if b["tokens"] else ""
            sub = [f"ref {b['ref_cnt']}"]
            if b["hash"]:
                sub.append(f"#{b['hash']}")
            if b["queue_pos"] is not None:
                sub.append(f"q{b['queue_pos']}")
            cells.append(
                f"<div style='display:inline-block;width:92px;margin:2px;padding:3px;"
                f"background:{_COLORS[b['state']]};border:1px solid #999;font-size:11px;"
                f"font-family:monospace'><b>{esc(self.lab['block_n'].format(id=b['block_id']))}"
                f"</b><br>{esc(' '.join(sub))}"
                f"<br>{esc(text) or '&nbsp;'}<br>{esc(','.join(b['owners'])) or '&nbsp;'}</div>"
            )
        legend = " ".join(
            f"<span style='background:{c};padding:0 6px'>{esc(self.lab[s])}</span>"
            for s, c in _COLORS.items()
        )
        free_queue = sched.kv_cache_manager.block_pool.free_block_queue
        queue = [f"{b.block_id}{'*' if b.block_hash else ''}" for b in free_queue]
        self.pool_html.value = (
            f"<div>{legend} &nbsp; block_size={bs}, "
            f"num_blocks={self.num_blocks}</div><div>{''.join(cells)}</div>"
            f"<div style='font-size:12px'>{esc(self.lab['queue'])}: "
            f"{esc(' '.join(queue))} {esc(self.lab['cached_mark'])}</div>"
        )
        rows = []
        for rid, req in sched.requests.items():
            ids = sched.kv_cache_manager.get_block_ids(rid)
            held = range(min(req.num_computed_tokens, len(ids) * bs))  # positions with a slot
            slots = [ids[p // bs] * bs + p % bs for p in held]
            done = f"{req.num_computed_tokens}/{req.num_tokens}"
            rows.append([rid, req.status.name, done, ids, slots[-bs:]])
        heads = ["req_id", self.lab["status"], "num_computed_tokens/num_tokens"]
        heads += [self.lab["block_table"], self.lab["slots_last"]]
        self.tables_html.value = html_table(heads, rows or [[self.lab["no_requests"]] + [""] * 4])
        self.request.options = [r for r, q in sched.requests.items() if not q.is_finished()]
        log = [[k, event_details(f)] for k, f in self.events[-8:]] or [[self.lab["none"], ""]]
        self.log_html.value = html_table([self.lab["event"], self.lab["details"]], log)
