"""How long the scheduler itself takes per step: ``schedule()`` plus ``update_from_output()``
with every request decoding, and a fake runner standing in for the model.

vLLM's scheduler runs on the CPU between GPU steps, so its cost per step bounds how short a
decode step can be (vLLM overlaps them with async scheduling). pdlab's is plain Python too.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from pdlab.engine.config import CacheConfig, SchedulerConfig
from pdlab.engine.core.sched.scheduler import Scheduler
from pdlab.engine.math_utils import cdiv
from pdlab.engine.request import Request, SamplingParams
from pdlab.engine.worker.fake_runner import FakeModelRunner
from pdlab.errors import PdlabRuntimeError, Phrase, invalid


def bench_scheduler(
    num_requests: int = 256,
    steps: int = 200,
    block_size: int = 16,
    prompt_len: int = 64,
    seed: int = 0,
) -> dict[str, Any]:
    """Admit ``num_requests`` prompts, prefill them in one step, then time ``steps`` decode
    steps. Times exclude the fake runner; blocks fill (and are hashed) as tokens arrive."""
    sizes = {"num_requests": num_requests, "steps": steps}
    sizes |= {"block_size": block_size, "prompt_len": prompt_len}
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise invalid(name, value, Phrase("err_x_int_ge", n=1))
    max_len = prompt_len + steps + 2
    tokens = num_requests * prompt_len  # the first step prefills every prompt
    sched_cfg = SchedulerConfig(max_num_batched_tokens=tokens, max_num_seqs=num_requests)
    cache = CacheConfig(block_size=block_size, num_blocks=num_requests * cdiv(max_len, block_size))
    sched = Scheduler(sched_cfg, cache, max_model_len=max_len)
    rng = random.Random(seed)
    runner = FakeModelRunner(sample=lambda req_id, position: rng.randrange(1000))
    for i in range(num_requests):
        prompt = [rng.randrange(1000) for _ in range(prompt_len)]
        sched.add_request(Request(f"r{i}", prompt, SamplingParams(max_tokens=steps + 2)))
    so = sched.schedule()
    sched.update_from_output(so, runner.execute_model(so))

    times_us = []
    for _ in range(steps):
        t0 = time.perf_counter()
        so = sched.schedule()
        t1 = time.perf_counter()
        out = runner.execute_model(so)
        t2 = time.perf_counter()
        sched.update_from_output(so, out)
        t3 = time.perf_counter()
        if (scheduled := so.total_num_scheduled_tokens) != num_requests:
            raise PdlabRuntimeError("err_bench_decoding", n=num_requests, tokens=scheduled)
        times_us.append(((t1 - t0) + (t3 - t2)) * 1e6)
    return {
        **sizes,
        "mean_us": statistics.fmean(times_us),
        "median_us": statistics.median(times_us),
        "min_us": min(times_us),
        "us_per_request": statistics.median(times_us) / num_requests,
    }


def summary(res: dict[str, Any], lang: str = "en") -> str:
    """:func:`bench_scheduler`'s result in one line, in ``lang`` (plain text, no markup)."""
    from pdlab.catalog import text

    numbers = {"median": f"{res['median_us']:.0f}", "per": f"{res['us_per_request']:.2f}"}
    numbers |= {"mean": f"{res['mean_us']:.0f}", "steps": res["steps"]}
    return text(lang, "bsch_line", n=res["num_requests"], **numbers)
