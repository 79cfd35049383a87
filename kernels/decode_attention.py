"""Absorbed MLA decode over the paged latent cache: ``mla_decode`` (split-KV, two stages).

Mirrors vLLM's ``vllm/v1/attention/ops/triton_decode_attention.py``
(``_fwd_grouped_kernel_stage1`` and ``_fwd_kernel_stage2``, driven by ``decode_attention_fwd``
from the Triton MLA backend's ``_forward_decode``), and the idea of FlashMLA.

The math
--------
With ``W_UK`` folded into the query (the "absorbed" form, DeepSeek's ``attn_impl="absorb"``),
every head attends over the same latent rows: this is multi-query attention (MQA). For one
request with query ``q[H, L + R] = [q_nope @ W_UK | q_pe]`` and cached rows
``c_j = [kv_c_j (L) | k_pe_j (R)]``, ``j < seq_len``::

    s[h, j] = scale * q[h] . c_j            (QK width L + R: 576 for DeepSeek, 80 tiny)
    out[h]  = sum_j softmax(s[h])_j kv_c_j  (V = the first L columns of the same rows)
    lse[h]  = log sum_j exp(s[h, j])

``scale`` is the un-absorbed one, ``qk_head_dim ** -0.5`` (192, not 576): absorption
changes how the scores are computed, not their values. ``out`` is still latent; the caller
maps it through ``W_UV``.

Why two stages
--------------
A decode step has one query token per request, so a grid over (request, head group) alone
has too few programs to fill a GPU on a long context. Stage 1 also splits each request's
KV range into ``num_kv_splits`` contiguous parts, ``cdiv(seq_len, num_kv_splits)`` tokens
each, and attends to each part separately, writing a partial ``(out, lse)`` per split
(fp32 workspace). Stage 2 merges the splits by their LSE, the same algebra as
``merge_attn_states``. Splits past the end of a short sequence are empty (``lse = -inf``)
and weigh nothing; a request with ``seq_len = 0`` gets ``out = 0`` and ``lse = -inf``.

The tiling
----------
Stage 1, grid ``(cdiv(H, BLOCK_H), num_reqs, num_kv_splits)``: one program owns
``BLOCK_H`` heads of one request and one split. All heads share the KV rows (MQA), so the
program loads each tile of ``BLOCK_N`` cached rows once and uses it for all its heads:
the query tile ``[BLOCK_H, L + R]``, running max/sum ``[BLOCK_H]`` and the accumulator
``[BLOCK_H, L]`` stay in registers. Head groups come first in the launch order, so the
programs that read the same rows (DeepSeek's 128 heads make 8 groups) run side by side and
share them through L2 rather than each fetching them from memory. Each token's page comes from the block table
(``page = block_table[req, pos // block_size]``, cast to int64 before the stride multiply),
so a tile of ``BLOCK_N`` tokens may straddle pages of any size. The row width 576 is not a
power of two, so the row is handled as its two natural parts, latent ``L`` (512) and rope
``R`` (64), each a power-of-two tile (padded and masked otherwise), with
``s = q_lat @ kv_c^T + q_pe @ k_pe^T``. The latent tile that served as K is reused as V:
one read of the row feeds both matrix products, which is why absorbed decode reads only
``L + R`` values per cached token for all heads together. ``tl.dot`` needs every dimension
>= 16 on a GPU, so a head group is padded to ``BLOCK_H = 16`` (the tiny model has 4 heads).

Stage 2, grid ``(num_reqs, H)``: one program walks its ``num_kv_splits`` partial results
and folds them together with the online-softmax update, in fp32.
"""

from __future__ import annotations

import torch

from pdlab.kernels import backend as _backend
from pdlab.kernels import checks
from pdlab.kernels.common import (
    FLOAT_DTYPES,
    block,
    check_dim,
    check_launchable,
    check_same_device,
    check_tensor,
    fail,
    guard_interpreter_dtype,
    out_buffer,
    tl,
    triton,
    upcast,
)
from pdlab.kernels.merge import merge_attn_states_torch, partial_attention

DEFAULT_NUM_KV_SPLITS = 4  # vLLM's Triton MLA backend uses 4 as well
BLOCK_H = 16
BLOCK_N = 32


