"""The modelled cost of one whole model step on a decode instance, in kernel groups, built
from the per-kernel functions of :mod:`pdlab.sim.kernel_costs` (no new formulas for the
attention): the projections of every token, ``forward_mqa`` over the rows routed as
decodes, ``forward_mha`` for each row routed as a prefill, ``lm_head`` for every position
that samples (all ``1 + K`` of a verifying row under speculative decoding, and each hidden
state P sent, in the same product), and, with ``K`` speculative tokens, the MTP drafter.

Each group's time is its roofline floor, ``max(FLOPs / peak, bytes / bandwidth)``, on a
:class:`~pdlab.sim.profiles.DeviceProfile` (the dense bf16 peak); a step that is not
``decode_graph_eligible`` also pays one eager launch per attention kernel and layer (the
full decode CUDA graph is lost; see :data:`pdlab.sim.profiles.LAUNCH_OVERHEAD_S`). Weights
are read once per step for the whole batch; ``mla_decode``'s split workspace is left out
(its size depends on the kernel's split plan).

A model without experts (the tiny preset) runs on one GPU, every layer a dense gated MLP
of ``intermediate_size``, every weight at ``e`` bytes. A model with experts (DeepSeek-V3,
V2) runs as a :class:`Deployment` says, by default DeepSeek's own decode deployment
(:data:`DEEPSEEK_DECODE_GPUS`): attention data parallel (each GPU its own batch, all of
attention's and the shared expert's weights), routed experts expert parallel over the
GPUs; the step is one GPU's, the other GPUs assumed to run as many tokens. Its first
``first_k_dense_replace`` layers are dense; each later layer runs the router, the shared
experts and this GPU's routed experts (:func:`moe_layer_cost`), and moves its tokens to
and from their experts' GPUs (dispatch in fp8, combine in bf16, DeepEP's low-latency
kernels) over the profile's link. By default (``Deployment.overlap_all_to_all``) the
step runs as DeepSeek's decode does: its rows split into two micro-batches, each a forward
pass of its own (every weight, ``lm_head`` and the MTP drafter's included, read once per
micro-batch, so twice a step; each micro-batch launches its own eager kernels), one's
all-to-all crossing while the other computes, so the step takes ``max(compute, all-to-all)``
(the pipeline's fill and drain not counted); a one-row step, or one GPU, has nothing to
overlap. With the overlap off, the all-to-all is added to the step. Linear weights are
``Deployment.weight_dtype`` (fp8: 1 byte, block scales not counted: 4 bytes per 128 x 128
block, 0.02%); ``lm_head``, the router and the attention kernels' own weights (``kv_b_proj``,
the absorbed ``W_UK``/``W_UV``, which vLLM dequantizes) stay bf16. The math is counted at
the dense bf16 peak (fp8 GEMMs could run at twice it: a compute floor not lowered).
vLLM's counterpart is its analytic FLOPs and bytes model (``vllm/v1/metrics/perf.py``),
which assumes every expert touched once ``T K`` reaches the experts; pdlab counts the
experts a step's tokens touch under uniform routing.

The MTP drafter is DeepSeek-V3's MTP module run ``K`` times, one token per row each time
(``eh_proj`` over the normed embedding and hidden state, one decoder layer, the shared
``lm_head``), its own graphs launched without overhead: pdlab's simplification of
``vllm/v1/worker/gpu/spec_decode/mtp/speculator.py``, whose first pass also covers the
accepted positions. vLLM itself measures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from pdlab.engine.config import ModelConfig
from pdlab.errors import Phrase, either, invalid
from pdlab.sim.kernel_costs import (
    Cost,
    decode_rows_cost,
    gemm,
    prefill_path_cost,
)
from pdlab.sim.profiles import DeviceProfile

# DeepSeek's decode deployment of V3/R1 ("DeepSeek-V3/R1 Inference System Overview",
# deepseek-ai/open-infra-index, 2025): routed experts EP144, MLA and the shared expert
# DP144, 18 nodes of 8 GPUs, 32 redundant routed experts, each GPU 2 routed experts.
DEEPSEEK_DECODE_GPUS = 144
MAX_GPUS = 1024
WEIGHT_BYTES = {"fp8": 1, "bf16": 2}  # per linear weight value
# DeepEP's low-latency all-to-all sends each token to its experts in fp8 (dispatch) and
# returns their outputs in bf16 (combine): bytes per value.
DISPATCH_BYTES, COMBINE_BYTES = 1, 2


@dataclass(frozen=True)
class Deployment:
    """How a model with experts is split over one decode instance: ``num_gpus`` GPUs,
    attention (and the shared experts, the dense layers, ``lm_head``) data parallel, each
    GPU its own batch; the routed experts expert parallel, ``ceil(E / num_gpus)`` slots on
    each GPU (the slots past ``E`` hold redundant copies, as DeepSeek's 32 do); linear
    weights stored as ``weight_dtype``."""

    num_gpus: int = DEEPSEEK_DECODE_GPUS
    weight_dtype: str = "fp8"
    # DeepSeek's decode overlaps the experts' all-to-all with computation by splitting a
    # step's batch into two micro-batches (their Inference System Overview): an assumption
    # that it hides fully, the weights read once per micro-batch. False: added to the step.
    overlap_all_to_all: bool = True

    def __post_init__(self) -> None:
        n = self.num_gpus
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_GPUS:
            raise invalid("num_gpus", n, Phrase("err_x_int_range", a=1, b=MAX_GPUS))
        if not isinstance(self.weight_dtype, str) or self.weight_dtype not in WEIGHT_BYTES:
            allowed = Phrase("err_x_one_of", choices=list(WEIGHT_BYTES))
            raise invalid("weight_dtype", self.weight_dtype, allowed)
        if not isinstance(self.overlap_all_to_all, bool):
            raise invalid("overlap_all_to_all", self.overlap_all_to_all, Phrase("err_x_bool"))

    @property
    def overlaps(self) -> bool:
        """Two micro-batches, the all-to-all overlapped: on, with another GPU to send to."""
        return self.overlap_all_to_all and self.num_gpus > 1

    @property
    def weight_bytes(self) -> int:
        return WEIGHT_BYTES[self.weight_dtype]

    def experts_per_gpu(self, cfg: ModelConfig) -> int:
        return -(-(cfg.n_routed_experts or 0) // self.num_gpus)

    def redundant_experts(self, cfg: ModelConfig) -> int:
        return self.experts_per_gpu(cfg) * self.num_gpus - (cfg.n_routed_experts or 0)


DEFAULT_DEPLOYMENT = Deployment()


def has_experts(cfg: ModelConfig) -> bool:
    return bool(cfg.n_routed_experts and cfg.num_experts_per_tok and cfg.moe_intermediate_size)


def num_moe_layers(cfg: ModelConfig) -> int:
    """The decoder layers that route to experts (from ``first_k_dense_replace`` on)."""
    if not has_experts(cfg):
        return 0
    return max(0, cfg.num_hidden_layers - cfg.first_k_dense_replace)


def touched_experts(num_experts: int, top_k: int, tokens: float) -> float:
    """The expected number of distinct experts ``tokens`` tokens touch, each choosing
    ``top_k`` of ``num_experts``, under uniform routing (an assumption: a trained router
    is not uniform, and DeepSeek balances its load): ``E (1 - (1 - k / E) ** T)``."""
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def linear(m: int, n: int, k: int, e: int, w_e: int) -> tuple[float, float]:
    """:func:`~pdlab.sim.kernel_costs.gemm` with the weight ``[k, n]`` stored at ``w_e``
    bytes a value and the activations at ``e``."""
    return 2.0 * m * n * k, float(e) * (m * k + m * n) + float(w_e) * k * n


def attention_proj_cost(cfg: ModelConfig, tokens: int, e: int = 2, w_e: int | None = None) -> Cost:
    """One layer's projections around the attention kernels, for ``tokens`` tokens: the
    query (``q_proj`` or ``q_a_proj``/``q_b_proj``), ``kv_a_proj_with_mqa`` and ``o_proj``,
    weights at ``w_e`` bytes a value (by default ``e``)."""
    d, h, w = cfg.hidden_size, cfg.num_attention_heads, e if w_e is None else w_e
    c = Cost()
    if cfg.q_lora_rank is None:
        c.add("q_proj", *linear(tokens, h * cfg.qk_head_dim, d, e, w))
    else:
        c.add("q_a_proj", *linear(tokens, cfg.q_lora_rank, d, e, w))
        c.add("q_b_proj", *linear(tokens, h * cfg.qk_head_dim, cfg.q_lora_rank, e, w))
    c.add("kv_a_proj_with_mqa", *linear(tokens, cfg.kv_cache_dim, d, e, w))
    c.add("o_proj", *linear(tokens, d, h * cfg.v_head_dim, e, w))
    return c


def mlp_cost(cfg: ModelConfig, tokens: int, e: int = 2, w_e: int | None = None) -> Cost:
    """The dense gated MLP of ``intermediate_size`` (gate and up, then down)."""
    d, i, w = cfg.hidden_size, cfg.intermediate_size, e if w_e is None else w_e
    c = Cost().add("gate_up_proj", *linear(tokens, 2 * i, d, e, w))
    return c.add("down_proj", *linear(tokens, d, i, e, w))


def dense_layer_cost(cfg: ModelConfig, tokens: int, e: int = 2) -> Cost:
    """One layer's projections outside the attention kernels, for ``tokens`` tokens: the
    query (``q_proj`` or ``q_a_proj``/``q_b_proj``), ``kv_a_proj_with_mqa``, ``o_proj``
    and the gated MLP (gate and up, then down)."""
    c = attention_proj_cost(cfg, tokens, e)
    for part in mlp_cost(cfg, tokens, e).parts:
        c.add(*part)
    return c


def moe_layer_cost(cfg: ModelConfig, tokens: int, deploy: Deployment, e: int = 2) -> Cost:
    """One MoE layer's MLP on one GPU of ``deploy``, for its ``tokens`` tokens: the router
    (bf16), the shared experts (every token), and this GPU's routed expert slots. All
    ``num_gpus`` GPUs run as many tokens, routed uniformly, so this GPU computes ``tokens
    * top_k`` (token, expert) pairs, and reads the weights of each of its slots whose
    expert any of the instance's ``num_gpus * tokens`` tokens touched
    (:func:`touched_experts`)."""
    d, mi, w = cfg.hidden_size, cfg.moe_intermediate_size or 0, deploy.weight_bytes
    E, k, S = cfg.n_routed_experts or 0, cfg.num_experts_per_tok or 0, cfg.n_shared_experts or 0
    c = Cost().add("gate (router)", *linear(tokens, E, d, e, 2))
    if S:
        c.add("shared_experts gate_up", *linear(tokens, 2 * S * mi, d, e, w))
        c.add("shared_experts down", *linear(tokens, d, S * mi, e, w))
    pairs = tokens * k
    share = touched_experts(E, k, deploy.num_gpus * tokens) / E  # of the slots, touched
    weights = float(w) * deploy.experts_per_gpu(cfg) * share * 3 * d * mi
    acts = float(e) * pairs * (d + 2 * mi + mi + d)  # in, gate/up out, down in, out
    return c.add("routed_experts", 2.0 * pairs * 3 * d * mi, weights + acts)


def all_to_all_bytes(cfg: ModelConfig, tokens: int, deploy: Deployment) -> float:
    """Bytes one GPU sends in one MoE layer: its tokens' hidden states to each routed
    expert on another GPU (dispatch, fp8), and back (combine, bf16); as many arrive."""
    k, d, n = cfg.num_experts_per_tok or 0, cfg.hidden_size, deploy.num_gpus
    away = (n - 1) / n  # the pairs whose expert is on another GPU
    return tokens * k * away * d * float(DISPATCH_BYTES + COMBINE_BYTES)


def model_weight_bytes(cfg: ModelConfig, deploy: Deployment, mtp: bool = False) -> float:
    """The weights one GPU of ``deploy`` holds: every layer's attention (the projections at
    the weight dtype, ``kv_b_proj`` in bf16), the dense layers' MLP, each MoE layer's router,
    shared experts and this GPU's expert slots, the embedding and ``lm_head`` (bf16); with
    ``mtp``, DeepSeek-V3's MTP module too (:func:`mtp_weight_bytes`)."""
    d, w, moe = cfg.hidden_size, deploy.weight_bytes, num_moe_layers(cfg)
    dense = sum(p[2] for p in mlp_cost(cfg, 0, 0, w).parts)
    layers = cfg.num_hidden_layers
    total = _attention_weight_bytes(cfg, w) * layers + dense * (layers - moe)
    total += _moe_weight_bytes(cfg, deploy) * moe + 2.0 * 2 * cfg.vocab_size * d
    return total + (mtp_weight_bytes(cfg, deploy) if mtp else 0.0)


