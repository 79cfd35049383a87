"""Seeded random workloads for the lockstep check, and the plain data both twins speak.

A workload is a scheduler configuration (:class:`Config`), requests arriving at given
steps (:class:`Spec`), aborts at given steps, how the sampler answers (a stop token now
and then) and, on the decode side, how each K/V receive ends. Everything comes from one
``random.Random(seed)``, so a seed names a workload: ``lockstep.py`` replays it.

Local workloads stress what a single instance does: prefixes shared between requests
(and whole prompts repeated), chunked prefill under small budgets and
``long_prefill_token_threshold``, pools small enough to preempt, aborts in every state,
stop tokens. Decode-side workloads give every request (or most) ``kv_transfer_params``
from a pretend P: prompts of whole blocks, with a partial last block, shorter than one
block, sharing prefixes with earlier requests (so part of the prompt is a local hit);
receives that land after a few steps, fail as a whole (``failed_recving``), or lose the
blocks from some index on (``invalid_block_ids``), under both ``kv_load_failure_policy``
values; aborts while the K/V arrive.

The speculative-decoding kinds (``local_spec``, ``decode_spec``) are the same workloads,
drawn from the same seed, with a ``SpeculativeConfig`` (``mtp`` or ``ngram``, K = 1 or 2)
drawn after them (MTP with K = 2 drafts with two modules half the time, unless the block
size is below K with prefix caching, which both refuse), and a seeded drafter
(:meth:`Workload.draft`) that agrees with the sampler at the workload's acceptance rate:
accepted runs, rejections, placeholders.
Three inputs are moved out of the way where pdlab refuses a configuration vLLM accepts: a
``long_prefill_token_threshold`` below ``1 + K`` becomes ``1 + K`` (vLLM asserts on the
first padded row it cuts); a budget below ``1 + K`` becomes ``1 + K`` (for MTP vLLM's
``VllmConfig`` refuses it too; for n-gram vLLM would never schedule a padded row); and a
pool too small for the longest request's last step with its drafts (and MTP's lookahead
slots), or on D for a receive beside one verifying step's blocks, grows to fit it (pdlab
refuses such a request; vLLM would wait for ever).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field

from pdlab.engine.math_utils import cdiv


@dataclass(frozen=True)
class Config:
    """One scheduler configuration, shared by both twins."""

    block_size: int
    num_blocks: int  # pdlab's count; vLLM gets one more (its null block)
    budget: int  # max_num_batched_tokens
    max_seqs: int
    threshold: int  # long_prefill_token_threshold
    max_model_len: int
    caching: bool = True
    reserve_full_isl: bool = True
    decode: bool = False  # D side: a NIXL connector (vLLM) / PDConnector (pdlab)
    policy: str = "fail"  # kv_load_failure_policy
    spec_method: str | None = None  # SpeculativeConfig.method; None: no speculation
    num_spec_tokens: int = 0  # K
    mtp_modules: int = 1  # the checkpoint's num_nextn_predict_layers (MTP only)
    prefill: bool = False  # P side, the same connectors (tests that build a Config only)


@dataclass(frozen=True)
class Spec:
    """One request, as both twins are given it."""

    req_id: str
    prompt: tuple[int, ...]
    max_tokens: int
    stop_token_ids: tuple[int, ...] = ()
    remote_block_ids: tuple[int, ...] | None = None  # D side: P's blocks holding its K/V
    remote_decode: bool = False  # P side: a request P prefills for D

    def kv_transfer_params(self) -> dict | None:
        """NixlConnector's keys, as P's ``request_finished`` returns them (on P, as the
        proxy sends them)."""
        if self.remote_decode:
            return {"do_remote_decode": True, "do_remote_prefill": False}
        if self.remote_block_ids is None:
            return None
        return {
            "do_remote_prefill": True,
            "do_remote_decode": False,
            "remote_block_ids": list(self.remote_block_ids),
            "remote_engine_id": "prefill-engine",
            "remote_request_id": f"p-{self.req_id}",
            "remote_host": "localhost",
            "remote_port": 5600,
            "tp_size": 1,
        }


@dataclass(frozen=True)
class Scheduled:
    """One ``schedule()``, as both twins report it. ``rows``: per scheduled request in
    scheduling order ``(req_id, num_tokens, "new" | "running", num_computed_tokens before
    the step, block ids)`` (all blocks for a new or resumed request, the added ones for a
    running one). ``loads``: the connector's receives started this step, ``req_id ->
    local block ids``, or None where it only tells P to let go of the blocks."""

    rows: tuple
    preempted: tuple[str, ...]
    loads: dict = field(default_factory=dict)
    spec: tuple = ()  # sorted (req_id, drafts) of scheduled_spec_decode_tokens


@dataclass(frozen=True)
class KVReport:
    """What the (simulated) worker side of the connector reports after a step."""

    finished_recving: frozenset[str] = frozenset()
    failed_recving: frozenset[str] = frozenset()
    invalid_block_ids: frozenset[int] = frozenset()  # pdlab's numbering


@dataclass
class Workload:
    seed: int
    kind: str  # "local" or "decode"
    config: Config
    arrivals: dict[int, list[Spec]]  # step -> requests added before it
    aborts: dict[int, list[str]]  # step -> request ids aborted before it
    stop_prob: float  # chance that a sampled token is the request's stop token
    # D side, per request: (steps until the receive ends, "ok" | "fail" | block index)
    recv_outcome: dict[str, tuple[int, object]] = field(default_factory=dict)
    acceptance: float = 0.0  # how often the drafter proposes the sampler's token

    def sample(self, spec: Spec, num_tokens: int) -> int:
        """The token "sampled" for ``spec`` after ``num_tokens`` tokens: a function of the
        seed, the request and the position only, so both twins see the same one."""
        rng = random.Random(f"{self.seed}/{spec.req_id}/{num_tokens}")
        if spec.stop_token_ids and rng.random() < self.stop_prob:
            return spec.stop_token_ids[0]
        return rng.randrange(100, 200)

    def draft(self, spec: Spec, position: int) -> int:
        """The drafter's guess for the token at ``position``: the sampler's own with
        probability ``acceptance`` (so it is accepted, stop tokens included), else one
        the sampler does not give there."""
        want = self.sample(spec, position)
        rng = random.Random(f"{self.seed}/{spec.req_id}/{position}/draft")
        return want if rng.random() < self.acceptance else want + 100

    def verify(self, spec: Spec, num_tokens: int, drafts) -> list[int]:
        """What a greedy rejection sampler returns for a row whose known tokens are all
        computed: the drafts equal to the sampler's tokens, then the sampler's token at the
        first mismatch (a ``-1`` placeholder never matches) or after the last draft."""
        tokens = []
        for j, d in enumerate(drafts):
            tokens.append(self.sample(spec, num_tokens + j))
            if tokens[-1] != d:
                return tokens
        tokens.append(self.sample(spec, num_tokens + len(drafts)))
        return tokens


def _prompts(rng: random.Random, n: int, max_len: int) -> list[tuple[int, ...]]:
    """``n`` prompts over a tiny vocabulary, most starting with one of a few shared
    prefixes and some repeated whole, so prefix-cache hits are common."""
    prefixes = [
        tuple(rng.randrange(16) for _ in range(rng.randint(1, max_len // 2))) for _ in range(3)
    ]
    prompts: list[tuple[int, ...]] = []
    for _ in range(n):
        if prompts and rng.random() < 0.15:
            prompts.append(rng.choice(prompts))
            continue
        head = rng.choice(prefixes) if rng.random() < 0.7 else ()
        tail = tuple(rng.randrange(16) for _ in range(rng.randint(0 if head else 1, max_len)))
        prompts.append((head + tail)[:max_len])
    return prompts


KINDS = ("local", "decode", "local_spec", "decode_spec")


def make_workload(seed: int, kind: str) -> Workload:
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is invalid: expected one of {KINDS}")
    rng = random.Random(seed)
    decode = kind.startswith("decode")
    block_size = rng.choice((1, 2, 4, 4, 8, 16))
    max_model_len = rng.choice((64, 128))
    max_seqs = rng.randint(1, 6)
    budget = rng.choice((max_seqs, 8, 16, 32, 64, 128))
    budget = max(budget, max_seqs)
    threshold = rng.choice((0, 0, 0, 1, 3, 8, 16))
    num_reqs = rng.randint(1, 10)
    max_prompt = rng.choice((4, 12, 24, 40))
    prompts = _prompts(rng, num_reqs, max_prompt)
    specs = []
    longest = 0
    for i, prompt in enumerate(prompts):
        max_tokens = rng.randint(1, 12)
        stops = (rng.randrange(100, 200),) if rng.random() < 0.5 else ()
        remote = None
        if decode and rng.random() < 0.85:
            remote = tuple(range(1000 + 100 * i, 1000 + 100 * i + cdiv(len(prompt), block_size)))
        specs.append(Spec(f"r{i}", prompt, max_tokens, stops, remote))
        longest = max(longest, min(len(prompt) + max_tokens - 1, max_model_len))
    # Enough blocks for the longest request (pdlab refuses one that can never fit; vLLM
    # would wait for ever), and often few enough that requests preempt each other.
    need = cdiv(longest, block_size)
    num_blocks = rng.choice((need, need + 1, need + 3, 2 * need, 4 * need + 8))
    config = Config(
        block_size=block_size,
        num_blocks=num_blocks,
        budget=budget,
        max_seqs=max_seqs,
        threshold=threshold,
        max_model_len=max_model_len,
        caching=rng.random() < 0.85,
        reserve_full_isl=rng.random() < 0.75,
        decode=decode,
        policy=rng.choice(("fail", "recompute")),
    )
    arrivals: dict[int, list[Spec]] = {}
    step = 0
    for spec in specs:
        step += rng.choice((0, 0, 1, 2, 5))
        arrivals.setdefault(step, []).append(spec)
    aborts: dict[int, list[str]] = {}
    for spec in specs:
        if rng.random() < 0.15:
            aborts.setdefault(rng.randint(0, step + 12), []).append(spec.req_id)
    recv_outcome = {}
    for spec in specs:
        if spec.remote_block_ids is None:
            continue
        delay = rng.choice((0, 0, 1, 2, 4))
        r = rng.random()
        outcome: object = "ok"
        if r < 0.15:
            outcome = "fail"
        elif r < 0.35:
            outcome = rng.randrange(len(spec.remote_block_ids))
        recv_outcome[spec.req_id] = (delay, outcome)
    w = Workload(
        seed=seed,
        kind=kind,
        config=config,
        arrivals=arrivals,
        aborts=aborts,
        stop_prob=rng.choice((0.0, 0.1, 0.3)),
        recv_outcome=recv_outcome,
    )
    if kind.endswith("_spec"):
        _add_speculation(w, rng)
    return w


def _add_speculation(w: Workload, rng: random.Random) -> None:
    """Speculative decoding on top of a drawn workload (see the module docstring)."""
    method = rng.choice(("mtp", "ngram"))
    k = rng.choice((1, 2))
    cfg = w.config
    threshold = cfg.threshold
    if 0 < threshold < 1 + k:
        threshold = 1 + k
    budget = max(cfg.budget, 1 + k)
    # Room for the longest request's last step: K drafts and, for MTP, K lookahead slots
    # (pdlab refuses a request that could never take it; vLLM would wait for ever).
    extra = k + (k if method == "mtp" else 0)
    longest = max(
        min(len(s.prompt) + s.max_tokens - 1, cfg.max_model_len)
        for specs in w.arrivals.values()
        for s in specs
    )
    need = cdiv(min(longest + extra, cfg.max_model_len), cfg.block_size)
    if cfg.decode:
        # D admits a receive only beside the blocks of one verifying step.
        prompt_blocks = max(
            cdiv(len(s.prompt), cfg.block_size) for v in w.arrivals.values() for s in v
        )
        need = max(need, prompt_blocks + cdiv(1 + extra, cfg.block_size))
    w.config = dataclasses.replace(
        cfg,
        threshold=threshold,
        budget=budget,
        num_blocks=max(cfg.num_blocks, need),
        spec_method=method,
        num_spec_tokens=k,
    )
    w.acceptance = rng.choice((0.0, 0.5, 0.8, 1.0))
    # Multi-module MTP (two MTP modules, K = 2): D loads all but the last K - 1 prompt
    # tokens, and no chunk ends within K of a prompt's end. vLLM refuses a block size
    # below K with prefix caching, and so does pdlab: not drawn here.
    if method == "mtp" and k == 2 and rng.random() < 0.5:
        if not (cfg.caching and cfg.block_size < k):
            w.config = dataclasses.replace(w.config, mtp_modules=2)


# ---- routing configurations and batches (test_batch_routing.py's grid) -----------------
MLA_BACKEND_KEYS = (
    "cpu_mla",
    "triton_mla",
    "flashmla",
    "flash_attn_mla",
    "flashinfer_mla",
    "cutlass_mla",
)


@dataclass(frozen=True)
class RoutingConfig:
    """One point of the routing grid: the MLA backend (its builder), K, the model runner,
    PCP and DCP sizes, and whether the instance is a NIXL consumer (D of a P/D pair).
    ``kv_cache_dtype`` picks nothing for a named backend (the builders' switches do not
    read it); it is in the grid because the platform's choice does, and
    ``test_batch_routing.py`` also runs the backend pdlab's platform picks for each dtype."""

    backend: str
    num_spec_tokens: int
    model_runner: str
    pcp: int
    dcp: int
    nixl: bool
    block_size: int = 64
    kv_cache_dtype: str = "auto"

    @property
    def label(self) -> str:
        return (
            f"{self.backend}-k{self.num_spec_tokens}-{self.model_runner}-pcp{self.pcp}"
            f"-dcp{self.dcp}-{'nixl' if self.nixl else 'local'}-{self.kv_cache_dtype}"
        )


