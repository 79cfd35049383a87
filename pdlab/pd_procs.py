"""P and D as two processes that exchange K/V over ``torch.distributed``.

The same engines and connector as ``pdlab/pd.py``, with :class:`~pdlab.kv_transfer.dist.
DistTransport` between them: rank 0 is the prefill instance (which here also plays vLLM's
proxy: it holds the prompts, forwards each finished prefill to D with its
``kv_transfer_params`` and collects D's answers), rank 1 is the decode instance. By default
both run on this machine on 127.0.0.1 and a free port; ``host``/``port`` let them run on two
machines (``pdlab pd --role prefill`` on one, ``pdlab pd --role decode`` on the other).

Every wait is bounded: a D that dies does not hang P; P's held blocks come back after
``kv_transfer_timeout_s`` at the latest, and the launcher kills what does not exit.
"""

from __future__ import annotations

import dataclasses
import datetime
import multiprocessing as mp
import os
import queue
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from pdlab.config import (
    AttentionConfig,
    CacheConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from pdlab.request import SamplingParams
from pdlab.trace import Tracer


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class InstanceSummary:
    role: str
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    num_free_blocks: int = 0
    num_blocks: int = 0
    bytes_sent: int = 0
    peer_failed: str | None = None
    seconds: float = 0.0


def _build(
    role: str,
    rank: int,
    model_config: ModelConfig,
    cache_config: CacheConfig,
    scheduler_config: SchedulerConfig,
    backend: str | None,
    host: str,
    port: int,
    seed: int,
    timeout_s: float,
    engine_kwargs: dict[str, Any] | None = None,
) -> tuple[Any, Any, Any]:
    """Join the two-process group as ``rank``, then build this side's engine."""
    import torch.distributed as dist

    from pdlab.engine import LLMEngine
    from pdlab.kv_transfer.dist import DistTransport
    from pdlab.kv_transfer.pd_connector import PDConnector

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{host}:{port}",
        rank=rank,
        world_size=2,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    transport = DistTransport(rank, torch.float32)
    conn = PDConnector(
        role,
        "P" if rank == 0 else "D",
        transport,
        cache_config.block_size,
        scheduler_config.kv_transfer_timeout_s,
        host,
        port,
    )
    engine = LLMEngine(
        model_config,
        cache_config,
        scheduler_config,
        conn,
        Tracer(),
        seed,
        instance="P" if rank == 0 else "D",
        backend=backend,
        **(engine_kwargs or {}),
    )
    return engine, conn, transport


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
) -> InstanceSummary:
    """Rank 0: prefill every prompt, hand each to D, collect D's outputs. With
    ``max_in_flight`` the proxy keeps at most that many requests unanswered, as a client
    waiting for each answer would (so D's prefix cache sees the earlier prompts)."""
    from pdlab.kv_transfer.dist import REQUEST, RESULT, SHUTDOWN

    t0 = time.monotonic()
    engine, conn, transport = _build(
        "prefill",
        0,
        model_config,
        cache_config,
        scheduler_config,
        backend,
        host,
        port,
        seed,
        timeout_s,
        engine_kwargs,
    )
    summary = InstanceSummary("prefill")
    # As vLLM's proxy: the same sampling parameters (stop tokens included), one token.
    p_params = dataclasses.replace(sampling_params, max_tokens=1)
    rids = [f"req-{i}" for i in range(len(prompts))]
    next_prompt = 0
    deadline = t0 + timeout_s
    while time.monotonic() < deadline:
        limit = len(prompts) if max_in_flight is None else len(summary.outputs) + max_in_flight
        while next_prompt < min(limit, len(prompts)):
            engine.add_request(
                prompts[next_prompt], p_params, rids[next_prompt], {"do_remote_decode": True}
            )
            next_prompt += 1
        waiting_for_d = len(summary.outputs) < len(rids) and not transport.peer_failed
        if not (waiting_for_d or engine.has_unfinished_requests() or conn.num_pending):
            break
        if engine.has_unfinished_requests() or conn.num_pending:
            for out in engine.step():
                if out.finished:
                    transport.send_json(
                        REQUEST,
                        {
                            "request_id": out.request_id,
                            "prompt_token_ids": out.prompt_token_ids,
                            "sampling_params": dataclasses.asdict(sampling_params),
                            "kv_transfer_params": out.kv_transfer_params,
                        },
                    )
        transport.pump()
        for msg in transport.inbox:
            if msg.type == RESULT:
                summary.outputs[msg.payload["request_id"]] = msg.payload
        transport.inbox.clear()
        if not engine.has_unfinished_requests():
            time.sleep(0.002)
    if not transport.peer_failed:
        transport.send_json(SHUTDOWN, {})
    return _summarize(summary, engine, transport, t0)


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
    from pdlab.kv_transfer.dist import REQUEST, RESULT, SHUTDOWN

    t0 = time.monotonic()
    engine, conn, transport = _build(
        "decode",
        1,
        model_config,
        cache_config,
        scheduler_config,
        backend,
        host,
        port,
        seed,
        timeout_s,
        engine_kwargs,
    )
    summary = InstanceSummary("decode")
    received, shutdown = 0, False
    deadline = t0 + timeout_s
    while time.monotonic() < deadline and not transport.peer_failed:
        transport.pump()
        for msg in transport.inbox:
            if msg.type == REQUEST:
                received += 1
                if die_after_requests is not None and received > die_after_requests:
                    os._exit(17)
                r = msg.payload
                engine.add_request(
                    r["prompt_token_ids"],
                    SamplingParams(
                        **{
                            k: tuple(v) if isinstance(v, list) else v
                            for k, v in r["sampling_params"].items()
                        }
                    ),
                    r["request_id"],
                    r["kv_transfer_params"],
                )
            elif msg.type == SHUTDOWN:
                shutdown = True
        transport.inbox.clear()
        busy = engine.has_unfinished_requests() or conn.num_pending
        if busy:
            for out in engine.step():
                if out.finished:
                    transport.send_json(
                        RESULT,
                        {
                            "request_id": out.request_id,
                            "output_token_ids": out.output_token_ids,
                            "text": out.text,
                            "finish_reason": out.finish_reason,
                        },
                    )
        elif shutdown:
            break
        else:
            time.sleep(0.002)
    return _summarize(summary, engine, transport, t0)


