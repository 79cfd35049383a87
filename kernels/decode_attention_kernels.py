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
Stage 1, grid ``(cdiv(H, BLOCK_H), num_reqs, S)``: one program owns ``BLOCK_H`` heads of one
request and one split (its queries too, with more than one: see the last section). Head
groups come first in the launch order, so programs reading the same rows run side by side
and share them through L2. The cache tile goes on the M side of both products, the heads on
the N side::

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
online-softmax update, in fp32 (for each of the request's queries, in order).

``1 + K`` queries per request (``VARLEN``, speculative decoding)
----------------------------------------------------------------
A row verifying ``K`` drafts has ``q_len = 1 + K`` query tokens (``query_start_loc``), and
its query ``j`` sees keys ``< seq_len - q_len + j + 1``. The program's N side then holds
``BLOCK_Q`` queries of ``BLOCK_H`` heads, query-major (``BLOCK_Q * BLOCK_H = 16`` rows: 8
heads of 2 queries, 4 heads of up to 4), so every cached tile it loads serves all of its
queries, as FlashMLA packs its ``s_q * h_q`` rows; grid dimension 0 runs over head groups,
then blocks of ``BLOCK_Q`` queries (a request with more queries takes more programs).
vLLM 0.33.0's Triton MLA instead repeats the block table once per query row and gives each
row its own key count (``TritonMLAImpl.forward_mqa``), reading the rows once per query.

The keys every query of the block sees (``< kv_all``) go through the loop above unchanged,
with no causal mask. The remaining keys, fewer than ``BLOCK_Q``, which only the later
queries see, are one ``BLOCK_T``-row tail tile with a per-(key, query) mask on the scores.
Their values are read through ``where(finite, v, 0)``: a masked score's weight is exactly 0,
but in a product shared by several queries ``0 * NaN`` would still carry one query's garbage
into another's output. (A query that does see a NaN key gets a NaN score, and so a NaN
result, as the reference does.)