def mtp_weight_bytes(cfg: ModelConfig, deploy: Deployment) -> float:
    """The MTP module's own weights on one GPU: ``eh_proj`` (a plain ``nn.Linear`` in
    vLLM's ``deepseek_mtp.py``: bf16) and one decoder layer (an MoE layer where the model
    has experts); its embedding and ``lm_head`` are the target's, shared (vLLM 0.33.0's
    ``load_eagle_model``, ``vllm/v1/worker/gpu/spec_decode/eagle/utils.py``)."""
    d, w = cfg.hidden_size, deploy.weight_bytes
    mlp = (
        _moe_weight_bytes(cfg, deploy)
        if num_moe_layers(cfg)
        else sum(p[2] for p in mlp_cost(cfg, 0, 0, w).parts)
    )
    return 2.0 * 2 * d * d + _attention_weight_bytes(cfg, w) + mlp


def _attention_weight_bytes(cfg: ModelConfig, w: int) -> float:
    """One layer's attention weights: the projections at ``w`` bytes, ``kv_b_proj`` bf16."""
    h, L = cfg.num_attention_heads, cfg.kv_lora_rank
    attn = sum(p[2] for p in attention_proj_cost(cfg, 0, 0, w).parts)
    return attn + 2.0 * L * h * (cfg.qk_nope_head_dim + cfg.v_head_dim)  # kv_b_proj