def _summarize(summary: InstanceSummary, engine: Any, transport: Any, t0: float) -> InstanceSummary:
    """What this side did, read off its engine and transport when it stops."""
    summary.events = engine.tracer.events
    summary.steps = engine.step_count
    summary.num_free_blocks = engine.scheduler.kv_cache_manager.num_free_blocks
    summary.num_blocks = engine.cache_config.num_blocks
    summary.bytes_sent = transport.bytes_sent
    summary.peer_failed = transport.peer_failed
    summary.seconds = time.monotonic() - t0
    return summary


def _entry(role: str, kwargs: dict[str, Any], results: Any) -> None:
    torch.set_num_threads(1)
    try:
        fn = run_prefill if role == "prefill" else run_decode
        results.put((role, fn(**kwargs), None))
    except BaseException as e:  # noqa: BLE001 - reported to the launcher
        results.put((role, None, f"{type(e).__name__}: {e}"))
    finally:
        results.close()
        results.join_thread()  # flush the result to the launcher before leaving
        # Skip interpreter teardown: a gloo group whose peer vanished can block in it.
        os._exit(0)


@dataclass
class PDProcsResult:
    prefill: InstanceSummary | None
    decode: InstanceSummary | None
    errors: dict[str, str]
    exitcodes: dict[str, int | None]
    tracer: Tracer
    seconds: float


def run_pd_procs(
    prompts: list[list[int]],
    model_config: ModelConfig,
    cache_config: CacheConfig | None = None,
    scheduler_config: SchedulerConfig | None = None,
    sampling_params: SamplingParams | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    backend: str | None = "torch",
    seed: int = 0,
    timeout_s: float = 120.0,
    die_after_requests: int | None = None,
    max_in_flight: int | None = None,
    attention_config: AttentionConfig | None = None,
    parallel_config: ParallelConfig | None = None,
) -> PDProcsResult:
    """Launch P and D as two processes on this machine and wait (bounded) for both."""
    t0 = time.monotonic()
    cache_config = cache_config or CacheConfig()
    scheduler_config = scheduler_config or SchedulerConfig()
    sampling_params = sampling_params or SamplingParams()
    port = port or free_port(host)
    common = dict(
        model_config=model_config,
        cache_config=cache_config,
        scheduler_config=scheduler_config,
        host=host,
        port=port,
        backend=backend,
        seed=seed,
        timeout_s=timeout_s,
        engine_kwargs={"attention_config": attention_config, "parallel_config": parallel_config},
    )
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = {
        "prefill": ctx.Process(
            target=_entry,
            name="pdlab-P",
            args=(
                "prefill",
                dict(
                    common,
                    prompts=prompts,
                    sampling_params=sampling_params,
                    max_in_flight=max_in_flight,
                ),
                results,
            ),
        ),
        "decode": ctx.Process(
            target=_entry,
            name="pdlab-D",
            args=("decode", dict(common, die_after_requests=die_after_requests), results),
        ),
    }
    for p in procs.values():
        p.start()
    got: dict[str, Any] = {}
    errors: dict[str, str] = {}
    deadline = t0 + timeout_s + 30
    try:
        while len(got) + len(errors) < 2 and time.monotonic() < deadline:
            try:
                role, summary, err = results.get(timeout=0.5)
            except queue.Empty:
                dead = [
                    r
                    for r, p in procs.items()
                    if not p.is_alive() and r not in got and r not in errors
                ]
                for r in dead:
                    errors[r] = f"process exited with code {procs[r].exitcode} and no result"
                continue
            if err:
                errors[role] = err
            else:
                got[role] = summary
    finally:
        for p in procs.values():
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        results.close()
        results.join_thread()
    tracer = Tracer()
    tracer.meta.update(
        {
            "transport": "torch.distributed (gloo)",
            "host": host,
            "port": port,
            "block_size": cache_config.block_size,
        }
    )
    for role in ("prefill", "decode"):
        if role in got:
            tracer.extend(got[role].events)
    return PDProcsResult(
        got.get("prefill"),
        got.get("decode"),
        errors,
        {r: p.exitcode for r, p in procs.items()},
        tracer,
        time.monotonic() - t0,
    )