Registers are the constraint (``pdlab doctor --aot`` reads them from the cubin; at
DeepSeek's widths, for sm_80 and sm_90, fp16 and bf16, under triton 3.8 and 3.9). What keeps
every build spill-free:

- two warp groups on sm_90 for the block's rows (one spills);
- the row indices and the query reloaded after the loop, not kept alive across it;
- the tail's scores summed over ``BLOCK_K``-column slices of the latent width. Sixteen rows
  are too few for wgmma (64), so that product is mma.sync's, whose operands sit in
  registers: all 512 columns at once took 250 to 255 registers on sm_90, and under triton
  3.8 the fp16 build with 2 queries and 2 splits spilled;
- the cache's slot stride a constexpr, so that a tile's row offsets are constants. Triton
  3.8 folds them into the copies' addresses instead of holding one 64-bit register per row
  a thread copies across the loop; triton 3.9 computes a thread's rows from its index with
  bit operations and folds fewer of them.

Measured: at most 194 registers on sm_80 under both, 168 on sm_90 under 3.8 and 224 under
3.9 (had been 247, 255 with 2 spills, and 255).
"""

from __future__ import annotations

from pdlab.kernels.common import tl, triton


@triton.jit
def _query_rows(query_start_loc_ptr, req, num_heads, num_head_groups, BLOCK_Q, BLOCK_H):
    """A program's ``BLOCK_Q * BLOCK_H`` rows, query-major: each row's token (row of q),
    head and validity; the request's query count and the block's first query."""
    rows = tl.arange(0, BLOCK_Q * BLOCK_H)
    heads = (tl.program_id(0) % num_head_groups) * BLOCK_H + rows % BLOCK_H
    q_start = tl.load(query_start_loc_ptr + req)
    q_len = tl.load(query_start_loc_ptr + req + 1) - q_start
    first_q = (tl.program_id(0) // num_head_groups) * BLOCK_Q
    j = first_q + rows // BLOCK_H  # each row's query index within its request
    return q_start + j, heads, (heads < num_heads) & (j < q_len), q_len, first_q


@triton.jit
def _split_range(seq_lens_ptr, req, split, num_kv_splits, BLOCK_N):
    """The request's length, how many splits it uses, and this split's keys [start, end):
    whole tiles of ``cdiv(cdiv(seq_len, S), BLOCK_N) * BLOCK_N`` tokens."""
    seq_len = tl.load(seq_lens_ptr + req)
    per_split = tl.maximum(tl.cdiv(tl.cdiv(seq_len, num_kv_splits), BLOCK_N), 1) * BLOCK_N
    start = split * per_split
    return seq_len, tl.cdiv(seq_len, per_split), start, tl.minimum(start + per_split, seq_len)


# %% Stage 1 (Triton): one split of one request, for a group of heads (and of queries)
@triton.jit
def mla_decode_stage1_kernel(
    q_ptr, cache_ptr, block_table_ptr, seq_lens_ptr, query_start_loc_ptr,
    out_ptr, lse_ptr, mid_out_ptr, mid_lse_ptr,
    stride_q_b, stride_q_h, stride_cache_block, stride_cache_slot: tl.constexpr, stride_block_table,
    stride_o_b, stride_o_h, stride_mid_b, stride_mid_h, stride_mid_s,
    num_heads, num_head_groups, num_kv_splits, scale,
    L: tl.constexpr, R: tl.constexpr, UPCAST: tl.constexpr,
    PAGE_SIZE: tl.constexpr, VARLEN: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_K: tl.constexpr,
    BLOCK_L: tl.constexpr, BLOCK_R: tl.constexpr, NUM_STAGES: tl.constexpr,
):  # fmt: skip
    req = tl.program_id(1).to(tl.int64)
    split = tl.program_id(2)
    # This split's tokens [start, end): whole tiles; a request that fits one split is final.
    seq_len, used_splits, start, end = _split_range(
        seq_lens_ptr, req, split, num_kv_splits, BLOCK_N
    )
    if split >= tl.maximum(used_splits, 1):
        return
    # The program's rows: BLOCK_Q queries x BLOCK_H heads, query-major.
    if VARLEN:  # request req owns query rows [q_start, q_start + q_len) of q
        token, heads, mask_row, q_len, first_q = _query_rows(
            query_start_loc_ptr, req, num_heads, num_head_groups, BLOCK_Q, BLOCK_H
        )
        if first_q >= q_len:  # a shorter request than the longest: no queries in this block
            return
        kv_all = seq_len - q_len + first_q + 1  # keys every query of the block sees
    else:  # one query per request: row = head
        heads = tl.program_id(0) * BLOCK_H + tl.arange(0, BLOCK_H)
        mask_row = heads < num_heads
        token = req
        kv_all = seq_len

    main_end = tl.minimum(end, kv_all)  # the keys before it need no causal mask

    cols_l = tl.arange(0, BLOCK_L)
    cols_r = tl.arange(0, BLOCK_R)
    mask_l = cols_l < L
    mask_r = cols_r < R
    # The query, transposed: [L, rows] and [R, rows], the N side of both products.
    q_cols = q_ptr + (token * stride_q_b + heads * stride_q_h)[None, :]
    q_lat = tl.load(q_cols + cols_l[:, None], mask=mask_l[:, None] & mask_row[None, :], other=0.0)
    q_pe = tl.load(
        q_cols + L + cols_r[:, None], mask=mask_r[:, None] & mask_row[None, :], other=0.0
    )
    if UPCAST:  # bf16 on the interpreter: fp32 math
        q_lat = q_lat.to(tl.float32)
        q_pe = q_pe.to(tl.float32)
    qk_scale = scale * 1.4426950408889634  # log2(e): exp2 below

    m_i = tl.full([BLOCK_Q * BLOCK_H], float("-inf"), dtype=tl.float32)  # running max, base 2
    l_i = tl.zeros([BLOCK_Q * BLOCK_H], dtype=tl.float32)  # running sum of exp2
    acc = tl.zeros([BLOCK_L, BLOCK_Q * BLOCK_H], dtype=tl.float32)  # out^T, unnormalised

    tile_rows = tl.arange(0, BLOCK_N)
    # A page-aligned tile: rows in one page. The slot stride is a constexpr, so these offsets
    # are constants, which can fold into each copy's address (see the module docstring).
    tile_offs = tile_rows[:, None] * stride_cache_slot
    for start_n in tl.range(start, main_end, BLOCK_N, num_stages=NUM_STAGES):
        pos = start_n + tile_rows  # token positions in the sequence
        mask_n = pos < main_end
        if PAGE_SIZE % BLOCK_N == 0:  # the tile lies in one page: one block-table entry
            page = tl.load(block_table_ptr + req * stride_block_table + start_n // PAGE_SIZE)
            base = cache_ptr + page.to(tl.int64) * stride_cache_block
            rows_ptr = base + (start_n % PAGE_SIZE) * stride_cache_slot + tile_offs
        else:  # the tile spans pages (or parts of them): one entry per token
            page = tl.load(
                block_table_ptr + req * stride_block_table + pos // PAGE_SIZE, mask=mask_n, other=0
            ).to(tl.int64)
            rows_ptr = (
                cache_ptr
                + (page * stride_cache_block + (pos % PAGE_SIZE) * stride_cache_slot)[:, None]
            )
        kv_c = tl.load(
            rows_ptr + cols_l[None, :], mask=mask_n[:, None] & mask_l[None, :], other=0.0
        )  # [BLOCK_N, BLOCK_L]: K's latent part, and V
        k_pe = tl.load(
            rows_ptr + L + cols_r[None, :], mask=mask_n[:, None] & mask_r[None, :], other=0.0
        )
        if UPCAST:
            kv_c = kv_c.to(tl.float32)
            k_pe = k_pe.to(tl.float32)

        s = tl.dot(kv_c, q_lat) + tl.dot(k_pe, q_pe)  # s^T [BLOCK_N, rows]
        s = tl.where(mask_n[:, None], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        # A head that has seen no token yet keeps m = -inf; subtract 0 instead (no inf - inf).
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[None, :])
        l_i = l_i * alpha + tl.sum(p, axis=0)
        acc = acc * alpha[None, :] + tl.dot(tl.trans(kv_c), p.to(kv_c.dtype))
        m_i = m_new

    if VARLEN:  # the causal tail: keys [kv_all, last_limit) that only later queries see
        # The rows and the range again, from fresh loads: values kept alive across the main
        # loop would spill (measured with pdlab doctor --aot); recomputing costs a few ops.
        token, heads, mask_row, q_len, first_q = _query_rows(
            query_start_loc_ptr, req, num_heads, num_head_groups, BLOCK_Q, BLOCK_H
        )
        seq_len, used_splits, start, end = _split_range(
            seq_lens_ptr, req, split, num_kv_splits, BLOCK_N
        )
        tail_start = tl.maximum(start, seq_len - q_len + first_q + 1)
        tail_end = tl.minimum(end, seq_len - q_len + tl.minimum(first_q + BLOCK_Q, q_len))
        if tail_start < tail_end:
            q_cols = q_ptr + (token * stride_q_b + heads * stride_q_h)[None, :]
            pos = tail_start + tl.arange(0, BLOCK_T)
            mask_t = pos < tail_end
            page = tl.load(
                block_table_ptr + req * stride_block_table + pos // PAGE_SIZE, mask=mask_t, other=0
            ).to(tl.int64)
            rows_ptr = (
                cache_ptr
                + (page * stride_cache_block + (pos % PAGE_SIZE) * stride_cache_slot)[:, None]
            )
            # The scores, over BLOCK_K-column slices of the latent width: a product of so
            # few rows is mma.sync's (wgmma wants 64), whose operands live in registers, and
            # all L columns of both at once spilled under triton 3.8. q from L2 again.
            s = tl.zeros([BLOCK_T, BLOCK_Q * BLOCK_H], dtype=tl.float32)
            for k0 in tl.range(0, BLOCK_L, BLOCK_K):
                cols_k = k0 + tl.arange(0, BLOCK_K)
                mask_k = cols_k < L
                kv_k = tl.load(
                    rows_ptr + cols_k[None, :], mask=mask_t[:, None] & mask_k[None, :], other=0.0
                )
                q_k = tl.load(
                    q_cols + cols_k[:, None], mask=mask_k[:, None] & mask_row[None, :], other=0.0
                )
                if UPCAST:
                    kv_k = kv_k.to(tl.float32)
                    q_k = q_k.to(tl.float32)
                s = tl.dot(kv_k, q_k, s)
            k_pe = tl.load(
                rows_ptr + L + cols_r[None, :], mask=mask_t[:, None] & mask_r[None, :], other=0.0
            )
            q_pe = tl.load(
                q_cols + L + cols_r[:, None], mask=mask_r[:, None] & mask_row[None, :], other=0.0
            )
            if UPCAST:
                k_pe = k_pe.to(tl.float32)
                q_pe = q_pe.to(tl.float32)
            s = tl.dot(k_pe, q_pe, s)  # [BLOCK_T, rows]
            limit = seq_len - q_len + first_q + tl.arange(0, BLOCK_Q * BLOCK_H) // BLOCK_H + 1
            sees = mask_t[:, None] & (pos[:, None] < limit[None, :])  # query j: < limit_j
            s = tl.where(sees, s * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=0))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp2(m_i - m_safe)
            p = tl.exp2(s - m_safe[None, :])  # exactly 0 where a query may not see the key
            l_i = l_i * alpha + tl.sum(p, axis=0)
            # The values: the tile's latent rows whole, read again (from L1). A key some
            # query may not see is still a value others read, so its garbage (NaN, inf)
            # would reach that query as 0 * NaN: values go in finite.
            kv_c = tl.load(
                rows_ptr + cols_l[None, :], mask=mask_t[:, None] & mask_l[None, :], other=0.0
            )
            if UPCAST:
                kv_c = kv_c.to(tl.float32)
            v = tl.where(tl.abs(kv_c) < float("inf"), kv_c, 0.0)
            acc = acc * alpha[None, :] + tl.dot(tl.trans(v), p.to(v.dtype))
            m_i = m_new

    # The split's result, normalised, and its natural-log LSE; nothing seen gives 0, -inf.
    seen = l_i > 0
    l_safe = tl.where(seen, l_i, 1.0)
    out = acc / l_safe[None, :]
    lse = tl.where(seen, (m_i + tl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
    mask_out = mask_l[:, None] & mask_row[None, :]
    if used_splits <= 1:  # not split: this is the final result, stage 2 skips the request
        o = out_ptr + (token * stride_o_b + heads * stride_o_h)[None, :] + cols_l[:, None]
        tl.store(o, out.to(out_ptr.dtype.element_ty), mask=mask_out)
        tl.store(lse_ptr + token * num_heads + heads, lse, mask=mask_row)
    else:
        mid = token * stride_mid_b + heads * stride_mid_h + split * stride_mid_s
        tl.store(mid_out_ptr + mid[None, :] + cols_l[:, None], out, mask=mask_out)
        tl.store(
            mid_lse_ptr + (token * num_heads + heads) * num_kv_splits + split, lse, mask=mask_row
        )


# %% Stage 2 (Triton): merge the splits of one (request, head), for each of its queries
@triton.jit
def mla_decode_stage2_kernel(
    mid_out_ptr, mid_lse_ptr, seq_lens_ptr, query_start_loc_ptr, out_ptr, lse_ptr,
    stride_mid_b, stride_mid_h, stride_mid_s, stride_o_b, stride_o_h,
    num_heads, num_kv_splits, L,
    VARLEN: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_L: tl.constexpr,
):  # fmt: skip
    req = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    seq_len = tl.load(seq_lens_ptr + req)
    per_split = tl.maximum(tl.cdiv(tl.cdiv(seq_len, num_kv_splits), BLOCK_N), 1) * BLOCK_N
    used_splits = tl.cdiv(seq_len, per_split)
    if used_splits <= 1:  # stage 1 wrote this request's result already
        return
    if VARLEN:
        first = tl.load(query_start_loc_ptr + req).to(tl.int64)
        last = tl.load(query_start_loc_ptr + req + 1).to(tl.int64)
    else:
        first = req
        last = req + 1
    cols = tl.arange(0, BLOCK_L)
    mask_l = cols < L
    for token in range(first, last):
        base = token * stride_mid_b + head * stride_mid_h  # mid_out[token, head, :, :]
        lse_base = (token * num_heads + head) * num_kv_splits  # mid_lse[token, head, :]
        m = float("-inf")
        total = 0.0
        acc = tl.zeros([BLOCK_L], dtype=tl.float32)
        # Split 0 holds key 0, which every query sees: m is finite after it, and a later
        # split a query saw nothing of (lse = -inf) weighs exp(-inf) = 0.
        for split in range(0, used_splits):
            lse_s = tl.load(mid_lse_ptr + lse_base + split)
            out_s = tl.load(
                mid_out_ptr + base + split * stride_mid_s + cols, mask=mask_l, other=0.0
            )
            m_new = tl.maximum(m, lse_s)
            alpha = tl.exp(m - m_new)
            w = tl.exp(lse_s - m_new)
            acc = acc * alpha + w * out_s  # out_s is a normalised partial
            total = total * alpha + w
            m = m_new
        tl.store(
            out_ptr + token * stride_o_b + head * stride_o_h + cols,
            (acc / total).to(out_ptr.dtype.element_ty),
            mask=mask_l,
        )
        tl.store(lse_ptr + token * num_heads + head, m + tl.log(total))