def _moe_weight_bytes(cfg: ModelConfig, deploy: Deployment) -> float:
    """One MoE layer's MLP weights on one GPU: the router (bf16), the shared experts and
    this GPU's expert slots."""
    d, mi = cfg.hidden_size, cfg.moe_intermediate_size or 0
    expert = float(deploy.weight_bytes) * 3 * d * mi
    per_moe = 2.0 * (cfg.n_routed_experts or 0) * d + expert * (cfg.n_shared_experts or 0)
    return per_moe + expert * deploy.experts_per_gpu(cfg)


def _layers_cost(
    cfg: ModelConfig, tokens: int, e: int, deploy: Deployment | None, layers: int
) -> tuple[Cost, Cost | None, float]:
    """``layers`` decoder layers' projections and MLPs outside the attention kernels:
    (the attention projections and dense MLPs, the MoE MLPs or None, the all-to-all bytes).
    ``deploy`` None (a model without experts): every layer dense, at ``e``."""
    if deploy is None:
        return _scaled(dense_layer_cost(cfg, tokens, e), layers), None, 0.0
    moe = min(layers, num_moe_layers(cfg))
    dense = _scaled(attention_proj_cost(cfg, tokens, e, deploy.weight_bytes), layers)
    for part in _scaled(mlp_cost(cfg, tokens, e, deploy.weight_bytes), layers - moe).parts:
        dense.add(*part)
    experts = _scaled(moe_layer_cost(cfg, tokens, deploy, e), moe)
    return dense, experts, all_to_all_bytes(cfg, tokens, deploy) * moe


