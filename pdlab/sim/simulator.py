"""A deterministic step-level simulator of one decode (D) instance: what an arriving
request's first step costs the whole decode batch, per first-token design and routing.

D runs ``batch_size`` decodes (each over ``context`` cached tokens, growing a token per
step) and takes arrivals whose K/V have landed: Poisson in time (seeded), prompt lengths
from the distribution the user picks. An arrival's first step on D is the row its design
makes (:func:`first_row`; the designs are ``pdlab/disagg/designs.py``; ``hidden_state``'s
token 1 is a row of the ``lm_head`` of the step during which its K/V land). It then
decodes ``output_len`` tokens and leaves.

With ``num_speculative_tokens = K > 0`` (DeepSeek's MTP), every running decode verifies
``1 + K`` tokens a step and emits on average ``1 + a + ... + a^K`` of them (``a``:
:data:`MTP_ACCEPTANCE_RATE`); an arrival's first row is padded with ``K`` placeholder
drafts, as 0.33.0's ``pad_spec_decode`` does, and emits one token. vLLM 0.33.0 refuses MTP
under routing ``dcp`` on a NIXL instance (``check_attention_cp_compatibility``), so the MTP
grids leave it out; ``dcp`` models the routing only, its costs one device's.

A model with experts runs as deployed (:class:`pdlab.sim.costs.Deployment`; :func:`check_fits`
refuses an instance whose weights overflow a GPU), ``batch_size`` the decodes of the one
GPU simulated; a model without experts runs on one GPU.

Every routing decision is the engine's own code (``gather_batch_req_state``, then
``split_query_lens`` with the thresholds of the MLA builder the platform picks); none of it
needs torch. vLLM has no counterpart; published simulators (vidur, DistServe's,
splitwise-sim, llm-d's) assume P emits token 1 and model no such step.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from pdlab.engine.attention.backend import split_query_lens
from pdlab.engine.attention.mla_builder import MLAMetadataBuilder
from pdlab.engine.config import (
    AttentionConfig,
    ModelConfig,
    ParallelConfig,
    adjust_dcp_kv_cache_interleave_size,
)
from pdlab.engine.distributed.kv_transfer.base import FIRST_TOKEN_MODES as MODES
from pdlab.engine.worker.gpu.batch import gather_batch_req_state
from pdlab.errors import PdlabError, Phrase, invalid
from pdlab.sim import DISTRIBUTIONS, ROUTINGS
from pdlab.sim.costs import (
    DEEPSEEK_DECODE_GPUS,
    MAX_GPUS,
    Deployment,
    Row,
    StepCost,
    has_experts,
    model_weight_bytes,
    step_cost,
)
from pdlab.sim.peaks import MEMORY_GB
from pdlab.sim.profiles import DeviceProfile

# DeepSeek-V3's own figure for its MTP module as a drafter: 85-90% for the second token.
# pdlab takes the low end for every draft (an assumption past the second token).
MTP_ACCEPTANCE_RATE = 0.85
MTP_ACCEPTANCE_SOURCE = (
    "DeepSeek-V3 Technical Report (arXiv:2412.19437), section 5.4.3: 85-90% for the "
    "second token; pdlab takes 85% for every draft"
)
KV_CACHE_DTYPES = ("auto", "fp8")
# Bounds that keep one run a few seconds of CPU (the loop steps through simulated time
# and every arrival): five simulated minutes, and at most this many arrivals in them.
MAX_SIM_DURATION_S = 300.0
MAX_SIM_ARRIVALS = 10_000
KV_BYTES_PER_VALUE = {"auto": 2, "fp8": 1}  # DeepSeek's bf16, or fp8 with a per-tensor scale


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
    duration_s: float = 5.0  # at the defaults about 300 steps: enough for a p99
    block_size: int = 64
    seed: int = 0
    num_speculative_tokens: int = 0
    acceptance_rate: float = MTP_ACCEPTANCE_RATE
    kv_cache_dtype: str = "auto"
    # A model with experts (pdlab.sim.costs.Deployment; ignored without experts):
    num_gpus: int = DEEPSEEK_DECODE_GPUS
    weight_dtype: str = "fp8"
    overlap_all_to_all: bool = True  # two micro-batches, as DeepSeek's decode

    def __post_init__(self) -> None:
        def bad(name: str, allowed: Phrase) -> PdlabError:
            return invalid(name, getattr(self, name), allowed)

        for name, allowed in (
            ("design", MODES),
            ("routing", ROUTINGS),
            ("prompt_dist", DISTRIBUTIONS),
            ("kv_cache_dtype", KV_CACHE_DTYPES),
        ):
            if getattr(self, name) not in allowed:
                raise bad(name, Phrase("err_x_one_of", choices=list(allowed)))
        for name, low, top in (
            ("batch_size", 0, 1 << 20),
            ("context", 1, 1 << 20),
            ("prompt_len", 1, 1 << 20),
            ("output_len", 1, 1 << 20),
            ("num_speculative_tokens", 0, 16),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low or v > top:
                raise bad(name, Phrase("err_x_int_range", a=low, b=top))
        for name in ("arrival_rate", "duration_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
                raise bad(name, Phrase("err_x_finite_ge", n=0))
        if self.duration_s > MAX_SIM_DURATION_S:
            raise bad("duration_s", Phrase("err_x_num_range", a=0, b=f"{MAX_SIM_DURATION_S:g}"))
        top = max_arrival_rate(self.duration_s)
        if self.arrival_rate > top:
            setting = f"duration_s={self.duration_s:g}"
            raise bad("arrival_rate", arrival_rate_allowed(top, setting))
        a = self.acceptance_rate
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 <= a <= 1:
            raise bad("acceptance_rate", Phrase("err_x_num_range", a=0, b=1))
        self.deployment  # noqa: B018 - checks num_gpus, weight_dtype, overlap_all_to_all

    @property
    def deployment(self) -> Deployment:
        return Deployment(self.num_gpus, self.weight_dtype, self.overlap_all_to_all)

    @property
    def tokens_per_verify_step(self) -> float:
        """Tokens a verifying row emits per step on average: ``1 + a + ... + a^K``."""
        return sum(self.acceptance_rate**i for i in range(self.num_speculative_tokens + 1))


def max_arrival_rate(duration_s: float) -> float:
    """The highest arrival rate whose expected arrivals stay within :data:`MAX_SIM_ARRIVALS`."""
    return MAX_SIM_ARRIVALS / duration_s if duration_s > 0 else math.inf


def arrival_rate_allowed(top: float, setting: str) -> Phrase:
    return Phrase("err_x_sim_rate", top=f"{top:g}", n=MAX_SIM_ARRIVALS, setting=setting)


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
    query_lens: list[int] = field(default_factory=list)  # each row's, in batch order
    tokens: float = 0.0  # tokens the step emitted, all rows (expected, under MTP)
    verifying_rows: int = 0  # rows past their first step (their TPOT is time / tokens)


@dataclass
class SimRequest:
    arrival: float
    prompt_len: int
    ttft_d: float = -1.0  # arrival at D to token 1 known (0: P's token is the answer)
    t2t_d: float = -1.0  # arrival at D to token 2
    left: float = 0.0  # tokens still to emit (expected, under MTP)
    context: float = 0.0  # tokens cached once its first step ran (expected, under MTP)
    landed: bool = False  # hidden_state: token 1 computed from P's hidden state


@dataclass
class SimResult:
    config: SimConfig
    profile: DeviceProfile
    steps: list[SimStep] = field(default_factory=list)
    requests: list[SimRequest] = field(default_factory=list)
    mla_backend: str = ""
    reorder_batch_threshold: int = 1
    model: ModelConfig | None = None


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
    """The arrivals at D within ``duration_s``, seeded: Poisson, lengths from ``prompt_dist``."""
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
    """``(num_computed_tokens, num_prompt_tokens, prefill_len)`` of an arrival's first step
    on D under ``design``, for an ``n``-token prompt."""
    if design == "recompute":
        return n - 1, n, n
    if design == "append_prompt":
        return n, n + 1, n + 1
    return n, n, n  # first_token, hidden_state: P's token decodes as D's first row


def builder_for(cfg: SimConfig, gpu: str) -> tuple[MLAMetadataBuilder, str]:
    """The MLA builder D runs under ``cfg`` on ``gpu``, and its backend's name."""
    from pdlab.engine.config import MLA_BACKENDS
    from pdlab.engine.platforms import select_mla_backend

    backend = select_mla_backend(gpu, cfg.kv_cache_dtype).backend
    pcp, dcp = (2 if cfg.routing == routing else 1 for routing in ("pcp", "dcp"))
    parallel = ParallelConfig(prefill_context_parallel_size=pcp, decode_context_parallel_size=dcp)
    # D is a NIXL consumer: under DCP its interleave becomes the block size.
    parallel = adjust_dcp_kv_cache_interleave_size(parallel, cfg.block_size, True)
    attention = AttentionConfig(backend=backend, num_speculative_tokens=cfg.num_speculative_tokens)
    return MLAMetadataBuilder(cfg.block_size, attention, parallel), MLA_BACKENDS[backend].name


