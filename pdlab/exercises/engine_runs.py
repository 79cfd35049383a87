"""The small engines the graders run the learner's code in: a P/D pair and a colocated
engine on the tiny model with the torch kernels (fast on any CPU), and the step table of
what an instance did, as text a terminal shows whole at 80 columns."""

from __future__ import annotations

import functools
import io
import textwrap
from collections.abc import Sequence
from typing import Any

from rich.console import Console

from pdlab.catalog import text
from pdlab.disagg.pair import PDPair
from pdlab.engine.config import CacheConfig, ModelConfig, ParallelConfig, SchedulerConfig
from pdlab.engine.llm_engine import LLMEngine
from pdlab.engine.model_executor.models.deepseek_v2 import DeepseekV2ForCausalLM
from pdlab.engine.request import SamplingParams
from pdlab.engine.trace import Tracer
from pdlab.errors import error_text
from pdlab.ui.console import step_table
from pdlab.ui.fmt import wrap_cells

BLOCK_SIZE = 4
NUM_BLOCKS = 64
MAX_TOKENS = 4


@functools.lru_cache(maxsize=1)
def tiny() -> tuple[ModelConfig, DeepseekV2ForCausalLM]:
    cfg = ModelConfig.tiny()
    return cfg, DeepseekV2ForCausalLM(cfg)


def pair(pcp: int = 1, **kw: Any) -> PDPair:
    """A P/D pair on the tiny model (both sides load the same seeded weights)."""
    cfg, _ = tiny()
    parallel = ParallelConfig(prefill_context_parallel_size=pcp)
    return PDPair(cfg, CacheConfig(block_size=BLOCK_SIZE, num_blocks=NUM_BLOCKS),
                  kw.pop("scheduler_config", SchedulerConfig()), backend="torch",
                  parallel_config=parallel, **kw)  # fmt: skip


def fail_blocks_from(pair: PDPair, first: int) -> None:
    """The first receive D's worker reports lands with its blocks from index ``first`` on
    unreadable (``get_block_ids_with_load_errors``), as a partly failed NIXL read does."""
    conn, sched = pair.d_connector, pair.decode.scheduler
    get_finished, load_errors = conn.get_finished, conn.get_block_ids_with_load_errors
    state: dict[str, Any] = {"bad": set(), "done": False}

    def finished(*a: Any, **k: Any) -> Any:
        sending, recving = get_finished(*a, **k)
        for rid in sorted(recving or ()):
            if not state["done"]:
                state["bad"] = set(sched.kv_cache_manager.get_block_ids(rid)[first:])
                state["done"] = True
        return sending, recving

    def errors() -> set[int]:
        bad, state["bad"] = state["bad"], set()
        return set(load_errors() or ()) | bad

    conn.get_finished, conn.get_block_ids_with_load_errors = finished, errors


def colocated(**kw: Any) -> LLMEngine:
    """One engine that prefills and decodes, on the same weights as :func:`pair`."""
    cfg, model = tiny()
    cache = CacheConfig(**{"block_size": BLOCK_SIZE, "num_blocks": NUM_BLOCKS,
                           **kw.pop("cache", {})})  # fmt: skip
    return LLMEngine(cfg, cache, kw.pop("scheduler_config", SchedulerConfig()), model=model,
                     backend="torch", parallel_config=ParallelConfig(), **kw)  # fmt: skip


@functools.lru_cache(maxsize=64)
def colocated_tokens(prompt: tuple[int, ...], max_tokens: int = MAX_TOKENS) -> list[int]:
    """The tokens a colocated engine generates for ``prompt`` (greedy)."""
    out = colocated().generate(list(prompt), SamplingParams(max_tokens=max_tokens))
    return out[0].output_token_ids


def pcp_or_chunked(pd: bool) -> tuple[list[list[int]], list[list[int]], Tracer]:
    """D's one-token step: a P/D pair under prefill context parallelism generating for 13
    tokens, or (not ``pd``) a colocated engine prefilling 14 in chunks of 5. Its tokens, the
    colocated engine's (what they must be) and its trace."""
    prompt = prompt_of(13 if pd else 14)
    budget = SchedulerConfig(max_num_batched_tokens=5)
    engine: Any = pair(2) if pd else colocated(scheduler_config=budget)
    out = tokens(engine.generate(prompt, SamplingParams(max_tokens=MAX_TOKENS)))
    return out, [colocated_tokens(tuple(prompt))], engine.tracer


def prompt_of(n: int, salt: int = 0) -> list[int]:
    """A prompt of ``n`` byte tokens (no randomness: the case names its length)."""
    return [(7 * i + 3 * n + salt) % 256 for i in range(n)]


def table_text(trace: Tracer, instance: str | None, lang: str, rows: int = 6) -> str:
    """The step table of ``instance`` (its first ``rows`` rows) as plain text, 80 wide."""
    kept = Tracer()
    kept.meta.update(trace.meta)
    shown = {(r["instance"], r["step"]) for r in trace.step_rows(instance)[:rows]}
    for ev in trace.events:
        if ev.kind != "step" or (ev.instance, ev.step) in shown:
            kept.events.append(ev)
    table = step_table(kept, instance, lang=lang)  # it picks a layout that fits 80 columns
    buf = io.StringIO()
    Console(file=buf, width=80, color_system=None, highlight=False).print(table)
    return buf.getvalue().rstrip()


def said(message: str | None, lang: str) -> str:
    """The engine's own error message, wrapped at 80 columns (or nothing)."""
    if not message:
        return ""
    if lang != "zh":
        return "\n".join(textwrap.wrap(text(lang, "ex_engine_said", message=message), 80))
    zh = text(lang, "ex_engine_said", message=error_text(message, "zh"))
    return "\n".join(wrap_cells(zh, 80, ""))


def tokens(outputs: Sequence[Any]) -> list[list[int]]:
    return [o.output_token_ids for o in outputs]
