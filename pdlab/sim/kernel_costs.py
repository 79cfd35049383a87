"""Modelled FLOPs and bytes: of each kernel call the trace records (:func:`kernel_event_cost`)
and of D's one-token step through either MLA path. The engine records what it ran; this lab
module prices it. Bytes count each operand read once and each result written once, at
``elem_bytes`` per value: the numbers a roofline reads, not measurements. The two paths
mirror ``forward_mha`` (with ``_compute_prefill_context``) and ``forward_mqa`` of vLLM
0.33.0's MLA (``vllm/model_executor/layers/attention/mla_attention.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pdlab.engine.config import ModelConfig
from pdlab.errors import PdlabValueError, Phrase, either, invalid


@dataclass
class Cost:
    flops: float = 0.0
    bytes: float = 0.0
    parts: list[tuple[str, float, float]] = field(default_factory=list)

    def add(self, name: str, flops: float, nbytes: float) -> Cost:
        self.flops += flops
        self.bytes += nbytes
        self.parts.append((name, float(flops), float(nbytes)))
        return self

    @property
    def intensity(self) -> float:
        """FLOPs per byte: where the step sits on a roofline."""
        return self.flops / self.bytes if self.bytes else 0.0


def gemm(m: int, n: int, k: int, e: int = 2) -> tuple[float, float]:
    """``[m, k] @ [k, n]``: ``2 m n k`` FLOPs; both operands read and the result written."""
    return 2.0 * m * n * k, float(e) * (m * k + k * n + m * n)


def per_head_gemm(m: int, heads: int, n: int, k: int, e: int = 2) -> tuple[float, float]:
    """``heads`` products ``[m, k] @ [k, n]``, one weight per head (the absorbed ``W_UK``)."""
    flops, nbytes = gemm(m, n, k, e)
    return heads * flops, heads * nbytes


# What each prefill backend of vLLM 0.33.0 does with V, the strided slice of kv_b_proj's
# output (vllm/v1/attention/backends/mla/prefill/): FA3 on Hopper or FA4 takes it strided;
# FA2 pads it to the qk head size (requires_v_padding); TRTLLM_RAGGED's CuTe DSL path packs
# it for the context chunks (v.contiguous()), as pdlab's own forward_mha does.
V_COPIES = ("none", "pad", "pack")
PREFILL_BACKENDS = {  # name -> (V copy for the new tokens, V copy for the context chunks)
    "flash_attn": ("none", "none"),  # FA3 (sm_90) or FA4: what H100/H200/B200 run
    "flash_attn_fa2": ("pad", "pad"),  # FA2 (A100 and others)
    "trtllm_ragged": ("none", "pack"),  # the CuTe DSL ragged path (Blackwell)
    "pdlab": ("pack", "pack"),  # pdlab's kernels (pdlab/engine/attention/mla_attention.py)
}


def k_assembly_cost(
    tokens: int, heads: int, nope: int, rope: int, v_dim: int, e: int = 2, v_copy: str = "pack"
) -> tuple[float, float]:
    """The prefill path's copies after ``kv_b_proj`` (bytes, no FLOPs): K assembled by
    ``torch.cat([k_nope, k_pe.expand(H)])``, and V as ``v_copy`` says (:data:`V_COPIES`:
    packed, padded to the qk head size, or the strided view). Packed, about 147 KB per token
    and layer for DeepSeek-V3 in bf16, against the 1.2 KB its latent row takes in the cache.
    """
    if v_copy not in V_COPIES:
        raise invalid("v_copy", v_copy, Phrase("err_x_one_of", choices=V_COPIES))
    k_bytes = heads * nope + rope + heads * (nope + rope)
    v_bytes = {"none": 0, "pad": heads * (v_dim + nope + rope), "pack": 2 * heads * v_dim}
    return 0.0, float(e) * tokens * (k_bytes + v_bytes[v_copy])


def split_workspace_cost(
    seq_lens: list[int],
    heads: int,
    L: int,
    num_kv_splits: int,
    tile: int,
    q_lens: Sequence[int] | None = None,
) -> tuple[float, float]:
    """``mla_decode``'s fp32 workspace: a request over ``n > 1`` splits has stage 1 write,
    per query, head and split, a partial output (``L``) and its LSE, and stage 2 read and
    merge them (about 5 FLOPs per value); an unsplit request writes nothing extra."""
    from pdlab.kernels.decode_plan import used_splits

    q_lens = [1] * len(seq_lens) if q_lens is None else q_lens
    used = [used_splits(s, num_kv_splits, tile) for s in seq_lens]
    n = sum(q * u for q, u in zip(q_lens, used) if u > 1)
    return 5.0 * heads * n * L, 8.0 * heads * n * (L + 1)


def merge_attn_states_cost(tokens: int, heads: int, d_v: int, e: int = 2) -> tuple[float, float]:
    """``merge_attn_states`` of two partial outputs: both read, one written, about 5 FLOPs
    per output value."""
    return 5.0 * tokens * heads * d_v, 3.0 * e * tokens * heads * d_v


def attention_pairs(q_lens: list[int], k_lens: list[int], causal: bool) -> int:
    """(query, key) pairs a varlen attention visits, bottom-right causal or full."""
    if not causal:
        return sum(q * k for q, k in zip(q_lens, k_lens))
    total = 0
    for q, k in zip(q_lens, k_lens):
        if q == 1:  # a decode's one query sees every key
            total += k
            continue
        # query i of q sees max(0, k - q + i + 1) keys: the last m = min(q, k) queries see
        # k - m + 1, ..., k of them, the others none
        m = min(q, k)
        total += m * (k - m) + m * (m + 1) // 2
    return total


def flash_attn_cost(
    q_lens: list[int], k_lens: list[int], heads: int, d_qk: int, d_v: int, causal: bool, e: int = 2
) -> tuple[float, float]:
    """``flash_attn_varlen``: ``2 (d_qk + d_v)`` FLOPs per head and visible (query, key)
    pair; Q, K and V read once, the output and an fp32 LSE per query and head written."""
    pairs = attention_pairs(q_lens, k_lens, causal)
    tq, tk = sum(q_lens), sum(k_lens)
    flops = 2.0 * heads * (d_qk + d_v) * pairs
    nbytes = float(e) * heads * (tq * d_qk + tk * (d_qk + d_v) + tq * d_v) + 4.0 * tq * heads
    return flops, nbytes


def mla_decode_cost(
    seq_lens: list[int],
    heads: int,
    width: int,
    v_width: int,
    e: int = 2,
    q_lens: Sequence[int] | None = None,
    kv_e: int | None = None,
) -> tuple[float, float]:
    """Absorbed MQA: every head reads the same latent rows, so bytes do not scale with H.
    ``q_lens`` (default 1 each): queries per request (``1 + K`` on a verifying row, bottom-
    right causal); the rows are read once per request, shared by its queries, at ``kv_e``
    bytes per value (by default ``e``)."""
    q_lens = [1] * len(seq_lens) if q_lens is None else list(q_lens)
    pairs = attention_pairs(q_lens, list(seq_lens), causal=True)
    flops = 2.0 * heads * (width + v_width) * pairs
    rows = float(e if kv_e is None else kv_e) * sum(seq_lens) * width
    return flops, rows + float(e) * sum(q_lens) * heads * (width + v_width)


def decode_tile(L: int, R: int, e: int = 2) -> int:
    """Tokens per tile of ``mla_decode``'s stage 1 (its split granularity)."""
    from pdlab.kernels.decode_plan import mla_decode_config

    return mla_decode_config(L, R, e)["stage1"]["BLOCK_N"]


