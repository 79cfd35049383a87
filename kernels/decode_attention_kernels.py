"""The Triton kernels of ``mla_decode``: stage 1 attends one split of one request's cached
rows for a group of heads, stage 2 merges the splits.

Mirrors ``_fwd_grouped_kernel_stage1`` and ``_fwd_kernel_stage2`` in vLLM's
``vllm/v1/attention/ops/triton_decode_attention.py``. ``mla_decode_triton`` in
``decode_attention.py`` launches them: it chooses the tiles (``mla_decode_config``) and the
split count (``num_kv_splits_auto``), and explains why there are two stages.

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
maps it through ``W_UV``. The kernel works in base 2: ``exp(x) = exp2(x * log2(e))``, so
``log2(e)`` is folded into the scale once and each exponential is one ``ex2`` instruction.


The tiling ("swap-AB")
----------------------
Stage 1, grid ``(cdiv(H, BLOCK_H), num_reqs, S)``: one program owns ``BLOCK_H`` heads of
one request and one split. Head groups come first in the launch order, so programs reading
the same rows run side by side and share them through L2. The cache tile goes on the M
side of both products, the heads on the N side::

      s^T [BLOCK_N, BLOCK_H]  = kv_c [BLOCK_N, L] @ q_lat^T [L, BLOCK_H]  + k_pe @ q_pe^T
    acc^T [L,       BLOCK_H] += kv_c^T [L, BLOCK_N] @ p^T [BLOCK_N, BLOCK_H]

             q_lat^T (L x 16, loaded once)
    kv_c  -> +----------------------+
    64 rows  | s^T: 64 tokens x 16  |   softmax down each column (one head)
    of L     +----------------------+

Hopper's warp-group MMA (``wgmma``) needs 64 rows on M: 64 tokens fill it, where 16 heads
(the old layout, ``q @ kv_c^T``) forced Ampere's ``mma.sync``. ``BLOCK_N`` tokens are a
whole number of pages or a part of one (the page size is a compile-time constant,
``PAGE_SIZE``, so ``pos // PAGE_SIZE`` is a shift); each token's page comes from the block
table, cast to int64 before the stride multiply. The loop is ``tl.range(...,
num_stages=NUM_STAGES)``: the copy of the next tiles (``cp.async``) is issued while the
current one is multiplied. The latent tile that served as K is reused as V: one read of a
row feeds both products. The row width 576 is handled as its two natural parts, latent
``L`` (512) and rope ``R`` (64), each a power-of-two tile (padded and masked otherwise).

Stage 2, grid ``(num_reqs, H)``: one program folds its request's splits together with the
online-softmax update, in fp32.
"""

from __future__ import annotations

from pdlab.kernels.common import tl, triton