def _gather(rows: tuple[dict[str, int], ...], k: int, runner: str, use_pcp: bool, threshold: int):
    """The runner's view of the step: ``gather_batch_req_state`` given each row's scheduled
    tokens, ``num_computed_tokens``, prompt length and ``prefill_len``, and its ``K`` drafts
    (or the scheduler's placeholders), which it subtracts as 0.33.0's V2 does."""
    placeholders = [-1] * k  # only their number is read
    drafts = {"draft_tokens": dict.fromkeys(rows[0], placeholders), "decode_query_len": 1 + k}
    how = {"model_runner": runner, "use_pcp": use_pcp, "reorder_batch_threshold": threshold}
    batch = gather_batch_req_state(*rows, **how, **(drafts if k else {}))
    return batch, list(batch.num_scheduled_tokens), batch.uniform_decode_token_count


def _arrived(requests: list[SimRequest], t: float, before: bool = False) -> int:
    """How many of ``requests`` (in arrival order) have arrived by ``t`` (or just before)."""
    n = 0
    while n < len(requests) and (requests[n].arrival < t if before else requests[n].arrival <= t):
        n += 1
    return n


def check_fits(cfg: SimConfig, model: ModelConfig, profile: DeviceProfile) -> None:
    """Refuse a deployment whose weights alone overflow one GPU of a published profile."""
    mem = MEMORY_GB.get(profile.name)
    if mem is None or not has_experts(model):
        return
    mtp = cfg.num_speculative_tokens > 0  # the MTP module is loaded
    need = lambda n: model_weight_bytes(model, Deployment(n, cfg.weight_dtype), mtp)  # noqa: E731
    if need(cfg.num_gpus) <= mem * 1e9:
        return
    least = next((n for n in range(cfg.num_gpus, MAX_GPUS + 1) if need(n) <= mem * 1e9), None)
    n, gb = least if least is not None else f"> {MAX_GPUS}", f"{need(cfg.num_gpus) / 1e9:.0f}"
    what = {"gpu": profile.name, "model": model.name, "dtype": cfg.weight_dtype}
    allowed = Phrase("err_x_sim_fits", n=n, **what, gb=gb, value=cfg.num_gpus, mem=mem)
    raise invalid("num_gpus", cfg.num_gpus, allowed)