def routing_grid() -> list[RoutingConfig]:
    """Every backend, K = 0, 1, 2, V2 and V1, PCP 1 and 2 (V2 only: V1 refuses PCP, in
    vLLM and pdlab alike), DCP 1 and 2, local or a NIXL consumer. The KV cache dtype
    adds the backend the platform picks on an H200 for an fp8 cache (FLASHMLA, where
    FLASH_ATTN_MLA refuses fp8): the grid's fp8 points."""
    grid = []
    for dtype, backends in (("auto", MLA_BACKEND_KEYS), ("fp8", ("flashmla",))):
        for backend in backends:
            for k in (0, 1, 2):
                for runner, pcp in (("v2", 1), ("v2", 2), ("v1", 1)):
                    for dcp in (1, 2):
                        for nixl in (False, True):
                            grid.append(
                                RoutingConfig(backend, k, runner, pcp, dcp, nixl, 64, dtype)
                            )
    return grid


@dataclass(frozen=True)
class RoutingBatch:
    """One step's batch as the scheduler hands it to the runner: per request
    ``(num_scheduled_tokens, num_computed_tokens, num_prompt_tokens, prefill_len)`` in the
    scheduler's order, ``scheduled_spec_decode_tokens``, and how many padding rows (query
    length 0, a CUDA graph's padding) follow the runner's order in the attention
    metadata."""

    rows: dict
    drafts: dict
    num_padding_rows: int


