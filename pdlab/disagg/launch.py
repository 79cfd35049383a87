"""Launch P and D as two processes on this machine and watch them.

Mirrors the role of ``CoreEngineProcManager`` in ``vllm/v1/engine/utils.py``, which starts
engine processes and waits on their sentinels so that the first one to die is noticed at
once. Here the launcher waits on two events per side, with no polling sleep: its result
arriving through a pipe, or its process exiting. When one side dies, the other notices by
itself (its transport's receive fails), frees what it held and reports; it gets ``grace_s``
to do so before it is killed. The two sides are in ``pdlab/disagg/procs.py``.

Ctrl-C: a terminal sends SIGINT to the launcher and both children at once. The children are
started with SIGINT blocked (:func:`_sigint_blocked`), so none of them prints a traceback;
the launcher alone gets the KeyboardInterrupt, terminates both, waits for them and lets it
propagate (the CLI prints one line and exits 130). Upstream's ``CoreEngineProcManager``
likewise leaves shutdown to the parent.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing import resource_tracker
from typing import Any

import torch

from pdlab.disagg.designs import check_first_token_mode, record_first_tokens
from pdlab.disagg.group import PeerUnreachable, check_port_free, free_port
from pdlab.disagg.procs import InstanceSummary, run_decode, run_prefill
from pdlab.engine.config import (
    AttentionConfig,
    CacheConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    SpeculativeConfig,
)
from pdlab.engine.request import SamplingParams
from pdlab.engine.trace import Tracer
from pdlab.errors import one_line


def _entry(role: str, kwargs: dict[str, Any], conn: mp_connection.Connection) -> None:
    torch.set_num_threads(1)
    try:
        fn = run_prefill if role == "prefill" else run_decode
        conn.send((role, fn(**kwargs), None))
    except (PeerUnreachable, ValueError) as e:  # already one line naming what was wrong
        conn.send((role, None, str(e)))
    except BaseException as e:  # noqa: BLE001 - reported to the launcher
        conn.send((role, None, one_line(e)))
    finally:
        conn.close()
        # Skip interpreter teardown: a gloo group whose peer vanished can block in it.
        os._exit(0)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """While children are started: SIGINT blocked in this thread, which they inherit (a
    blocked signal stays blocked across fork and exec, so theirs stays pending for good).
    Meanwhile a handler records a Ctrl-C another thread takes (the block is per thread);
    once the children are started, it is raised as the handler in force would raise it."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread; nothing to change elsewhere
        return
    # multiprocessing starts its resource tracker with the first child, blocking SIGINT
    # around that spawn and then unblocking it, which would end this block early and let
    # the children after it start open to a Ctrl-C: start the tracker first.
    resource_tracker.ensure_running()
    caught: list[int] = []
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a pending one is delivered here
    if caught and previous is not signal.SIG_IGN:
        if callable(previous):
            previous(signal.SIGINT, None)
        else:
            raise KeyboardInterrupt


@contextlib.contextmanager
def _disposition(handler: Any) -> Iterator[None]:
    before = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _stop(procs: dict[str, Any], grace_s: float) -> None:
    """Terminate what is still running, wait ``grace_s``, then kill."""
    for p in procs.values():
        if p.is_alive():
            p.terminate()
    for p in procs.values():
        p.join(timeout=grace_s)
        if p.is_alive():
            p.kill()
            p.join(timeout=5)


