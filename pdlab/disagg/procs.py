"""P and D as two processes that exchange K/V over ``torch.distributed``.

The same engines and connector as ``pdlab/disagg/pair.py``, with
:class:`~pdlab.engine.distributed.kv_transfer.dist. DistTransport` between them: rank 0 is the
prefill instance (which here also plays vLLM's proxy: it holds the prompts, forwards each finished
prefill to D with its ``kv_transfer_params`` and collects D's answers), rank 1 is the decode
instance. By default both run on this machine on 127.0.0.1 and a free port; ``host``/``port`` let
them run on two machines (``pdlab pd --role prefill`` on one, ``pdlab pd --role decode`` on the
other).

Every wait is bounded and waits on an event, not a sleep: a D that dies ends P's pending
``recv`` at once, so P frees the blocks it held for D right away (``kv_transfer_timeout_s``
only covers a D that is alive but never reads). A peer that never comes, a port in use and
a peer that differs in anything both must share (:func:`pair_identity`) are each one line.
The launcher (``pdlab/disagg/launch.py``) imports this module, never the reverse.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from pdlab.disagg.designs import HandOff, check_first_token_mode, hand_off, prefill_params
from pdlab.disagg.group import join_group
from pdlab.disagg.pair import PDPair
from pdlab.engine.config import CacheConfig, ModelConfig, SchedulerConfig
from pdlab.engine.events import TraceEvent
from pdlab.engine.request import SamplingParams
from pdlab.engine.trace import Tracer
from pdlab.errors import PdlabError, one_line

if TYPE_CHECKING:
    from pdlab.engine.distributed.kv_transfer.dist import DistTransport
    from pdlab.engine.distributed.kv_transfer.pd_connector import PDConnector
    from pdlab.engine.llm_engine import LLMEngine


@dataclass
class InstanceSummary:
    role: str
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[TraceEvent] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)  # this side's trace.meta
    steps: int = 0
    num_free_blocks: int = 0
    num_blocks: int = 0
    bytes_sent: int = 0
    peer_failed: str | None = None
    seconds: float = 0.0
    # time.monotonic() (one clock for every process of this machine) when this side
    # noticed the peer's death, and when every block it held was free again
    peer_failed_at: float | None = None
    blocks_freed_at: float | None = None


def _build(
    role: str,
    model_config: ModelConfig,
    cache_config: CacheConfig,
    scheduler_config: SchedulerConfig,
    backend: str | None,
    host: str,
    port: int,
    seed: int,
    timeout_s: float,
    engine_kwargs: dict[str, Any] | None = None,
) -> tuple[LLMEngine, PDConnector, DistTransport]:
    """Join the two-process group (P is rank 0), agree with the peer (:func:`pair_identity`),
    then build this side's engine."""
    from pdlab.engine.distributed.kv_transfer.dist import DistTransport
    from pdlab.engine.distributed.kv_transfer.pd_connector import PDConnector
    from pdlab.engine.llm_engine import LLMEngine

    rank = 0 if role == "prefill" else 1
    join_group(rank, host, port, timeout_s)
    transport = DistTransport(rank, torch.float32)
    kw = engine_kwargs or {}
    spec = kw.get("speculative_config")
    transport.handshake(pair_identity(model_config, cache_config, spec, kw.get("dtype")), timeout_s)
    instance, tracer = "P" if rank == 0 else "D", Tracer()
    lookahead = spec.num_prefill_lookahead_tokens if spec is not None else 0
    where = (cache_config.block_size, scheduler_config.kv_transfer_timeout_s, host, port)
    hooks = {"emit": tracer.sink(instance), "num_prefill_lookahead_tokens": lookahead}
    conn = PDConnector(role, instance, transport, *where, **hooks)
    kw = dict(instance=instance, backend=backend, **kw)
    engine = LLMEngine(model_config, cache_config, scheduler_config, conn, tracer, seed, **kw)
    return engine, conn, transport


