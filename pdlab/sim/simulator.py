"""A deterministic step-level simulator of one decode (D) instance: what an arriving
request's first step costs the whole decode batch, per first-token design and routing.

D runs ``batch_size`` decodes (each over ``context`` cached tokens, growing a token per
step) and takes arrivals whose K/V have landed: Poisson in time (seeded), prompt lengths
from the distribution the user picks. An arrival's first step on D is the row its design
makes (``pdlab/disagg/designs.py``): ``recompute`` one token over ``N - 1`` of an
``N``-token prompt, ``append_prompt`` one over ``N`` of ``N + 1`` (both still
``is_prefilling``), ``first_token`` and ``hidden_state`` a plain decode over ``N`` (the
latter after ``lm_head`` on P's hidden state). It then decodes ``output_len`` tokens and
leaves.

Every routing decision is the engine's own code: the model runner's
:func:`pdlab.model.batch.gather_batch_req_state` (V2's ``prefill_runs_as_decode`` and
``decode_graph_eligible``, PCP's reorder, V1), and
:func:`pdlab.attention.metadata.split_decodes_and_prefills` with the thresholds of the MLA
backend the platform picks for the GPU (``pdlab/platforms.py``) and
``treat_short_extends_as_decodes = not use_pcp``. Each step's time is
:meth:`pdlab.sim.costs.StepCost.time_s` on the device profile. vLLM has no counterpart;
published simulators (vidur, DistServe's, splitwise-sim, llm-d's) assume P emits token 1
and model no such step.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from pdlab.attention.builder import MLAMetadataBuilder
from pdlab.attention.metadata import CommonAttentionMetadata, split_decodes_and_prefills
from pdlab.config import AttentionConfig, ModelConfig, ParallelConfig
from pdlab.disagg.designs import MODES
from pdlab.model.batch import gather_batch_req_state
from pdlab.sim import DISTRIBUTIONS, ROUTINGS
from pdlab.sim.costs import Row, StepCost, lm_head_cost, step_cost
from pdlab.sim.profiles import DeviceProfile


@dataclass(frozen=True)
class SimConfig:
    """What to simulate. Lengths in tokens, times in seconds."""

    design: str = "recompute"
    routing: str = "v2"
    batch_size: int = 64
    context: int = 4096
    arrival_rate: float = 20.0  # arrivals per second at D
    prompt_len: int = 4096  # the distribution's mean ("fixed": every prompt)
    prompt_dist: str = "fixed"
    output_len: int = 64
    duration_s: float = 2.0
    block_size: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        def bad(name: str, allowed: str) -> ValueError:
            return ValueError(f"{name}={getattr(self, name)!r} is invalid: expected {allowed}")

        for name, allowed in (("design", MODES), ("routing", ROUTINGS)):
            if getattr(self, name) not in allowed:
                raise bad(name, f"one of {list(allowed)}")
        if self.prompt_dist not in DISTRIBUTIONS:
            raise bad("prompt_dist", f"one of {list(DISTRIBUTIONS)}")
        for name, low in (("batch_size", 0), ("context", 1), ("prompt_len", 1), ("output_len", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low or v > 1 << 20:
                raise bad(name, f"an integer from {low} to {1 << 20}")
        for name in ("arrival_rate", "duration_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
                raise bad(name, "a finite number >= 0")


@dataclass
class SimStep:
    t: float  # when the step started
    time_s: float
    num_decodes: int
    num_prefills: int
    decode_graph_eligible: bool
    uniform_decode: bool
    cost: StepCost
    contexts: list[int] = field(default_factory=list)  # each row's, in batch order


@dataclass
class SimRequest:
    arrival: float
    prompt_len: int
    first_step_t: float = -1.0
    ttft_d: float = -1.0  # arrival at D to token 1 known (0: P's token is the answer)
    t2t_d: float = -1.0  # arrival at D to token 2
    left: int = 0  # decode steps still to run
    context: int = 0  # tokens cached once its first step ran


@dataclass
class SimResult:
    config: SimConfig
    profile: DeviceProfile
    steps: list[SimStep] = field(default_factory=list)
    requests: list[SimRequest] = field(default_factory=list)


def _prompt_sampler(cfg: SimConfig, rng: random.Random) -> Callable[[], int]:
    mean, top = cfg.prompt_len, 1 << 20
    if cfg.prompt_dist == "fixed":
        return lambda: mean
    if cfg.prompt_dist == "uniform":
        return lambda: rng.randint(1, 2 * mean - 1)
    if cfg.prompt_dist == "exponential":
        return lambda: min(top, max(1, round(rng.expovariate(1 / mean))))
    sigma = 1.0  # lognormal with this mean: mu = ln(mean) - sigma^2 / 2
    return lambda: min(top, max(1, round(rng.lognormvariate(math.log(mean) - 0.5, sigma))))


def arrivals(cfg: SimConfig) -> list[SimRequest]:
    """The arrivals at D within ``duration_s``, seeded: exponential gaps at
    ``arrival_rate``, prompt lengths from ``prompt_dist``."""
    rng = random.Random(cfg.seed)
    draw = _prompt_sampler(cfg, rng)
    out, t = [], 0.0
    while cfg.arrival_rate > 0:
        t += rng.expovariate(cfg.arrival_rate)
        if t >= cfg.duration_s:
            break
        out.append(SimRequest(t, draw()))
    return out


def first_row(design: str, n: int) -> tuple[int, int, int]:
    """``(num_computed_tokens, num_prompt_tokens, prefill_len)`` of an arrival's first
    step on D under ``design``, for an ``n``-token prompt (one token scheduled)."""
    if design == "recompute":
        return n - 1, n, n
    if design == "append_prompt":
        return n, n + 1, n + 1
    return n, n, n  # first_token, hidden_state: P's token decodes as D's first row


def simulate(
    cfg: SimConfig,
    model: ModelConfig,
    profile: DeviceProfile,
    gpu: str = "h200",
    progress: Callable[[float], None] | None = None,
) -> SimResult:
    """Run D until ``duration_s`` of simulated time has passed and every arrival has its
    second token. ``progress`` is told the simulated time after each step."""
    use_pcp = cfg.routing == "pcp"
    builder = MLAMetadataBuilder(
        cfg.block_size,
        AttentionConfig(gpu=gpu),
        ParallelConfig(prefill_context_parallel_size=2 if use_pcp else 1),
    )
    runner = "v1" if cfg.routing == "v1" else "v2"
    res = SimResult(cfg, profile, requests=arrivals(cfg))
    background = [cfg.context] * cfg.batch_size  # contexts of the running decodes
    active: list[SimRequest] = []  # arrivals past their first step
    pending = list(res.requests)
    t = 0.0
    while t < cfg.duration_s or pending or any(r.t2t_d < 0 for r in active):
        new = [r for r in pending if r.arrival <= t]
        if not (background or active or new):
            if not pending:
                break
            t = pending[0].arrival  # an idle D waits for the next arrival
            continue
        pending = pending[len(new) :]
        rows: dict[str, tuple[int, int, int]] = {}
        for i, c in enumerate(background):
            rows[f"b{i}"] = (c, c, c)  # a decode: prompt long done
        for j, r in enumerate(active):
            rows[f"a{j}"] = (r.context, r.context, r.context)  # a decode now
        for k, r in enumerate(new):
            rows[f"n{k}"] = first_row(cfg.design, r.prompt_len)
        ids = list(rows)
        batch = gather_batch_req_state(
            dict.fromkeys(ids, 1),
            {r: rows[r][0] for r in ids},
            {r: rows[r][1] for r in ids},
            {r: rows[r][2] for r in ids},
            model_runner=runner,
            use_pcp=use_pcp,
            reorder_batch_threshold=builder.reorder_batch_threshold,
        )
        n = len(ids)
        meta = CommonAttentionMetadata.from_batch(
            batch.num_scheduled_tokens,
            batch.num_computed_tokens,
            batch.num_prompt_tokens,
            torch.zeros(n, 1, dtype=torch.int32),
            torch.zeros(n, dtype=torch.int64),
            batch.req_ids,
            batch.is_prefilling,
        )
        nd, npf, _, _ = split_decodes_and_prefills(
            meta,
            builder.reorder_batch_threshold,
            builder.require_uniform,
            builder.treat_short_extends_as_decodes,
        )
        ordered = [Row(c) for c in batch.num_computed_tokens]
        cost = step_cost(model, ordered[:nd], ordered[nd:], batch.decode_graph_eligible)
        if cfg.design == "hidden_state" and new:
            cost.groups["lm_head (P's hidden states)"] = lm_head_cost(model, len(new))
        dt = cost.time_s(profile)
        uniform = batch.uniform_decode_token_count is not None and npf == 0
        res.steps.append(
            SimStep(
                t,
                dt,
                nd,
                npf,
                batch.decode_graph_eligible,
                uniform,
                cost,
                list(batch.num_computed_tokens),
            )
        )
        for r in new:
            r.first_step_t, r.left = t, cfg.output_len
            r.context = first_row(cfg.design, r.prompt_len)[0] + 1
            r.ttft_d = 0.0 if cfg.design in ("first_token", "append_prompt") else t + dt - r.arrival
            if cfg.design == "recompute":
                r.left += 1  # this step computed token 1; token 2 is the next step's
            else:
                r.t2t_d = t + dt - r.arrival
            active.append(r)
        for r in active:
            if r not in new:
                if r.t2t_d < 0:
                    r.t2t_d = t + dt - r.arrival
                r.left -= 1
                r.context += 1
        active = [r for r in active if r.left > 0]
        background = [c + 1 for c in background]
        t += dt
        if progress is not None:
            progress(t)
    return res