# %% Stage 1 (Triton): one split of one request, for a group of heads
@triton.jit
def mla_decode_stage1_kernel(
    q_ptr,
    cache_ptr,
    block_table_ptr,
    seq_lens_ptr,
    out_ptr,
    lse_ptr,
    mid_out_ptr,
    mid_lse_ptr,
    stride_q_b,
    stride_q_h,
    stride_cache_block,
    stride_cache_slot,
    stride_block_table,
    stride_o_b,
    stride_o_h,
    stride_mid_b,
    stride_mid_h,
    stride_mid_s,
    num_heads,
    num_kv_splits,
    scale,
    L: tl.constexpr,
    R: tl.constexpr,
    UPCAST: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_L: tl.constexpr,
    BLOCK_R: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    heads = tl.program_id(0) * BLOCK_H + tl.arange(0, BLOCK_H)
    req = tl.program_id(1).to(tl.int64)
    split = tl.program_id(2)

    # This split's tokens [start, end): whole tiles; a request that fits one split is final.
    seq_len = tl.load(seq_lens_ptr + req)
    per_split = tl.maximum(tl.cdiv(tl.cdiv(seq_len, num_kv_splits), BLOCK_N), 1) * BLOCK_N
    used_splits = tl.cdiv(seq_len, per_split)
    if split >= tl.maximum(used_splits, 1):
        return
    start = split * per_split
    end = tl.minimum(start + per_split, seq_len)

    mask_h = heads < num_heads
    cols_l = tl.arange(0, BLOCK_L)
    cols_r = tl.arange(0, BLOCK_R)
    mask_l = cols_l < L
    mask_r = cols_r < R
    # The query, transposed: [L, BLOCK_H] and [R, BLOCK_H], the N side of both products.
    q_cols = q_ptr + req * stride_q_b + heads[None, :] * stride_q_h
    q_lat = tl.load(q_cols + cols_l[:, None], mask=mask_l[:, None] & mask_h[None, :], other=0.0)
    q_pe = tl.load(q_cols + L + cols_r[:, None], mask=mask_r[:, None] & mask_h[None, :], other=0.0)
    if UPCAST:  # bf16 on the interpreter: fp32 math
        q_lat = q_lat.to(tl.float32)
        q_pe = q_pe.to(tl.float32)
    qk_scale = scale * 1.4426950408889634  # log2(e): exp2 below

    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)  # running max, base 2
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)  # running sum of exp2
    acc = tl.zeros([BLOCK_L, BLOCK_H], dtype=tl.float32)  # out^T, unnormalised

    tile_rows = tl.arange(0, BLOCK_N)
    tile_offs = tile_rows[:, None] * stride_cache_slot  # a page-aligned tile: rows in one page
    for start_n in tl.range(start, end, BLOCK_N, num_stages=NUM_STAGES):
        pos = start_n + tile_rows  # token positions in the sequence
        mask_n = pos < end
        if PAGE_SIZE % BLOCK_N == 0:  # the tile lies in one page: one block-table entry
            page = tl.load(block_table_ptr + req * stride_block_table + start_n // PAGE_SIZE)
            base = cache_ptr + page.to(tl.int64) * stride_cache_block
            rows = base + (start_n % PAGE_SIZE) * stride_cache_slot + tile_offs
        else:  # the tile spans pages (or parts of them): one entry per token
            page = tl.load(
                block_table_ptr + req * stride_block_table + pos // PAGE_SIZE, mask=mask_n, other=0
            ).to(tl.int64)
            rows = (
                cache_ptr
                + (page * stride_cache_block + (pos % PAGE_SIZE) * stride_cache_slot)[:, None]
            )
        kv_c = tl.load(
            rows + cols_l[None, :], mask=mask_n[:, None] & mask_l[None, :], other=0.0
        )  # [BLOCK_N, BLOCK_L]: K's latent part, and V
        k_pe = tl.load(
            rows + L + cols_r[None, :], mask=mask_n[:, None] & mask_r[None, :], other=0.0
        )
        if UPCAST:
            kv_c = kv_c.to(tl.float32)
            k_pe = k_pe.to(tl.float32)

        s = tl.dot(kv_c, q_lat) + tl.dot(k_pe, q_pe)  # s^T [BLOCK_N, BLOCK_H]
        s = tl.where(mask_n[:, None], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        # A head that has seen no token yet keeps m = -inf; subtract 0 instead (no inf - inf).
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[None, :])
        l_i = l_i * alpha + tl.sum(p, axis=0)
        acc = acc * alpha[None, :] + tl.dot(tl.trans(kv_c), p.to(kv_c.dtype))
        m_i = m_new

    # The split's result, normalised, and its natural-log LSE; nothing seen gives 0, -inf.
    seen = l_i > 0
    l_safe = tl.where(seen, l_i, 1.0)
    out = acc / l_safe[None, :]
    lse = tl.where(seen, (m_i + tl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
    mask_out = mask_l[:, None] & mask_h[None, :]
    if used_splits <= 1:  # not split: this is the final result, stage 2 skips the request
        o = out_ptr + req * stride_o_b + heads[None, :] * stride_o_h + cols_l[:, None]
        tl.store(o, out.to(out_ptr.dtype.element_ty), mask=mask_out)
        tl.store(lse_ptr + req * num_heads + heads, lse, mask=mask_h)
    else:
        mid = req * stride_mid_b + heads * stride_mid_h + split * stride_mid_s
        tl.store(mid_out_ptr + mid[None, :] + cols_l[:, None], out, mask=mask_out)
        tl.store(mid_lse_ptr + (req * num_heads + heads) * num_kv_splits + split, lse, mask=mask_h)


# %% Stage 2 (Triton): merge the splits of one (request, head)
@triton.jit
def mla_decode_stage2_kernel(
    mid_out_ptr,
    mid_lse_ptr,
    seq_lens_ptr,
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
    BLOCK_N: tl.constexpr,
    BLOCK_L: tl.constexpr,
):
    req = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    seq_len = tl.load(seq_lens_ptr + req)
    per_split = tl.maximum(tl.cdiv(tl.cdiv(seq_len, num_kv_splits), BLOCK_N), 1) * BLOCK_N
    used_splits = tl.cdiv(seq_len, per_split)
    if used_splits <= 1:  # stage 1 wrote this request's result already
        return
    cols = tl.arange(0, BLOCK_L)
    mask_l = cols < L
    base = req * stride_mid_b + head * stride_mid_h  # mid_out[req, head, :, :]
    lse_base = (req * num_heads + head) * num_kv_splits  # mid_lse[req, head, :], contiguous

    m = float("-inf")
    total = 0.0
    acc = tl.zeros([BLOCK_L], dtype=tl.float32)
    for split in range(0, used_splits):  # every used split saw at least one token
        lse_s = tl.load(mid_lse_ptr + lse_base + split)
        out_s = tl.load(mid_out_ptr + base + split * stride_mid_s + cols, mask=mask_l, other=0.0)
        m_new = tl.maximum(m, lse_s)
        alpha = tl.exp(m - m_new)
        w = tl.exp(lse_s - m_new)
        acc = acc * alpha + w * out_s  # out_s is a normalised partial
        total = total * alpha + w
        m = m_new
    tl.store(
        out_ptr + req * stride_o_b + head * stride_o_h + cols,
        (acc / total).to(out_ptr.dtype.element_ty),
        mask=mask_l,
    )
    tl.store(lse_ptr + req * num_heads + head, m + tl.log(total))