def lm_head_cost(cfg: ModelConfig, rows: int, e: int = 2) -> Cost:
    """``compute_logits`` for ``rows`` hidden states: ``lm_head`` only (the final norm
    is applied by the model's forward, before it)."""
    return Cost().add("lm_head", *gemm(rows, cfg.vocab_size, cfg.hidden_size, e))


class Row(NamedTuple):
    """One request of a step: ``context`` tokens cached before it, ``query_len`` new (a
    named tuple: the simulator makes tens of thousands a run)."""

    context: int
    query_len: int = 1
    samples: bool = True


@dataclass
class StepCost:
    """A step's kernel groups (all layers), and how many attention kernels it launches
    eagerly (0 when it replays the full decode graph); ``overlap``: two micro-batches, the
    all-to-all hidden behind the groups' time (:class:`Deployment`)."""

    groups: dict[str, Cost] = field(default_factory=dict)
    eager_launches: int = 0
    link_bytes: float = 0.0  # the MoE all-to-all, each way: over the profile's link
    overlap: bool = False

    @property
    def flops(self) -> float:
        return sum(c.flops for c in self.groups.values())

    @property
    def bytes(self) -> float:
        return sum(c.bytes for c in self.groups.values())

    def group_times(self, profile: DeviceProfile) -> dict[str, float]:
        out = {k: profile.roofline_s(c.flops, c.bytes) for k, c in self.groups.items()}
        if self.link_bytes:
            out["all-to-all"] = self.link_bytes / profile.link_bytes_per_s
        return out

    def time_s(self, profile: DeviceProfile) -> float:
        """The groups' times and the all-to-all's, summed, or with ``overlap`` the larger
        of the two; then the eager launches."""
        t, link = self.compute_and_link_s(profile)
        t = max(t, link) if self.overlap else t + link
        return t + self.eager_launches * profile.launch_overhead_s

    def compute_and_link_s(self, profile: DeviceProfile) -> tuple[float, float]:
        """The groups' times summed (the GPU's compute and memory time), and the
        all-to-all's (0 without experts)."""
        times = self.group_times(profile)
        link = times.pop("all-to-all", 0.0)
        return sum(times.values()), link