def simulate(
    cfg: SimConfig,
    model: ModelConfig,
    profile: DeviceProfile,
    gpu: str = "h200",
    progress: Callable[[float], None] | None = None,
) -> SimResult:
    """Run D until ``duration_s`` have passed and every arrival has its second token;
    ``progress`` is told the simulated time after each step."""
    check_fits(cfg, model, profile)
    use_pcp = cfg.routing == "pcp"
    builder, backend_name = builder_for(cfg, gpu)
    threshold = builder.reorder_batch_threshold
    k, per_step = cfg.num_speculative_tokens, cfg.tokens_per_verify_step
    kv_e = KV_BYTES_PER_VALUE[cfg.kv_cache_dtype]
    runner = "v1" if cfg.routing == "v1" else "v2"
    found = {"mla_backend": backend_name, "reorder_batch_threshold": threshold, "model": model}
    res = SimResult(cfg, profile, requests=arrivals(cfg), **found)
    deploy = cfg.deployment
    # The running decodes all started at ``context`` and grow alike: one context for all.
    background_ids = [f"b{i}" for i in range(cfg.batch_size)]
    background = float(cfg.context)
    active: list[SimRequest] = []  # arrivals past their first step
    pending = list(res.requests)
    hidden = cfg.design == "hidden_state"
    q1 = 1 + k  # every row schedules 1 + K: K drafts, or K placeholders on a first row
    t = 0.0
    while t < cfg.duration_s or pending or any(r.t2t_d < 0 for r in active):
        due = _arrived(pending, t)  # pending is in arrival order
        new = [r for r in pending[:due] if r.landed or not hidden]
        landing = [r for r in pending[:due] if hidden and not r.landed]
        if not (background_ids or active or new or landing):
            if not pending:
                break
            t = pending[0].arrival  # an idle D waits for the next arrival
            continue
        pending = landing + pending[due:]  # the rest have not arrived
        # Each row's scheduled tokens, num_computed_tokens, prompt and prefill_len, in the
        # scheduler's order: the running decodes, the arrivals past their first step, the new.
        c = round(background)
        rows = tuple(dict.fromkeys(background_ids, x) for x in (q1, c, c, c))
        others = [(f"a{j}", (q1, *[round(r.context)] * 3)) for j, r in enumerate(active)]
        others += [(f"n{m}", (q1, *first_row(cfg.design, r.prompt_len))) for m, r in enumerate(new)]
        for rid, values in others:
            for d, x in zip(rows, values):
                d[rid] = x
        if rows[0]:
            batch, q, uniform = _gather(rows, k, runner, use_pcp, threshold)
            rules = (threshold, builder.require_uniform, builder.treat_short_extends_as_decodes)
            nd, npf, _, _ = split_query_lens(q, batch.is_prefilling, *rules)
            contexts, eligible = list(batch.num_computed_tokens), batch.decode_graph_eligible
        else:  # only P's hidden states to turn into tokens
            nd = npf = 0
            q, contexts, eligible, uniform = [], [], True, 1
        same: dict[tuple[int, int], Row] = {}  # the running decodes share one Row
        ordered = [same.get(x) or same.setdefault(x, Row(*x)) for x in zip(contexts, q)]

        dec, pre = ordered[:nd], ordered[nd:]
        cost = step_cost(model, dec, pre, eligible, 2, len(landing), k, kv_e, deploy)
        if hidden:  # P's hidden states whose K/V land while this step runs join its lm_head
            t_end = t + cost.time_s(profile)
            waiting = pending[len(landing) :]  # all arrive after t, none has landed
            landing += waiting[: _arrived(waiting, t_end, before=True)]
            cost = step_cost(model, dec, pre, eligible, 2, len(landing), k, kv_e, deploy)
        dt = cost.time_s(profile)
        verifying = len(background_ids) + len(active)
        uniform_decode, tokens = uniform is not None and npf == 0, verifying * per_step + len(new)
        step = SimStep(
            t, dt, nd, npf, eligible, uniform_decode, cost, contexts, q, tokens, verifying
        )
        res.steps.append(step)
        for r in landing:
            r.landed, r.ttft_d = True, t + dt - r.arrival
        for r in active:  # the rows that were running before this step
            if r.t2t_d < 0:
                r.t2t_d = t + dt - r.arrival
            r.left -= per_step
            r.context += per_step
        for r in new:
            r.left = cfg.output_len - 1  # tokens after token 1
            r.context = first_row(cfg.design, r.prompt_len)[0] + 1
            if cfg.design in ("first_token", "append_prompt"):
                r.ttft_d = 0.0
            if cfg.design == "recompute":
                r.ttft_d = t + dt - r.arrival  # this step computed token 1
            else:
                r.t2t_d, r.left = t + dt - r.arrival, r.left - 1  # this step: token 2
            active.append(r)
        active = [r for r in active if r.left > 0]
        background += per_step
        t += dt
        if progress is not None:
            progress(t)
    return res