# %% Stage 1 (Triton): one split of one request, for a group of heads
@triton.jit
def mla_decode_stage1_kernel(
    q_ptr,
    cache_ptr,
    block_table_ptr,
    seq_lens_ptr,
    mid_out_ptr,
    mid_lse_ptr,
    stride_q_b,
    stride_q_h,
    stride_cache_block,
    stride_cache_slot,
    stride_block_table,
    stride_mid_b,
    stride_mid_h,
    stride_mid_s,
    num_heads,
    num_kv_splits,
    block_size,
    scale,
    L,
    R,
    UPCAST: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_L: tl.constexpr,
    BLOCK_R: tl.constexpr,
):
    heads = tl.program_id(0) * BLOCK_H + tl.arange(0, BLOCK_H)
    req = tl.program_id(1).to(tl.int64)
    split = tl.program_id(2)
    mask_h = heads < num_heads
    cols_l = tl.arange(0, BLOCK_L)
    cols_r = tl.arange(0, BLOCK_R)
    mask_l = cols_l < L
    mask_r = cols_r < R

    # This split's share of the sequence: [start, end), possibly empty.
    seq_len = tl.load(seq_lens_ptr + req)
    per_split = tl.cdiv(seq_len, num_kv_splits)
    start = split * per_split
    end = tl.minimum(start + per_split, seq_len)

    q_rows = q_ptr + req * stride_q_b + heads[:, None] * stride_q_h
    q_lat = tl.load(q_rows + cols_l[None, :], mask=mask_h[:, None] & mask_l[None, :], other=0.0)
    q_pe = tl.load(q_rows + L + cols_r[None, :], mask=mask_h[:, None] & mask_r[None, :], other=0.0)
    if UPCAST:  # bf16 on the interpreter: fp32 math
        q_lat = q_lat.to(tl.float32)
        q_pe = q_pe.to(tl.float32)

    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_L], dtype=tl.float32)

    for start_n in range(start, end, BLOCK_N):
        pos = start_n + tl.arange(0, BLOCK_N)  # token positions in the sequence
        mask_n = pos < end
        page = tl.load(
            block_table_ptr + req * stride_block_table + pos // block_size, mask=mask_n, other=0
        ).to(tl.int64)
        rows = cache_ptr + page * stride_cache_block + (pos % block_size) * stride_cache_slot
        kv_c = tl.load(
            rows[:, None] + cols_l[None, :], mask=mask_n[:, None] & mask_l[None, :], other=0.0
        )  # [BLOCK_N, BLOCK_L]: K's latent part, and V
        k_pe = tl.load(
            rows[:, None] + L + cols_r[None, :], mask=mask_n[:, None] & mask_r[None, :], other=0.0
        )
        if UPCAST:
            kv_c = kv_c.to(tl.float32)
            k_pe = k_pe.to(tl.float32)

        s = tl.dot(q_lat, tl.trans(kv_c)) + tl.dot(q_pe, tl.trans(k_pe))  # [BLOCK_H, BLOCK_N]
        s = tl.where(mask_n[None, :], s * scale, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(kv_c.dtype), kv_c)
        m_i = m_new

    # The partial result, normalised, and its LSE; an empty split writes 0 and -inf.
    seen = l_i > 0
    l_safe = tl.where(seen, l_i, 1.0)
    out = acc / l_safe[:, None]
    lse = tl.where(seen, m_i + tl.log(l_safe), float("-inf"))
    mid = req * stride_mid_b + heads * stride_mid_h + split * stride_mid_s
    tl.store(
        mid_out_ptr + mid[:, None] + cols_l[None, :], out, mask=mask_h[:, None] & mask_l[None, :]
    )
    tl.store(mid_lse_ptr + (req * num_heads + heads) * num_kv_splits + split, lse, mask=mask_h)


