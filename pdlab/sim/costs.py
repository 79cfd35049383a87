"""The modelled cost of one whole model step on a decode instance, in kernel groups, built
from the per-kernel functions of :mod:`pdlab.sim.kernel_costs`: the projections of every
token, ``forward_mqa`` over the decode rows, ``forward_mha`` for each prefill row,
``lm_head`` for every position that samples (all ``1 + K`` of a verifying row, and each
hidden state P sent), and, with ``K`` speculative tokens, the MTP drafter.

Each group's time is its roofline floor on a :class:`~pdlab.sim.profiles.DeviceProfile`; a
step that is not ``decode_graph_eligible`` also pays one eager launch per attention kernel
and layer. Weights are read once per step; ``mla_decode``'s split workspace is left out.

A model without experts runs on one GPU, every weight at ``e`` bytes. A model with experts
runs as a :class:`Deployment` says (the assumptions are told to the reader in the catalog's
``sim_caption_moe`` and ``sim_caption_overlap_on``): the step is one GPU's, each MoE layer
(:func:`moe_layer_cost`) followed by an all-to-all over the profile's link. vLLM's
counterpart is its analytic FLOPs and bytes model (``vllm/v1/metrics/perf.py``), which
assumes every expert touched once ``T K`` reaches the experts; pdlab counts the experts a
step's tokens touch under uniform routing.

The MTP drafter is DeepSeek-V3's MTP module run ``K`` times, one token per row each time,
its own graphs launched without overhead: pdlab's simplification of
``vllm/v1/worker/gpu/spec_decode/mtp/speculator.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from pdlab.engine.config import ModelConfig
from pdlab.errors import Phrase, either, invalid
from pdlab.sim.kernel_costs import Cost, decode_rows_cost, gemm, prefill_path_cost
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
    """A model with experts on ``num_gpus`` GPUs: attention, the shared experts, the dense
    layers and ``lm_head`` data parallel, each GPU its own batch; the routed experts expert
    parallel, ``ceil(E / num_gpus)`` slots a GPU (those past ``E`` redundant copies)."""

    num_gpus: int = DEEPSEEK_DECODE_GPUS
    weight_dtype: str = "fp8"
    # Two micro-batches, the all-to-all hidden behind compute (DeepSeek's Inference System
    # Overview; an assumption that it hides fully). False: added to the step.
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
    if not has_experts(cfg):
        return 0
    return max(0, cfg.num_hidden_layers - cfg.first_k_dense_replace)


def touched_experts(num_experts: int, top_k: int, tokens: float) -> float:
    """The expected distinct experts ``tokens`` tokens touch under uniform routing (an
    assumption: a trained router is not uniform): ``E (1 - (1 - k / E) ** T)``."""
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def linear(m: int, n: int, k: int, e: int, w_e: int) -> tuple[float, float]:
    """:func:`~pdlab.sim.kernel_costs.gemm`, the weight ``[k, n]`` at ``w_e`` bytes a value."""
    return 2.0 * m * n * k, float(e) * (m * k + m * n) + float(w_e) * k * n


def attention_proj_cost(cfg: ModelConfig, tokens: int, e: int = 2, w_e: int | None = None) -> Cost:
    """One layer's projections around the attention kernels (weights at ``w_e``, or ``e``)."""
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
    d, i, w = cfg.hidden_size, cfg.intermediate_size, e if w_e is None else w_e
    c = Cost().add("gate_up_proj", *linear(tokens, 2 * i, d, e, w))
    return c.add("down_proj", *linear(tokens, d, i, e, w))


def moe_layer_cost(cfg: ModelConfig, tokens: int, deploy: Deployment, e: int = 2) -> Cost:
    """One MoE layer's MLP on one GPU of ``deploy``: the router (bf16), the shared experts,
    ``tokens * top_k`` (token, expert) pairs on this GPU's slots, each slot's weights read
    if any of the instance's ``num_gpus * tokens`` tokens touched it."""
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
    """Bytes one GPU sends in one MoE layer: dispatch (fp8) and combine (bf16) of its tokens
    to each routed expert on another GPU; as many arrive."""
    k, d, n = cfg.num_experts_per_tok or 0, cfg.hidden_size, deploy.num_gpus
    away = (n - 1) / n  # the pairs whose expert is on another GPU
    return tokens * k * away * d * float(DISPATCH_BYTES + COMBINE_BYTES)