def make_routing_batch(seed: int, rc: RoutingConfig) -> RoutingBatch:
    """Decodes (``1 + m`` tokens with ``m <= K`` drafts), D's first step padded to
    ``1 + K`` with ``-1`` placeholders over ``N - 1`` cached, the same row left at one
    token (unpadded: the ``max_model_len`` edge, or a row given a prefill chunk this step),
    later chunks, first chunks (some of one token), requests resumed after a preemption
    (``prefill_len`` past the prompt), and padding rows; a third of the batches are steady
    decoding (every row ``1 + K``)."""
    rng = random.Random(seed)
    k = rc.num_spec_tokens
    rows: dict = {}
    drafts: dict = {}
    # A third of the steps are steady decoding: every row verifies K drafts or is D's
    # padded row, the batch a full decode graph is for.
    steady = rng.random() < 0.3
    for i in range(rng.randint(1, 8)):
        rid = f"r{i}"
        prompt = rng.randint(2, 700)
        plen = prompt + (rng.randint(1, 20) if rng.random() < 0.15 else 0)
        kind = rng.choice(("decode", "decode", "padded", "unpadded", "chunk", "first"))
        if steady:
            kind = rng.choice(("full", "full", "padded"))
        if kind in ("decode", "full"):
            m = k if kind == "full" else rng.randint(0, k)
            rows[rid] = (1 + m, plen + rng.randint(0, 30), prompt, plen)
            if m:
                drafts[rid] = [rng.randrange(1000) for _ in range(m)]
        elif kind == "padded" and k:
            rows[rid] = (1 + k, plen - 1, prompt, plen)
            drafts[rid] = [-1] * k
        elif kind in ("padded", "unpadded"):
            rows[rid] = (1, plen - 1, prompt, plen)
        elif kind == "chunk":
            done = rng.randint(1, plen - 1)
            rows[rid] = (rng.randint(1, plen - done), done, prompt, plen)
        else:
            rows[rid] = (rng.choice((1, rng.randint(1, plen))), 0, prompt, plen)
    padding = rng.choice((0, 0, rng.randint(1, 3)))
    return RoutingBatch(rows, drafts, padding)
