"""The modelled cost of one whole model step on a decode instance, in kernel groups, built
from the per-kernel functions of :mod:`pdlab.sim.kernel_costs` (no new formulas for the
attention): the dense layers of every token, ``forward_mqa`` over the rows routed as
decodes, ``forward_mha`` for each row routed as a prefill, ``lm_head`` for every position
that samples (all ``1 + K`` of a verifying row under speculative decoding, and each hidden
state P sent, in the same product), and, with ``K`` speculative tokens, the MTP drafter.

Each group's time is its roofline floor, ``max(FLOPs / peak, bytes / bandwidth)``, on a
:class:`~pdlab.sim.profiles.DeviceProfile`; a step that is not ``decode_graph_eligible``
also pays one eager launch per attention kernel and layer (the full decode CUDA graph is
lost; see :data:`pdlab.sim.profiles.LAUNCH_OVERHEAD_S`). Weights are read once per step
for the whole batch. Two simplifications, said plainly: the dense part is pdlab's dense
gated MLP of ``intermediate_size`` on every layer (DeepSeek-V3 routes tokens to 8 of 256
experts on 58 of its 61 layers: more weight bytes per step than this counts), and
``mla_decode``'s split workspace is left out (its size depends on the kernel's split plan).
The MTP drafter is DeepSeek-V3's MTP module run ``K`` times, one token per row each time
(``eh_proj`` over the normed embedding and hidden state, one decoder layer, the shared
``lm_head``), its own graphs launched without overhead: pdlab's simplification of
``vllm/v1/worker/gpu/spec_decode/mtp/speculator.py``, whose first pass also covers the
accepted positions. vLLM has no counterpart: it measures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from pdlab.engine.config import ModelConfig
from pdlab.errors import either, invalid
from pdlab.sim.kernel_costs import (
    Cost,
    decode_rows_cost,
    gemm,
    prefill_path_cost,
)
from pdlab.sim.profiles import DeviceProfile


def dense_layer_cost(cfg: ModelConfig, tokens: int, e: int = 2) -> Cost:
    """One layer's projections outside the attention kernels, for ``tokens`` tokens: the
    query (``q_proj`` or ``q_a_proj``/``q_b_proj``), ``kv_a_proj_with_mqa``, ``o_proj``
    and the gated MLP (gate and up, then down)."""
    d, h = cfg.hidden_size, cfg.num_attention_heads
    c = Cost()
    if cfg.q_lora_rank is None:
        c.add("q_proj", *gemm(tokens, h * cfg.qk_head_dim, d, e))
    else:
        c.add("q_a_proj", *gemm(tokens, cfg.q_lora_rank, d, e))
        c.add("q_b_proj", *gemm(tokens, h * cfg.qk_head_dim, cfg.q_lora_rank, e))
    c.add("kv_a_proj_with_mqa", *gemm(tokens, cfg.kv_cache_dim, d, e))
    c.add("o_proj", *gemm(tokens, d, h * cfg.v_head_dim, e))
    c.add("gate_up_proj", *gemm(tokens, 2 * cfg.intermediate_size, d, e))
    c.add("down_proj", *gemm(tokens, d, cfg.intermediate_size, e))
    return c


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
    eagerly (0 when it replays the full decode graph)."""

    groups: dict[str, Cost] = field(default_factory=dict)
    eager_launches: int = 0

    @property
    def flops(self) -> float:
        return sum(c.flops for c in self.groups.values())

    @property
    def bytes(self) -> float:
        return sum(c.bytes for c in self.groups.values())

    def group_times(self, profile: DeviceProfile) -> dict[str, float]:
        return {k: profile.roofline_s(c.flops, c.bytes) for k, c in self.groups.items()}

    def time_s(self, profile: DeviceProfile) -> float:
        t = sum(self.group_times(profile).values())
        return t + self.eager_launches * profile.launch_overhead_s


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
) -> StepCost:
    """The cost of one step whose rows the runner and the builder already split: the
    ``decode_rows`` run ``forward_mqa`` together, each of ``prefill_rows`` runs
    ``forward_mha`` (:func:`pdlab.sim.kernel_costs.prefill_path_cost`). ``extra_logits``
    hidden states (P's, the ``hidden_state`` design) join the step's ``lm_head``, so its
    weights are read once; ``num_speculative_tokens`` adds the MTP drafter; ``kv_e`` is
    the KV cache's bytes per value (1 for fp8)."""
    layers = cfg.num_hidden_layers
    tokens = sum(r.query_len for r in decode_rows) + sum(r.query_len for r in prefill_rows)
    s = StepCost()
    if tokens:  # no rows (only P's hidden states to turn into tokens): no weights read
        s.groups["dense"] = _scaled(dense_layer_cost(cfg, tokens, e), layers)
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
        s.groups["MTP drafter"] = _scaled(
            mtp_draft_cost(cfg, [r.context for r in rows], e), num_speculative_tokens
        )
    s.eager_launches = 0 if graph_eligible else launches
    return s


def mtp_draft_cost(cfg: ModelConfig, contexts: Sequence[int], e: int = 2) -> Cost:
    """One pass of DeepSeek-V3's MTP module, one token for each row over its ``contexts``:
    ``eh_proj`` (``2 hidden -> hidden``), one decoder layer (its projections and
    ``forward_mqa``) and the shared ``lm_head``."""
    b, d = len(contexts), cfg.hidden_size
    c = Cost().add("eh_proj", *gemm(b, d, 2 * d, e))
    for part in (dense_layer_cost(cfg, b, e), decode_rows_cost(cfg, [x + 1 for x in contexts], e)):
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