def model_weight_bytes(cfg: ModelConfig, deploy: Deployment, mtp: bool = False) -> float:
    """The weights one GPU of ``deploy`` holds (embedding and ``lm_head`` bf16); with ``mtp``,
    the MTP module's too."""
    d, w, moe = cfg.hidden_size, deploy.weight_bytes, num_moe_layers(cfg)
    dense = sum(p[2] for p in mlp_cost(cfg, 0, 0, w).parts)
    layers = cfg.num_hidden_layers
    total = _attention_weight_bytes(cfg, w) * layers + dense * (layers - moe)
    total += _moe_weight_bytes(cfg, deploy) * moe + 2.0 * 2 * cfg.vocab_size * d
    return total + (mtp_weight_bytes(cfg, deploy) if mtp else 0.0)


def mtp_weight_bytes(cfg: ModelConfig, deploy: Deployment) -> float:
    """The MTP module's own weights on one GPU: ``eh_proj`` (bf16, a plain ``nn.Linear`` in
    vLLM's ``deepseek_mtp.py``) and one decoder layer; its embedding and ``lm_head`` are the
    target's (vLLM 0.33.0's ``load_eagle_model``)."""
    d, w = cfg.hidden_size, deploy.weight_bytes
    mlp = (
        _moe_weight_bytes(cfg, deploy)
        if num_moe_layers(cfg)
        else sum(p[2] for p in mlp_cost(cfg, 0, 0, w).parts)
    )
    return 2.0 * 2 * d * d + _attention_weight_bytes(cfg, w) + mlp


def _attention_weight_bytes(cfg: ModelConfig, w: int) -> float:
    h, L = cfg.num_attention_heads, cfg.kv_lora_rank
    attn = sum(p[2] for p in attention_proj_cost(cfg, 0, 0, w).parts)
    return attn + 2.0 * L * h * (cfg.qk_nope_head_dim + cfg.v_head_dim)  # kv_b_proj


def _moe_weight_bytes(cfg: ModelConfig, deploy: Deployment) -> float:
    d, mi = cfg.hidden_size, cfg.moe_intermediate_size or 0
    expert = float(deploy.weight_bytes) * 3 * d * mi
    per_moe = 2.0 * (cfg.n_routed_experts or 0) * d + expert * (cfg.n_shared_experts or 0)
    return per_moe + expert * deploy.experts_per_gpu(cfg)


def _layers_cost(
    cfg: ModelConfig, tokens: int, e: int, deploy: Deployment | None, layers: int
) -> tuple[Cost, Cost | None, float]:
    """``layers`` decoder layers outside the attention kernels: (the projections and dense
    MLPs, the MoE MLPs or None, the all-to-all bytes); ``deploy`` None: all dense, at ``e``."""
    w = e if deploy is None else deploy.weight_bytes
    moe = 0 if deploy is None else min(layers, num_moe_layers(cfg))
    dense = _scaled(attention_proj_cost(cfg, tokens, e, w), layers)
    for part in _scaled(mlp_cost(cfg, tokens, e, w), layers - moe).parts:
        dense.add(*part)
    if deploy is None:
        return dense, None, 0.0
    experts = _scaled(moe_layer_cost(cfg, tokens, deploy, e), moe)
    return dense, experts, all_to_all_bytes(cfg, tokens, deploy) * moe


def lm_head_cost(cfg: ModelConfig, rows: int, e: int = 2) -> Cost:
    """``compute_logits`` for ``rows`` hidden states: ``lm_head`` only (the final norm is the
    model's forward's)."""
    return Cost().add("lm_head", *gemm(rows, cfg.vocab_size, cfg.hidden_size, e))


class Row(NamedTuple):
    """One request of a step: ``context`` tokens cached before it, ``query_len`` new (a
    named tuple: the simulator makes tens of thousands a run)."""

    context: int
    query_len: int = 1
    samples: bool = True