# %% Stage 2 (Triton): merge the splits of one (request, head)
@triton.jit
def mla_decode_stage2_kernel(
    mid_out_ptr,
    mid_lse_ptr,
    out_ptr,
    lse_ptr,
    stride_mid_b,
    stride_mid_h,
    stride_mid_s,
    stride_o_b,
    stride_o_h,
    num_heads,
    num_kv_splits,
    L,
    BLOCK_L: tl.constexpr,
):
    req = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    cols = tl.arange(0, BLOCK_L)
    mask_l = cols < L
    base = req * stride_mid_b + head * stride_mid_h  # mid_out[req, head, :, :]
    lse_base = (req * num_heads + head) * num_kv_splits  # mid_lse[req, head, :], contiguous

    m = float("-inf")
    total = 0.0
    acc = tl.zeros([BLOCK_L], dtype=tl.float32)
    for split in range(0, num_kv_splits):
        lse_s = tl.load(mid_lse_ptr + lse_base + split)
        out_s = tl.load(mid_out_ptr + base + split * stride_mid_s + cols, mask=mask_l, other=0.0)
        m_new = tl.maximum(m, lse_s)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m - m_safe)
        w = tl.exp(lse_s - m_safe)  # 0 for an empty split
        acc = acc * alpha + w * out_s  # out_s is a normalised partial
        total = total * alpha + w
        m = m_new

    seen = total > 0  # False: every split was empty
    total_safe = tl.where(seen, total, 1.0)
    tl.store(
        out_ptr + req * stride_o_b + head * stride_o_h + cols,
        (acc / total_safe).to(out_ptr.dtype.element_ty),
        mask=mask_l,
    )
    tl.store(
        lse_ptr + req * num_heads + head, tl.where(seen, m + tl.log(total_safe), float("-inf"))
    )


def mla_decode_config(L: int, R: int, elem_bytes: int = 2) -> dict:
    """Tiles chosen in plain Python, one config for every device (no autotuning). In fp32
    the KV tile is halved to 16 rows: two pipelined stages of 32 x 576 fp32 rows overflow
    an A100's shared memory."""
    block_n = BLOCK_N if elem_bytes <= 2 else BLOCK_N // 2
    return {
        "stage1": {
            "BLOCK_H": BLOCK_H,
            "BLOCK_N": block_n,
            "BLOCK_L": block(L),
            "BLOCK_R": block(R),
            "num_warps": 4,
            "num_stages": 2,
        },
        "stage2": {"BLOCK_L": block(L, minimum=1), "num_warps": 4},
    }


