"""Modelled FLOPs and bytes: of each kernel call (for the trace) and of D's one-token step
through either MLA path (for the tour, the notebooks and ``pdlab bench paths``).

A matrix product ``[M, K] @ [K, N]`` costs ``2 M N K`` FLOPs; bytes count each operand read
once and each result written once, at ``elem_bytes`` per value (2 for bf16). These are the
numbers a roofline reads, not measurements. The two paths mirror ``_forward_prefill`` /
``_compute_prefill_context`` and ``_forward_decode`` of vLLM's MLA
(``vllm/v1/attention/backends/mla/common.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pdlab.config import ModelConfig


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
    return 2.0 * m * n * k, float(e) * (m * k + k * n + m * n)


def attention_pairs(q_lens: list[int], k_lens: list[int], causal: bool) -> int:
    """(query, key) pairs a varlen attention visits, bottom-right causal or full."""
    total = 0
    for q, k in zip(q_lens, k_lens):
        if not causal:
            total += q * k
        else:
            # query i sees min(k, k - q + i + 1) keys, never fewer than 0
            total += sum(max(0, min(k, k - q + i + 1)) for i in range(q))
    return total


def flash_attn_cost(
    q_lens: list[int], k_lens: list[int], heads: int, d_qk: int, d_v: int, causal: bool, e: int = 2
) -> tuple[float, float]:
    pairs = attention_pairs(q_lens, k_lens, causal)
    tq, tk = sum(q_lens), sum(k_lens)
    flops = 2.0 * heads * (d_qk + d_v) * pairs
    nbytes = float(e) * heads * (tq * d_qk + tk * (d_qk + d_v) + tq * d_v) + 4.0 * tq * heads
    return flops, nbytes


def mla_decode_cost(
    seq_lens: list[int], heads: int, width: int, v_width: int, e: int = 2
) -> tuple[float, float]:
    """Absorbed MQA: every head reads the same latent rows, so bytes do not scale with H."""
    s = sum(seq_lens)
    flops = 2.0 * heads * (width + v_width) * s
    nbytes = float(e) * (s * width + len(seq_lens) * heads * (width + v_width))
    return flops, nbytes


def prefill_path_cost(cfg: ModelConfig, context_len: int, query_len: int = 1, e: int = 2) -> Cost:
    """``_forward_prefill`` for one request with ``context_len`` cached tokens, one layer."""
    h, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    kv_b_n = h * (cfg.qk_nope_head_dim + cfg.v_head_dim)
    c = Cost()
    c.add("reshape_and_cache_mla", 0, 2.0 * e * query_len * (L + R))
    c.add("kv_b_proj (new tokens)", *gemm(query_len, kv_b_n, L, e))
    c.add(
        "flash_attn_varlen (new tokens, causal)",
        *flash_attn_cost([query_len], [query_len], h, cfg.qk_head_dim, cfg.v_head_dim, True, e),
    )
    if context_len > 0:
        c.add("gather_cache (context)", 0, 2.0 * e * context_len * (L + R))
        c.add("kv_b_proj (context up-projection)", *gemm(context_len, kv_b_n, L, e))
        c.add(
            "flash_attn_varlen (context, no mask)",
            *flash_attn_cost(
                [query_len], [context_len], h, cfg.qk_head_dim, cfg.v_head_dim, False, e
            ),
        )
        c.add(
            "merge_attn_states",
            5.0 * query_len * h * cfg.v_head_dim,
            3.0 * e * query_len * h * cfg.v_head_dim,
        )
    return c


def decode_path_cost(cfg: ModelConfig, context_len: int, e: int = 2) -> Cost:
    """``_forward_decode`` for one token over ``context_len`` cached tokens, one layer."""
    h, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    c = Cost()
    c.add("reshape_and_cache_mla", 0, 2.0 * e * (L + R))
    c.add(
        "q_nope @ W_UK (absorb)",
        2.0 * h * cfg.qk_nope_head_dim * L,
        e * (h * cfg.qk_nope_head_dim * L + h * (cfg.qk_nope_head_dim + L)),
    )
    c.add("mla_decode", *mla_decode_cost([context_len + 1], h, L + R, L, e))
    c.add(
        "out @ W_UV",
        2.0 * h * L * cfg.v_head_dim,
        e * (h * L * cfg.v_head_dim + h * (L + cfg.v_head_dim)),
    )
    return c


def absorb_crossover_query_len(cfg: ModelConfig) -> float:
    """Query length below which the absorbed form needs fewer FLOPs than up-projecting the
    keys: per key, up-projection costs ``2 L H (nope + v)`` once, while absorbing costs
    ``2 H ((L + R + L) - (qk + v))`` more per query. About 170 for DeepSeek-V3."""
    L = cfg.kv_lora_rank
    extra_per_query = (2 * L + cfg.qk_rope_head_dim) - (cfg.qk_head_dim + cfg.v_head_dim)
    return L * (cfg.qk_nope_head_dim + cfg.v_head_dim) / extra_per_query