def pair_identity(
    model_config: ModelConfig,
    cache_config: CacheConfig,
    speculative_config: Any = None,
    engine_dtype: torch.dtype | None = None,
) -> dict[str, Any]:
    """What P and D must share, compared field by field at the handshake (as vLLM's NIXL
    handshake refuses a peer whose compatibility hash differs)."""
    spec = speculative_config
    info: dict[str, Any] = {
        "block_size": cache_config.block_size,
        "kv_cache_dtype": str(engine_dtype or torch.float32).removeprefix("torch."),
        "speculative_method": None if spec is None else spec.method,
        "num_speculative_tokens": 0 if spec is None else spec.num_speculative_tokens,
        "prompt_lookup_min": getattr(spec, "prompt_lookup_min", None),
        "prompt_lookup_max": getattr(spec, "prompt_lookup_max", None),
    }
    info.update({f"model.{k}": v for k, v in dataclasses.asdict(model_config).items()})
    return info


def _stop_after_peer_failure(
    engine: LLMEngine, conn: PDConnector, transport: DistTransport, summary: InstanceSummary
) -> None:
    """The peer is gone: end every hand-off and request at once and free their blocks,
    instead of holding them until ``kv_transfer_timeout_s``."""
    summary.peer_failed_at = time.monotonic()
    conn.fail_all_sends(transport.peer_failed)
    engine.abort_request([r for r, q in engine.scheduler.requests.items() if not q.is_finished()])
    for _ in range(3):  # the finished sends are reported (and freed) by the next step
        if not (engine.scheduler.has_requests() or conn.num_pending):
            break
        engine.step()
    summary.blocks_freed_at = time.monotonic()


def run_prefill(
    prompts: list[list[int]],
    sampling_params: SamplingParams,
    model_config: ModelConfig,
    cache_config: CacheConfig,
    scheduler_config: SchedulerConfig,
    host: str,
    port: int,
    backend: str | None = None,
    seed: int = 0,
    timeout_s: float = 120.0,
    max_in_flight: int | None = None,
    engine_kwargs: dict[str, Any] | None = None,
    die_after_handoffs: int | None = None,
    first_token: str = "recompute",
) -> InstanceSummary:
    """Rank 0: prefill every prompt, hand each to D, collect D's outputs; the proxy's part of
    the ``first_token`` design runs here. With ``max_in_flight`` at most that many requests
    are unanswered at a time. ``die_after_handoffs`` kills this process abruptly after that
    many hand-offs (a fault test)."""
    from pdlab.engine.distributed.kv_transfer.dist import REQUEST, RESULT, SHUTDOWN

    check_first_token_mode(first_token, sampling_params)
    t0 = time.monotonic()
    side = (model_config, cache_config, scheduler_config, backend, host, port, seed, timeout_s)
    engine, conn, transport = _build("prefill", *side, engine_kwargs)
    summary = InstanceSummary("prefill")
    # As vLLM's proxy: the same sampling parameters (stop tokens included), one token.
    p_params = dataclasses.replace(sampling_params, max_tokens=1)
    rids = [PDPair.request_id(i) for i in range(len(prompts))]
    handoffs: dict[str, HandOff] = {}
    next_prompt = handed = 0
    deadline = t0 + timeout_s
    while time.monotonic() < deadline:
        if transport.peer_failed:
            _stop_after_peer_failure(engine, conn, transport, summary)
            break
        limit = len(prompts) if max_in_flight is None else len(summary.outputs) + max_in_flight
        while next_prompt < min(limit, len(prompts)):
            prompt, rid = prompts[next_prompt], rids[next_prompt]
            engine.add_request(prompt, p_params, rid, prefill_params(first_token))
            next_prompt += 1
        waiting_for_d = len(summary.outputs) < len(rids)
        if not (waiting_for_d or engine.has_unfinished_requests() or conn.num_pending):
            break
        if engine.has_unfinished_requests() or conn.num_pending:
            for out in engine.step():
                if out.finished:
                    rid = out.request_id
                    p_out = (out.prompt_token_ids, sampling_params, out.output_token_ids)
                    p_out += (out.kv_transfer_params, engine.step_count, engine.max_model_len)
                    h = hand_off(first_token, *p_out)
                    handoffs[rid] = h
                    if h.done:  # P's token is the whole answer: D is not needed
                        conn.end_send(rid, "P's first token ended the request")
                        summary.outputs[rid] = _answer(engine, rid, h, [], h.finish_reason)
                        continue
                    request = {"request_id": rid, "prompt_token_ids": h.prompt}
                    request["sampling_params"] = dataclasses.asdict(h.sampling_params)
                    request["kv_transfer_params"] = h.kv_transfer_params
                    transport.send_json(REQUEST, request)
                    handed += 1
                    if die_after_handoffs is not None and handed >= die_after_handoffs:
                        os._exit(17)
        transport.pump()
        for msg in transport.inbox:
            if msg.type == RESULT:
                r = msg.payload
                h = handoffs[r["request_id"]]
                if r.get("error") and conn.is_sending(r["request_id"]):  # D refused it
                    conn.end_send(r["request_id"], r["error"])
                if h.prefix:
                    r = dict(r, **_answer(engine, r["request_id"], h, r["output_token_ids"], ""))
                summary.outputs[r["request_id"]] = r
        transport.inbox.clear()
        if not engine.has_unfinished_requests():
            # Idle until D's next message (a READ, a RESULT) or its death, not a fixed sleep;
            # a held send still needs a step now and then to notice its timeout.
            transport.wait(0.05 if conn.num_pending else 1.0)
    if not transport.peer_failed:
        transport.send_json(SHUTDOWN, {})
    return _summarize(summary, engine, transport, t0)