def mla_decode_call_cost(
    seq_lens: list[int],
    heads: int,
    L: int,
    R: int,
    num_kv_splits: int,
    e: int = 2,
    q_lens: Sequence[int] | None = None,
) -> tuple[float, float]:
    """One ``mla_decode`` call: the attention plus its split workspace round trip."""
    fl, by = mla_decode_cost(seq_lens, heads, L + R, L, e, q_lens)
    tile = decode_tile(L, R, e)
    wf, wb = split_workspace_cost(seq_lens, heads, L, num_kv_splits, tile, q_lens)
    return fl + wf, by + wb


def kernel_event_cost(event: Mapping[str, Any]) -> tuple[float, float]:
    """``(flops, bytes)`` of one ``kernel`` event, from what
    ``pdlab/engine/attention/mla_attention.py`` records with each call (the part a name
    carries in brackets does not change the price). The two copies of latent rows
    (``L + R`` values) cost no FLOPs."""
    s, e = event["shapes"], int(event["elem_bytes"])
    op = event["name"].split(" (")[0]
    if op == "reshape_and_cache_mla":
        flops, nbytes = 0.0, 2.0 * e * s["kv_c"][0] * s["kv_cache"][-1]
    elif op == "q_nope @ W_UK_T":
        rows, h, n = s["q_nope"]
        flops, nbytes = per_head_gemm(rows, h, s["W_UK_T"][-1], n, e)
    elif op == "mla_decode":
        _, h, width = s["q"]
        L, qsl = s["kv_lora_rank"], s.get("query_start_loc")
        q_lens = None if qsl is None else [b - a for a, b in zip(qsl, qsl[1:])]
        flops, nbytes = mla_decode_call_cost(
            s["seq_lens"], h, L, width - L, s["num_kv_splits"], e, q_lens
        )
    elif op == "o_latent @ W_UV":
        rows, h, L = s["o_latent"]
        flops, nbytes = per_head_gemm(rows, h, s["W_UV"][-1], L, e)
    elif op == "gather_cache":
        flops, nbytes = 0.0, 2.0 * e * s["rows"] * s["kv_cache"][-1]
    elif op == "kv_b_proj":
        tokens, L = s["kv_c"]
        flops, nbytes = gemm(tokens, s["kv_b_proj"][0], L, e)
    elif op == "K/V assembly":
        tokens, h, n = s["k_nope"]
        flops, nbytes = k_assembly_cost(tokens, h, n, s["k_pe"][-1], s["v"][-1], e)
    elif op == "flash_attn_varlen":
        h, d_qk, d_v = s["q"][1], s["q"][2], s["v"][2]
        flops, nbytes = flash_attn_cost(s["q_lens"], s["k_lens"], h, d_qk, d_v, s["causal"], e)
    elif op == "merge_attn_states":
        flops, nbytes = merge_attn_states_cost(*s["out"], e)
    else:
        raise PdlabValueError("err_not_priced", name=event["name"])
    return float(flops), float(nbytes)