def mla_decode_triton(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    num_kv_splits: int = DEFAULT_NUM_KV_SPLITS,
    kv_lora_rank: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    checks.mla_decode(q, kv_cache, block_table, seq_lens)
    L = _check_decode(q, kv_cache, block_table, seq_lens, num_kv_splits, kv_lora_rank)
    B, H, D = q.shape
    R = D - L
    if kv_cache.stride(2) != 1:
        fail("kv_cache", f"strides {kv_cache.stride()}", "contiguous rows (stride 1 last)")
    q = q if q.stride(-1) == 1 else q.contiguous()
    block_table = block_table.contiguous()
    up = upcast(q.dtype)
    guard_interpreter_dtype(q.dtype, up)
    out = out_buffer((B, H, L), q.dtype, q.device, up)
    lse = torch.empty((B, H), dtype=torch.float32, device=q.device)
    if B == 0 or H == 0:
        return out.to(q.dtype), lse
    mid_out = torch.empty((B, H, num_kv_splits, L), dtype=torch.float32, device=q.device)
    mid_lse = torch.empty((B, H, num_kv_splits), dtype=torch.float32, device=q.device)
    cfg = mla_decode_config(L, R, q.element_size())
    c1 = cfg["stage1"]
    check_launchable(mla_decode_stage1_kernel)
    mla_decode_stage1_kernel[(triton.cdiv(H, c1["BLOCK_H"]), B, num_kv_splits)](
        q,
        kv_cache,
        block_table,
        seq_lens,
        mid_out,
        mid_lse,
        q.stride(0),
        q.stride(1),
        kv_cache.stride(0),
        kv_cache.stride(1),
        block_table.stride(0),
        mid_out.stride(0),
        mid_out.stride(1),
        mid_out.stride(2),
        H,
        num_kv_splits,
        kv_cache.shape[1],
        float(scale),
        L,
        R,
        UPCAST=up,
        **c1,
    )
    mla_decode_stage2_kernel[(B, H)](
        mid_out,
        mid_lse,
        out,
        lse,
        mid_out.stride(0),
        mid_out.stride(1),
        mid_out.stride(2),
        out.stride(0),
        out.stride(1),
        H,
        num_kv_splits,
        L,
        **cfg["stage2"],
    )
    return out.to(q.dtype), lse


# %% torch twin
def mla_decode_torch(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    num_kv_splits: int = DEFAULT_NUM_KV_SPLITS,
    kv_lora_rank: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same two stages in torch: per request and split, walk the split's tokens
    ``BLOCK_N`` at a time through the block table, folding each tile into the split's
    partial result; then fold the splits together. Every fold is ``merge_attn_states``."""
    checks.mla_decode(q, kv_cache, block_table, seq_lens)
    L = _check_decode(q, kv_cache, block_table, seq_lens, num_kv_splits, kv_lora_rank)
    B, H, _ = q.shape
    block_size = kv_cache.shape[1]
    out = torch.zeros((B, H, L), dtype=torch.float32, device=q.device)
    lse = torch.full((B, H), float("-inf"), dtype=torch.float32, device=q.device)
    for b, seq_len in enumerate(seq_lens.tolist()):
        per_split = -(-seq_len // num_kv_splits)
        q_b = q[b][None]  # [1, H, L + R]: one query token
        o_b, l_b = out[b][None], lse[b][None]
        for split in range(num_kv_splits):  # stage 1, one split at a time
            start, end = split * per_split, min((split + 1) * per_split, seq_len)
            o_s, l_s = torch.zeros_like(o_b), torch.full_like(l_b, float("-inf"))
            for tile in range(start, end, BLOCK_N):
                pos = torch.arange(tile, min(tile + BLOCK_N, end), device=q.device)
                page = block_table[b, pos // block_size].long()
                rows = kv_cache[page, pos % block_size][:, None, :]  # [n, 1, L + R]: MQA
                o_t, l_t = partial_attention(q_b, rows, rows[..., :L], scale)
                o_s, l_s = merge_attn_states_torch(o_s, l_s, o_t, l_t)
            o_b, l_b = merge_attn_states_torch(o_b, l_b, o_s, l_s)  # stage 2
        out[b], lse[b] = o_b[0], l_b[0]
    return out.to(q.dtype), lse


def mla_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    num_kv_splits: int = DEFAULT_NUM_KV_SPLITS,
    *,
    kv_lora_rank: int | None = None,
    backend: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Absorbed MLA attention of one query token per request over the paged latent cache.

    ``q[B, H, L + R]`` (``[q_nope @ W_UK | q_pe]``), ``kv_cache[num_blocks, block_size, L + R]``
    of q's dtype, ``block_table`` int32 ``[B, max_blocks]``, ``seq_lens`` int32 ``[B]`` (tokens
    in the cache, this step's included), ``scale = qk_head_dim ** -0.5 * mscale ** 2``.
    ``kv_lora_rank`` is ``L``; by default the largest power of two below ``L + R`` (512 of
    576, 64 of the tiny model's 80, as in every preset); pass it when that does not hold.
    Returns the latent ``out[B, H, L]`` in q's dtype and fp32 ``lse[B, H]``.
    """
    if _backend.resolve(backend) == "triton":
        return mla_decode_triton(
            q, kv_cache, block_table, seq_lens, scale, num_kv_splits, kv_lora_rank
        )
    return mla_decode_torch(q, kv_cache, block_table, seq_lens, scale, num_kv_splits, kv_lora_rank)


def _check_decode(q, kv_cache, block_table, seq_lens, num_kv_splits, kv_lora_rank) -> int:
    check_tensor("q", q, 3, FLOAT_DTYPES)
    check_tensor("kv_cache", kv_cache, 3)
    check_tensor("block_table", block_table, 2, (torch.int32,))
    check_tensor("seq_lens", seq_lens, 1, (torch.int32,))
    B, _, D = q.shape
    check_dim("kv_cache", kv_cache, 2, D, "row width L + R = q's width")
    if kv_cache.dtype != q.dtype:
        fail("kv_cache", str(kv_cache.dtype), f"dtype {q.dtype} (q's)")
    check_dim("block_table", block_table, 0, B, "one row per request of q")
    check_dim("seq_lens", seq_lens, 0, B, "one length per request of q")
    if isinstance(num_kv_splits, bool) or not isinstance(num_kv_splits, int) or num_kv_splits < 1:
        fail("num_kv_splits", repr(num_kv_splits), "an int >= 1")
    if kv_lora_rank is None:
        kv_lora_rank = 1 << ((D - 1).bit_length() - 1) if D > 1 else 0
    if (
        isinstance(kv_lora_rank, bool)
        or not isinstance(kv_lora_rank, int)
        or not 0 < kv_lora_rank < D
    ):
        fail("kv_lora_rank", repr(kv_lora_rank), f"an int in [1, {D - 1}] (L of L + R = {D})")
    check_same_device(q=q, kv_cache=kv_cache, block_table=block_table, seq_lens=seq_lens)
    return kv_lora_rank