def _answer(
    engine: LLMEngine, rid: str, h: HandOff, d_tokens: list[int], reason: str | None
) -> dict[str, Any]:
    """The proxy's answer: P's token first where the design put it before D's."""
    tokens = [*h.prefix, *d_tokens]
    out = {"request_id": rid, "output_token_ids": tokens, "text": engine.tokenizer.decode(tokens)}
    if h.done:
        out.update(finish_reason=reason, error=None)
    return out


def run_decode(
    model_config: ModelConfig,
    cache_config: CacheConfig,
    scheduler_config: SchedulerConfig,
    host: str,
    port: int,
    backend: str | None = None,
    seed: int = 0,
    timeout_s: float = 120.0,
    die_after_requests: int | None = None,
    engine_kwargs: dict[str, Any] | None = None,
) -> InstanceSummary:
    """Rank 1: take requests from P, read their K/V, decode, send the outputs back.
    ``die_after_requests`` kills this process abruptly (a fault test)."""
    from pdlab.engine.distributed.kv_transfer.dist import REQUEST, RESULT, SHUTDOWN

    t0 = time.monotonic()
    side = (model_config, cache_config, scheduler_config, backend, host, port, seed, timeout_s)
    engine, conn, transport = _build("decode", *side, engine_kwargs)
    summary = InstanceSummary("decode")
    received, shutdown = 0, False
    deadline = t0 + timeout_s
    while time.monotonic() < deadline:
        transport.pump()
        if transport.peer_failed:
            _stop_after_peer_failure(engine, conn, transport, summary)
            break
        for msg in transport.inbox:
            if msg.type == REQUEST:
                received += 1
                if die_after_requests is not None and received > die_after_requests:
                    os._exit(17)
                r = msg.payload
                items = r["sampling_params"].items()
                fields = {k: tuple(v) if isinstance(v, list) else v for k, v in items}
                try:
                    sp = SamplingParams(**fields)
                    engine.add_request(
                        r["prompt_token_ids"], sp, r["request_id"], r["kv_transfer_params"]
                    )
                except PdlabError as e:  # D cannot take it (its cache, its limits): say so
                    # to P, which frees the blocks it holds for D's read, and go on serving.
                    refused = {"request_id": r["request_id"], "output_token_ids": [], "text": ""}
                    refused.update(finish_reason="error", error=one_line(e))
                    transport.send_json(RESULT, refused)
            elif msg.type == SHUTDOWN:
                shutdown = True
        transport.inbox.clear()
        busy = engine.has_unfinished_requests() or conn.num_pending
        if busy:
            for out in engine.step():
                if out.finished:
                    keys = ("request_id", "output_token_ids", "text", "finish_reason", "error")
                    transport.send_json(RESULT, {k: getattr(out, k) for k in keys})
        elif shutdown:
            break
        else:
            transport.wait(1.0)  # until P's next message, or its death
    return _summarize(summary, engine, transport, t0)


def _summarize(
    summary: InstanceSummary, engine: LLMEngine, transport: DistTransport, t0: float
) -> InstanceSummary:
    """What this side did, read off its engine and transport when it stops."""
    summary.events, summary.meta = engine.tracer.events, engine.tracer.meta
    summary.steps, summary.num_blocks = engine.step_count, engine.cache_config.num_blocks
    summary.num_free_blocks = engine.scheduler.kv_cache_manager.num_free_blocks
    summary.bytes_sent, summary.peer_failed = transport.bytes_sent, transport.peer_failed
    summary.seconds = time.monotonic() - t0
    return summary
