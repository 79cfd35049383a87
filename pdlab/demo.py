"""The demonstration every view shows: one prompt through a P/D pair and through a colocated
engine, recorded in one trace, returned as one :class:`Demo`.

The tour, the notebooks' P/D explorer and ``pdlab trace --pd`` all run it. ``compare`` adds
what the tour puts side by side, all of :data:`PARTS` or the ones a view reads: ``"variants"``
(D's first step under the set-ups of :data:`VARIANTS`), ``"again"`` (the same prompt again on
the colocated engine: a prefix-cache hit, capped at ``N - 1``) and ``"fresh"`` (the prompt as
a fresh request under FLASH_ATTN_MLA, the backend vLLM picks on an H100/H200, where P's own
short prompt takes the absorbed decode path). With ``num_speculative_tokens`` the pair runs
DeepSeek's MTP drafter and the colocated engine does not; the pair then runs the prompt once
more (``pd_again_id``), so that the trace holds a local prefix hit behind the connector.

The model is ``model_config`` (default ``ModelConfig.tiny()``, the trained checkpoint pdlab
ships). The pair is driven as vLLM's P/D proxy drives two servers (``pdlab/disagg/pair.py``).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from pdlab.disagg.pair import PDPair
from pdlab.engine.config import (
    AttentionConfig,
    CacheConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    SpeculativeConfig,
    resolve_model_runner,
)
from pdlab.engine.events import TraceEvent
from pdlab.engine.llm_engine import LLMEngine, one_thread
from pdlab.engine.math_utils import cdiv
from pdlab.engine.request import SamplingParams
from pdlab.engine.trace import Tracer
from pdlab.errors import Phrase, invalid
from pdlab.sim.kernel_costs import Cost, traced_cost

# A sentence of the trained model's corpus (pdlab/tools/corpus.py): its continuations read.
_TEXT = "The KV cache holds keys and values, not hidden states. "

# (model_runner, prefill_context_parallel_size): the set-ups ``compare`` runs, default first.
VARIANTS: tuple[tuple[str, int], ...] = (("v2", 1), ("v2", 2), ("v1", 1))
# What ``compare`` can add to the P/D pair and the colocated run (see the module docstring).
PARTS = ("again", "variants", "fresh")


def prompt_of_length(n: int) -> str:
    """An ASCII prompt of exactly ``n`` tokens under the byte tokenizer."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise invalid("n", n, Phrase("err_x_prompt_len_ge", n=1))
    return (_TEXT * (n // len(_TEXT) + 1))[:n]


@dataclass
class Demo:
    """What one demonstration did. ``trace`` holds instances ``P``, ``D`` and ``local`` (the
    colocated engine); ``variant_traces`` one trace per :data:`VARIANTS` entry (the main
    run's among them)."""

    prompt: str
    prompt_ids: list[int]
    request_id: str  # the pair's request (the same id on P and D)
    cfg: ModelConfig
    block_size: int
    pcp: int
    mla_backend: str
    backend: str
    trace: Tracer
    pd_tokens: list[int]
    colocated_tokens: list[int]
    seconds: float
    local_ids: list[str] = field(default_factory=list)  # colocated requests, in order
    fresh_trace: Tracer | None = None
    model_runner: str = "v2"
    variant_traces: dict[tuple[str, int], Tracer] = field(default_factory=dict)
    variant_tokens: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    num_speculative_tokens: int = 0  # K: the pair drafts with MTP; the colocated run does not
    pd_again_id: str | None = None

    @property
    def other_pcp(self) -> int | None:
        """The ``prefill_context_parallel_size`` on the other side of 1 (with ``compare``)."""
        return (2 if self.pcp == 1 else 1) if self.variant_traces else None

    @property
    def other_trace(self) -> Tracer | None:
        return self.variant_traces.get(("v2", self.other_pcp))

    @property
    def other_tokens(self) -> list[int] | None:
        return self.variant_tokens.get(("v2", self.other_pcp))

    @property
    def tokens_equal(self) -> bool:
        """P/D equals colocated (and every other set-up, when they ran), token for token."""
        same = self.pd_tokens == self.colocated_tokens
        return same and all(t == self.pd_tokens for t in self.variant_tokens.values())

    @property
    def d_first_step(self) -> TraceEvent:
        """The ``route`` event of D's first computing step."""
        return self.trace.route_of("D", self.request_id)

    @property
    def remote_kv_ready(self) -> TraceEvent:
        return self.trace.first("remote_kv_ready", "D", req_id=self.request_id)

    def kernels(self, instance: str = "D", layer: int = 0) -> list[str]:
        """Kernels of the instance's first computing step, one layer."""
        step = self.trace.first_step(instance, self.request_id)
        return [
            e["name"] + (f" ({e['shapes']['part']})" if "part" in e["shapes"] else "")
            for e in self.trace.kernels(instance, step, layer=layer)
        ]

    def traced_cost(self, instance: str = "D") -> Cost:
        """FLOPs and bytes of the instance's first computing step, summed over its kernels."""
        step = self.trace.first_step(instance, self.request_id)
        return traced_cost(self.trace.kernels(instance, step))


def run_demo(
    prompt: str | int,
    *,
    block_size: int = 4,
    pcp: int = 1,
    mla_backend: str | None = None,
    max_tokens: int = 8,
    backend: str = "torch",
    model_config: ModelConfig | None = None,
    compare: bool | Collection[str] = False,
    gpu: str | None = None,
    model_runner: str | None = None,
    num_speculative_tokens: int = 0,
) -> Demo:
    """Run ``prompt`` (text, or a length for :func:`prompt_of_length`) through a P/D pair and
    a colocated engine with the given routing settings (see the module docstring)."""
    parts = set(PARTS if compare is True else (compare or ()))
    if parts - set(PARTS):
        raise invalid("compare", sorted(parts), Phrase("err_x_parts_of", whole=PARTS))
    text = prompt_of_length(prompt) if isinstance(prompt, int) else prompt
    if not text:
        raise invalid("prompt", "", Phrase("err_x_one_token"))
    cfg = model_config or ModelConfig.tiny()
    spec = None
    if num_speculative_tokens:
        spec = SpeculativeConfig(num_speculative_tokens=num_speculative_tokens)
        if not cfg.num_nextn_predict_layers:
            cfg = cfg.replace(num_nextn_predict_layers=1)
    # Enough blocks for any prompt the model accepts (longer ones fail with a clear error).
    # Under speculative decoding a row also holds K drafts and the MTP layer's K slots.
    extra = 2 * num_speculative_tokens if num_speculative_tokens else 0
    need = cdiv(len(text.encode("utf-8")) + max_tokens + extra, block_size)
    cache = CacheConfig(block_size=block_size, num_blocks=max(256, need + 1))
    sp = SamplingParams(max_tokens=max_tokens)
    attn = AttentionConfig(mla_backend, gpu)

    runner = resolve_model_runner(model_runner, ParallelConfig(pcp))

    def routing(size: int, run: str = runner, drafts: bool = True) -> dict[str, Any]:
        return {
            "attention_config": attn,
            "parallel_config": ParallelConfig(size),
            "model_runner": run,
            "speculative_config": spec if drafts else None,
        }

    t0 = time.perf_counter()
    with one_thread():
        pair = PDPair(cfg, cache, SchedulerConfig(), backend=backend, **routing(pcp))
        pd_out = pair.generate(text, sp)[0]
        again_id = pair.generate(text, sp)[0].request_id if spec is not None else None
        shared = {"backend": backend, "model": pair.prefill.model}
        local_kw = {"tracer": pair.tracer, **shared, **routing(pcp, drafts=False)}
        local = LLMEngine(cfg, cache, SchedulerConfig(), **local_kw)
        outs = [local.generate(text, sp)[0]]
        extra: dict[str, Any] = {}
        if "again" in parts:
            outs.append(local.generate(text, sp)[0])  # a prefix-cache hit: capped at N - 1
        if "variants" in parts:
            traces = {(runner, pcp): pair.tracer}
            toks = {(runner, pcp): list(pd_out.output_token_ids)}
            for run, size in VARIANTS:
                if (run, size) not in traces:
                    vp = PDPair(
                        cfg, cache, SchedulerConfig(), backend=backend, **routing(size, run)
                    )
                    toks[(run, size)] = list(vp.generate(text, sp)[0].output_token_ids)
                    traces[(run, size)] = vp.tracer
            extra.update(variant_traces=traces, variant_tokens=toks)
        if "fresh" in parts:
            fresh_attn = AttentionConfig("flash_attn_mla", "h200")
            fresh = LLMEngine(cfg, cache, SchedulerConfig(), **shared, attention_config=fresh_attn)
            fresh.generate(text, SamplingParams(max_tokens=1))
            extra["fresh_trace"] = fresh.tracer
    pair.tracer.meta["demo"] = {
        "prompt": text,
        "prefill_context_parallel_size": pcp,
        "mla_backend": attn.backend,
        "model_runner": runner,
        "max_tokens": max_tokens,
        "num_speculative_tokens": num_speculative_tokens,
    }
    return Demo(
        prompt=text,
        prompt_ids=list(pd_out.prompt_token_ids),
        request_id=pd_out.request_id,
        cfg=cfg,
        block_size=block_size,
        pcp=pcp,
        mla_backend=attn.backend,
        backend=backend,
        trace=pair.tracer,
        pd_tokens=list(pd_out.output_token_ids),
        colocated_tokens=list(outs[0].output_token_ids),
        seconds=time.perf_counter() - t0,
        local_ids=[o.request_id for o in outs],
        model_runner=runner,
        num_speculative_tokens=num_speculative_tokens,
        pd_again_id=again_id,
        **extra,
    )