def _scaled(c: Cost, n: int) -> Cost:
    out = Cost()
    for name, fl, by in c.parts:
        out.add(name, fl * n, by * n)
    return out


def step_cost(
    cfg: ModelConfig,
    decode_rows: Sequence[Row],
    prefill_rows: Sequence[Row],
    graph_eligible: bool,
    e: int = 2,
    extra_logits: int = 0,
    num_speculative_tokens: int = 0,
    kv_e: int | None = None,
    deploy: Deployment | None = None,
) -> StepCost:
    """The cost of one step whose rows the runner and the builder already split: the
    ``decode_rows`` run ``forward_mqa`` together, each of ``prefill_rows`` runs
    ``forward_mha`` (:func:`pdlab.sim.kernel_costs.prefill_path_cost`). ``extra_logits``
    hidden states (P's, the ``hidden_state`` design) join the step's ``lm_head``, so its
    weights are read once; ``num_speculative_tokens`` adds the MTP drafter; ``kv_e`` is
    the KV cache's bytes per value (1 for fp8). A model with experts runs on one GPU of
    ``deploy`` (by default :data:`DEFAULT_DEPLOYMENT`), the rows being that GPU's batch."""
    deploy = (deploy or DEFAULT_DEPLOYMENT) if has_experts(cfg) else None
    if deploy is not None and deploy.overlaps and len(decode_rows) + len(prefill_rows) > 1:
        args = (graph_eligible, e, extra_logits, num_speculative_tokens, kv_e)
        return _two_micro_batches(cfg, decode_rows, prefill_rows, deploy, *args)
    layers = cfg.num_hidden_layers
    tokens = sum(r.query_len for r in decode_rows) + sum(r.query_len for r in prefill_rows)
    s = StepCost()
    if tokens:  # no rows (only P's hidden states to turn into tokens): no weights read
        dense, experts, s.link_bytes = _layers_cost(cfg, tokens, e, deploy, layers)
        s.groups["dense"] = dense
        if experts is not None:
            s.groups["moe"] = experts
    launches = 0
    if decode_rows:
        mqa = decode_rows_cost(
            cfg,
            [r.context + r.query_len for r in decode_rows],
            e,
            [r.query_len for r in decode_rows],
            kv_e,
        )
        s.groups["forward_mqa"] = _scaled(mqa, layers)
        launches += len(mqa.parts) * layers
    if prefill_rows:
        mha = Cost()
        for r in prefill_rows:
            parts = prefill_path_cost(cfg, r.context, r.query_len, e, kv_e=kv_e).parts
            for name, fl, by in parts:
                mha.add(name, fl, by)
        s.groups["forward_mha"] = _scaled(mha, layers)
        launches += len(mha.parts) * layers
    logits = sum(r.query_len for r in (*decode_rows, *prefill_rows) if r.samples)
    logits += extra_logits
    if logits:
        s.groups["lm_head"] = lm_head_cost(cfg, logits, e)
    rows = [*decode_rows, *prefill_rows]
    if num_speculative_tokens and rows:
        draft = mtp_draft_cost(cfg, [r.context for r in rows], e, deploy)
        s.groups["MTP drafter"] = _scaled(draft, num_speculative_tokens)
        s.link_bytes += num_speculative_tokens * mtp_link_bytes(cfg, len(rows), deploy)
    s.eager_launches = 0 if graph_eligible else launches
    return s