@dataclass
class PDProcsResult:
    prefill: InstanceSummary | None
    decode: InstanceSummary | None
    errors: dict[str, str]
    exitcodes: dict[str, int | None]
    tracer: Tracer
    seconds: float
    # time.monotonic() when the launcher saw a side exit without a result
    died_at: dict[str, float] = field(default_factory=dict)


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
    die_after_handoffs: int | None = None,
    grace_s: float = 15.0,
    attention_config: AttentionConfig | None = None,
    parallel_config: ParallelConfig | None = None,
    model_runner: str | None = None,
    first_token: str = "recompute",
    speculative_config: SpeculativeConfig | None = None,
) -> PDProcsResult:
    """Launch P and D and wait for both (see the module docstring); each answered request
    gets a ``first_token`` event for the design ``first_token``."""
    t0 = time.monotonic()
    cache_config = cache_config or CacheConfig()
    scheduler_config = scheduler_config or SchedulerConfig()
    sampling_params = sampling_params or SamplingParams()
    check_first_token_mode(first_token, sampling_params, speculative_config)
    if port:
        check_port_free(host, port)
    port = port or free_port(host)
    engine_kwargs = {"attention_config": attention_config, "parallel_config": parallel_config}
    engine_kwargs |= {"model_runner": model_runner, "speculative_config": speculative_config}
    common = {"model_config": model_config, "cache_config": cache_config, "host": host}
    common |= dict(scheduler_config=scheduler_config, port=port, backend=backend, seed=seed)
    common |= dict(timeout_s=timeout_s, engine_kwargs=engine_kwargs)
    prefill = dict(prompts=prompts, sampling_params=sampling_params, max_in_flight=max_in_flight)
    prefill |= dict(die_after_handoffs=die_after_handoffs, first_token=first_token)
    decode = dict(common, die_after_requests=die_after_requests)
    kwargs = {"prefill": dict(common, **prefill), "decode": decode}
    ctx = mp.get_context("spawn")
    readers: dict[str, Any] = {}
    procs: dict[str, Any] = {}
    got: dict[str, InstanceSummary] = {}
    errors: dict[str, str] = {}
    died_at: dict[str, float] = {}
    # Spawning and importing torch count against no side's timeout_s: allow for them.
    deadline = t0 + timeout_s + 30
    try:
        with _sigint_blocked():  # the children never see a Ctrl-C (see the module docstring)
            for role in ("prefill", "decode"):
                reader, writer = ctx.Pipe(duplex=False)
                readers[role] = reader
                args = (role, kwargs[role], writer)
                procs[role] = ctx.Process(target=_entry, name=f"pdlab-{role[0].upper()}", args=args)
                procs[role].start()
                writer.close()  # the child holds its end; EOF then means the child is gone
        pending = set(procs)
        while pending:
            limit = min([deadline] + [t + grace_s for t in died_at.values()])
            if time.monotonic() >= limit:
                break
            handles = [readers[r] for r in pending] + [procs[r].sentinel for r in pending]
            mp_connection.wait(handles, timeout=limit - time.monotonic())
            for role in list(pending):
                proc, reader = procs[role], readers[role]
                if not (reader.poll() or not proc.is_alive()):
                    continue
                try:
                    _, summary, err = reader.recv()
                except (EOFError, OSError):  # it exited without a word: it died
                    proc.join(timeout=5)
                    died_at[role] = time.monotonic()
                    summary, err = None, f"process exited with code {proc.exitcode} and no result"
                if summary is not None:
                    got[role] = summary
                else:
                    errors[role] = err
                pending.discard(role)
        for role in pending:
            errors[role] = f"no result within {time.monotonic() - t0:.0f} s; killed"
    except KeyboardInterrupt:
        main = threading.current_thread() is threading.main_thread()
        # a second Ctrl-C must not cut this short
        with _disposition(signal.SIG_IGN) if main else contextlib.nullcontext():
            _stop(procs, grace_s=2)
        raise
    finally:
        for p in procs.values():
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        for reader in readers.values():
            reader.close()
    tracer = Tracer()
    for role in ("prefill", "decode"):  # what each side's engine recorded, routing included
        if role in got:
            meta = got[role].meta
            tracer.meta.setdefault("routing", {}).update(meta.get("routing", {}))
            for key in ("model", "weights", "dtype", "backend"):
                if key in meta:
                    tracer.meta.setdefault(key, meta[key])
            tracer.extend(got[role].events)
    where = {"transport": "torch.distributed (gloo)", "host": host, "port": port}
    tracer.meta.update(where, block_size=cache_config.block_size)
    if "prefill" in got:
        tracer.meta["dtype"] = "float32"  # DistTransport moves the caches in fp32
        answered = {r: first_token for r in got["prefill"].outputs}
        record_first_tokens(tracer, answered, model_config)
    codes, seconds = {r: p.exitcode for r, p in procs.items()}, time.monotonic() - t0
    return PDProcsResult(
        got.get("prefill"), got.get("decode"), errors, codes, tracer, seconds, died_at
    )