def traced_cost(events: Sequence[Mapping[str, Any]]) -> Cost:
    """The kernel events' summed cost, one part per event (its name and layer)."""
    c = Cost()
    for ev in events:
        c.add(f"{ev['name']} (layer {ev['layer']})", *kernel_event_cost(ev))
    return c


def prefill_path_cost(
    cfg: ModelConfig,
    context_len: int,
    query_len: int = 1,
    e: int = 2,
    prefill_backend: str = "flash_attn",
    kv_e: int | None = None,
) -> Cost:
    """``forward_mha`` for one request with ``context_len`` cached tokens, one layer, as
    ``prefill_backend`` (:data:`PREFILL_BACKENDS`) runs it: by default FLASH_ATTN, which
    vLLM 0.33.0 picks on Hopper and Blackwell. ``kv_e``: the cache's bytes per value."""
    kv_e = e if kv_e is None else kv_e
    if prefill_backend not in PREFILL_BACKENDS:
        allowed = Phrase("err_x_one_of", choices=list(PREFILL_BACKENDS))
        raise invalid("prefill_backend", prefill_backend, allowed)
    v_new, v_ctx = PREFILL_BACKENDS[prefill_backend]
    h, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    kv_b_n = h * (cfg.qk_nope_head_dim + cfg.v_head_dim)
    nope, dv, qk = cfg.qk_nope_head_dim, cfg.v_head_dim, cfg.qk_head_dim
    c = Cost()
    c.add("reshape_and_cache_mla", 0.0, float(e + kv_e) * query_len * (L + R))
    c.add("kv_b_proj (new tokens)", *gemm(query_len, kv_b_n, L, e))
    c.add("K/V assembly (new tokens)", *k_assembly_cost(query_len, h, nope, R, dv, e, v_new))
    causal = flash_attn_cost([query_len], [query_len], h, qk, dv, True, e)
    c.add("flash_attn_varlen (new tokens, causal)", *causal)
    if context_len > 0:
        c.add("gather_cache (context)", 0.0, float(kv_e + e) * context_len * (L + R))
        c.add("kv_b_proj (context up-projection)", *gemm(context_len, kv_b_n, L, e))
        c.add("K/V assembly (context)", *k_assembly_cost(context_len, h, nope, R, dv, e, v_ctx))
        full = flash_attn_cost([query_len], [context_len], h, qk, dv, False, e)
        c.add("flash_attn_varlen (context, no mask)", *full)
        c.add("merge_attn_states", *merge_attn_states_cost(query_len, h, dv, e))
    return c


def decode_rows_cost(
    cfg: ModelConfig,
    seq_lens: Sequence[int],
    e: int = 2,
    query_lens: Sequence[int] | None = None,
    kv_e: int | None = None,
) -> Cost:
    """``forward_mqa`` for a batch of rows, one layer: the new tokens cached, ``W_UK``
    absorbed, ``mla_decode`` over each row's ``seq_lens`` tokens, then ``W_UV``. A row of
    ``query_lens`` queries (``1 + K``) reads its cached rows once, as FlashMLA's decode does;
    ``kv_e``: the cache's bytes per value (by default ``e``)."""
    b, h, L, R = len(seq_lens), cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    q = list(query_lens) if query_lens is not None else [1] * b
    tq, kv_e = sum(q), e if kv_e is None else kv_e
    c = Cost()
    c.add("reshape_and_cache_mla", 0.0, float(e + kv_e) * tq * (L + R))
    c.add("q_nope @ W_UK (absorb)", *per_head_gemm(tq, h, L, cfg.qk_nope_head_dim, e))
    c.add("mla_decode", *mla_decode_cost(list(seq_lens), h, L + R, L, e, q, kv_e))
    c.add("out @ W_UV", *per_head_gemm(tq, h, cfg.v_head_dim, L, e))
    return c