def _two_micro_batches(
    cfg: ModelConfig,
    decode_rows: Sequence[Row],
    prefill_rows: Sequence[Row],
    deploy: Deployment,
    graph_eligible: bool,
    e: int,
    extra_logits: int,
    num_speculative_tokens: int,
    kv_e: int | None,
) -> StepCost:
    """The step as two micro-batches, every other row in each (P's hidden states with the
    first), each costed as a step of its own and the two summed part by part, the
    all-to-all overlapped (:class:`Deployment`)."""
    rows = [*decode_rows, *prefill_rows]
    nd, single = len(decode_rows), replace(deploy, overlap_all_to_all=False)
    s, sums = StepCost(overlap=True), dict[str, dict[str, tuple[float, float]]]()
    for first in (0, 1):
        mine = range(first, len(rows), 2)
        part = step_cost(
            cfg,
            [rows[i] for i in mine if i < nd],
            [rows[i] for i in mine if i >= nd],
            graph_eligible,
            e,
            0 if first else extra_logits,
            num_speculative_tokens,
            kv_e,
            single,
        )
        for group, c in part.groups.items():
            parts = sums.setdefault(group, {})
            for name, fl, by in c.parts:  # one part a name, as one step has
                f0, b0 = parts.get(name, (0.0, 0.0))
                parts[name] = (f0 + fl, b0 + by)
        s.eager_launches += part.eager_launches
        s.link_bytes += part.link_bytes
    for group, parts in sums.items():
        s.groups[group] = Cost()
        for name, (fl, by) in parts.items():
            s.groups[group].add(name, fl, by)
    return s


def mtp_link_bytes(cfg: ModelConfig, rows: int, deploy: Deployment | None) -> float:
    """The all-to-all bytes of one MTP pass (its decoder layer is an MoE layer)."""
    if deploy is None or not num_moe_layers(cfg):
        return 0.0
    return all_to_all_bytes(cfg, rows, deploy)


def mtp_draft_cost(
    cfg: ModelConfig, contexts: Sequence[int], e: int = 2, deploy: Deployment | None = None
) -> Cost:
    """One pass of DeepSeek-V3's MTP module, one token for each row over its ``contexts``:
    ``eh_proj`` (``2 hidden -> hidden``), one decoder layer (its projections and
    ``forward_mqa``; an MoE layer on ``deploy`` for a model with experts) and the shared
    ``lm_head``."""
    b, d = len(contexts), cfg.hidden_size
    c = Cost().add("eh_proj", *gemm(b, d, 2 * d, e))
    dense, experts, _ = _layers_cost(cfg, b, e, deploy, 1)
    attention = decode_rows_cost(cfg, [x + 1 for x in contexts], e)
    for part in (dense, experts or Cost(), attention):
        for name, fl, by in part.parts:
            c.add(name, fl, by)
    c.add("lm_head", *gemm(b, cfg.vocab_size, d, e))
    return c


def first_token_forward_cost(cfg: ModelConfig, context: int, forward: str, e: int = 2) -> StepCost:
    """D's one-token step for the first output token alone (the recompute design): the
    whole model over one token with ``context`` cached, through ``forward``."""
    if forward not in ("forward_mqa", "forward_mha"):
        raise invalid("forward", forward, either("'forward_mqa'", "'forward_mha'"))
    row = [Row(context)]
    if forward == "forward_mqa":
        return step_cost(cfg, row, [], graph_eligible=True, e=e)
    return step_cost(cfg, [], row, graph_eligible=False, e=e)