@dataclass
class StepCost:
    """A step's kernel groups (all layers), its eager attention launches (0 when it replays
    the full decode graph); ``overlap``: two micro-batches (:class:`Deployment`)."""

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
        t, link = self.compute_and_link_s(profile)
        t = max(t, link) if self.overlap else t + link
        return t + self.eager_launches * profile.launch_overhead_s

    def compute_and_link_s(self, profile: DeviceProfile) -> tuple[float, float]:
        """The groups' times summed, and the all-to-all's (0 without experts)."""
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
    """The cost of one step whose rows the runner and the builder already split into
    ``decode_rows`` and ``prefill_rows``. ``extra_logits`` hidden states (P's, the
    ``hidden_state`` design) join the step's ``lm_head``; ``kv_e`` is the KV cache's bytes
    per value (1 for fp8); a model with experts runs on one GPU of ``deploy``."""
    deploy = (deploy or DEFAULT_DEPLOYMENT) if has_experts(cfg) else None
    if deploy is not None and deploy.overlaps and len(decode_rows) + len(prefill_rows) > 1:
        single = replace(deploy, overlap_all_to_all=False)
        kw = dict(e=e, num_speculative_tokens=num_speculative_tokens, kv_e=kv_e, deploy=single)
        part = functools.partial(step_cost, cfg, graph_eligible=graph_eligible, **kw)
        return _two_micro_batches(part, decode_rows, prefill_rows, extra_logits)
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
        seq_lens = [r.context + r.query_len for r in decode_rows]
        mqa = decode_rows_cost(cfg, seq_lens, e, [r.query_len for r in decode_rows], kv_e)
        s.groups["forward_mqa"] = _scaled(mqa, layers)
        launches += len(mqa.parts) * layers
    if prefill_rows:
        mha = Cost()
        for r in prefill_rows:
            for part in prefill_path_cost(cfg, r.context, r.query_len, e, kv_e=kv_e).parts:
                mha.add(*part)
        s.groups["forward_mha"] = _scaled(mha, layers)
        launches += len(mha.parts) * layers
    rows = [*decode_rows, *prefill_rows]
    logits = sum(r.query_len for r in rows if r.samples) + extra_logits
    if logits:
        s.groups["lm_head"] = lm_head_cost(cfg, logits, e)
    if num_speculative_tokens and rows:
        draft = mtp_draft_cost(cfg, [r.context for r in rows], e, deploy)
        s.groups["MTP drafter"] = _scaled(draft, num_speculative_tokens)
        if deploy is not None and num_moe_layers(cfg):  # its decoder layer is an MoE layer
            s.link_bytes += num_speculative_tokens * all_to_all_bytes(cfg, len(rows), deploy)
    s.eager_launches = 0 if graph_eligible else launches
    return s


def _two_micro_batches(
    part_cost: Callable[..., StepCost],
    decode_rows: Sequence[Row],
    prefill_rows: Sequence[Row],
    extra_logits: int,
) -> StepCost:
    """The step as two micro-batches, every other row in each (P's hidden states with the
    first), each costed by ``part_cost`` as a step of its own, the two summed part by part."""
    rows, nd = [*decode_rows, *prefill_rows], len(decode_rows)
    s, sums = StepCost(overlap=True), dict[str, dict[str, tuple[float, float]]]()
    for first in (0, 1):
        mine = range(first, len(rows), 2)
        decodes, prefills = [rows[i] for i in mine if i < nd], [rows[i] for i in mine if i >= nd]
        part = part_cost(decodes, prefills, extra_logits=0 if first else extra_logits)
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


def mtp_draft_cost(
    cfg: ModelConfig, contexts: Sequence[int], e: int = 2, deploy: Deployment | None = None
) -> Cost:
    """One pass of DeepSeek-V3's MTP module, one token for each row over its ``contexts``:
    ``eh_proj``, one decoder layer and the shared ``lm_head``."""
    b, d = len(contexts), cfg.hidden_size
    c = Cost().add("eh_proj", *gemm(b, d, 2 * d, e))
    dense, experts, _ = _layers_cost(cfg, b, e, deploy, 1)
    attention = decode_rows_cost(cfg, [x + 1 for x in contexts], e)
    for part in (dense, experts or Cost(), attention):
        for p in part.parts:
            c.add(*p)
    c.add("lm_head", *gemm(b, cfg.vocab_size, d, e))
    return c


def first_token_forward_cost(cfg: ModelConfig, context: int, forward: str, e: int = 2) -> StepCost:
    """D's one-token step for token 1 alone (the recompute design), through ``forward``."""
    if forward not in ("forward_mqa", "forward_mha"):
        raise invalid("forward", forward, either("'forward_mqa'", "'forward_mha'"))
    row = [Row(context)]
    if forward == "forward_mqa":
        return step_cost(cfg, row, [], graph_eligible=True, e=e)
    return step_cost(cfg, [], row, graph_eligible=False, e=e)