def decode_path_cost(
    cfg: ModelConfig,
    context_len: int,
    e: int = 2,
    num_kv_splits: int | None = None,
    num_sms: int | None = None,
) -> Cost:
    """``forward_mqa`` for one token over ``context_len`` cached tokens, one layer, plus
    ``mla_decode``'s split workspace (``None`` splits: automatic on ``num_sms`` SMs, by
    default the CPU stand-in of ``pdlab/kernels/decode_plan.py``)."""
    from pdlab.kernels import decode_plan as da

    h, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    seq = context_len + 1
    splits = num_kv_splits or da.num_kv_splits_auto(1, h, seq, num_sms or da.CPU_NUM_SMS, L, R)
    c = decode_rows_cost(cfg, [seq], e)
    workspace = split_workspace_cost([seq], h, L, splits, decode_tile(L, R, e))
    return c.add("mla_decode split workspace", *workspace)


def absorb_crossover_query_len(cfg: ModelConfig) -> float:
    """The query length below which absorbing needs fewer FLOPs, in the limit of a cached
    context much longer than the query (about 171 for DeepSeek-V3). Absorbing moves the
    up-projection from the keys to the queries: ``kv_b_proj`` costs ``2 L H (nope + v)``
    per key in the naive form, ``W_UK`` and ``W_UV`` cost the same per query in the
    absorbed one, and each (query, key) pair costs ``2 H ((L + R + L) - (qk + v))`` more.
    For a fresh prompt (no cached context) there is no crossover: see :func:`mla_forms_flops`."""
    L = cfg.kv_lora_rank
    extra_per_query = (2 * L + cfg.qk_rope_head_dim) - (cfg.qk_head_dim + cfg.v_head_dim)
    return L * (cfg.qk_nope_head_dim + cfg.v_head_dim) / extra_per_query


def mla_forms_flops(cfg: ModelConfig, query_len: int, context_len: int) -> tuple[float, float]:
    """``(naive, absorbed)`` attention FLOPs, one layer, for ``query_len`` new tokens of one
    request over ``context_len`` cached tokens, causal among the new tokens (the work both
    forms share, such as ``q_proj`` and ``o_proj``, is left out).

    * naive (``forward_mha``): ``kv_b_proj`` up-projects every key, cached and new
      (``(S + q) 2 L H (nope + v)``), then each (query, key) pair costs ``2 H (qk + v)``;
    * absorbed (``forward_mqa``): ``W_UK`` and ``W_UV`` cost ``q 2 L H (nope + v)``, then
      each pair costs ``2 H ((L + R) + L)`` over the latent row.

    The pairs are ``q S + q (q + 1) / 2``. With ``S = 0`` the projections are equal and every
    pair costs more absorbed, so a fresh prompt is always cheaper in FLOPs the naive way."""
    h, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    n, v, q, s = cfg.qk_nope_head_dim, cfg.v_head_dim, query_len, context_len
    pairs = q * s + q * (q + 1) / 2
    proj = 2.0 * L * h * (n + v)
    naive = (s + q) * proj + pairs * 2.0 * h * (n + R + v)
    absorbed = q * proj + pairs * 2.0 * h * ((L + R) + L)
    return naive, absorbed


def absorb_flops_per_key(cfg: ModelConfig, query_len: int) -> tuple[float, float]:
    """``(naive, absorbed)`` FLOPs per cached token and layer for ``query_len`` queries of
    one request (the two forms as :func:`mla_forms_flops` counts them)."""
    h, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    n, v = cfg.qk_nope_head_dim, cfg.v_head_dim
    naive = 2.0 * L * h * (n + v) + query_len * 2.0 * h * (n + R + v)
    absorbed = query_len * 2.0 * h * ((L + R) + L)
    return naive, absorbed


def shared_weight_bytes(cfg: ModelConfig, path: str, context_len: int, e: int = 2) -> float:
    """Bytes of weights a path's cost counts that a batch reads once for all its requests
    (``kv_b_proj``, or the absorbed ``W_UK`` and ``W_UV``): ``cost.bytes`` minus this is one
    more request's marginal bytes."""
    h, L = cfg.num_attention_heads, cfg.kv_lora_rank
    n, v = cfg.qk_nope_head_dim, cfg.v_head_dim
    if path == "prefill":
        return float(e) * L * h * (n + v) * (2 if context_len > 0 else 1)
    if path == "decode":
        return float(e) * h * (n * L + L * v)
    raise invalid("path", path, either("'prefill'", "'decode'"))
