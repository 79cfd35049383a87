r"""The Triton kernel of ``flash_attn_varlen``: FlashAttention-2 over packed sequences.

``flash_attn_varlen_kernel`` (one program per query tile, sequence and head) walks its
key/value tiles with ``_attend_tiles``: first the tiles every query sees whole, without a
mask, then the band across the causal diagonal. Its role is that of the CUDA kernel behind
``flash_attn_varlen_func`` (``vllm_flash_attn``), which vLLM's MLA prefill calls (vLLM's
own Triton kernel of this kind is in ``vllm/v1/attention/ops/triton_prefill_attention.py``);
its form follows Triton's tutorial ``06-fused-attention.py``. ``flash_attn_varlen_triton`` in
``flash_attn.py`` chooses the tiles (``flash_attn_varlen_config``) and launches it.

The math
--------
Sequences are packed: sequence ``i`` owns query rows ``[cu_seqlens_q[i], cu_seqlens_q[i+1])``
and key rows ``[cu_seqlens_k[i], cu_seqlens_k[i+1])``. For one query ``q`` and its keys,
``s_j = scale * q . k_j``, ``out = sum_j exp(s_j - lse) v_j``, ``lse = log sum_j exp(s_j)``.
With ``causal``, query ``i`` of a sequence with ``q_len`` queries and ``k_len`` keys sees
keys ``j < k_len - q_len + i + 1`` (aligned bottom-right: the last query sees every key).
A query that sees no key gets ``out = 0`` and ``lse = -inf``.

Online softmax: the keys are visited in tiles of ``BLOCK_N``. Each query row keeps a
running maximum ``m``, a running sum ``l = sum exp(s_j - m)`` and an unnormalised output
``acc = sum exp(s_j - m) v_j``. A new tile with maximum ``m'`` rescales both by
``exp(m - m')`` before adding its own terms; at the end ``out = acc / l`` and
``lse = m + log(l)``. Nothing of size ``k_len`` is ever stored. The kernel works in base 2
(``exp(x) = exp2(x log2 e)``, ``log2 e`` folded into the scale once), one ``ex2`` each.

The tiling
----------
Grid ``(cdiv(max_seqlen_q, BLOCK_M), num_seqs, num_heads)``: one program owns ``BLOCK_M``
queries of one sequence and one head (128 on Hopper: two warp groups of wgmma's 64 rows;
64 on Ampere). Its query tile, the running ``m`` and ``l`` and ``acc [BLOCK_M, D_V]`` stay
on chip while it walks the key/value tiles of its sequence::

              keys ->  | full tiles: no mask | diagonal band: masked | (not visited)
    queries   tile_m   |#####################|####\                  |
    (BLOCK_M)          |#####################|######\                |

A causal program stops at the last key its last query can see; the tiles every one of its
queries sees entirely are loaded and scored without any mask, and only the band across the
diagonal (and a ragged last tile) pays for the test. QK 192 is not a power of two: rather
than padding it to 256 (a quarter more tensor-core work and K bytes), the product is split
into its 128 and 64 parts, ``s = q[:, :128] k[:, :128]^T + q[:, 128:] k[:, 128:]^T``
(48 = 32 + 16 for the tiny model). ``tl.dot`` needs every dimension >= 16 on a GPU, so
``BLOCK_M`` is at least 16 even for a one-token query. K/V tiles are copied two deep
(``tl.range(..., num_stages=2)``, ``cp.async``) while the current one is multiplied.
"""

from __future__ import annotations

from pdlab.kernels.common import tl, triton


@triton.jit
def _attend_tiles(
    acc, l_i, m_i, q_a, q_b,
    k_base, v_base, stride_k_t, stride_v_t,
    offs_m, k_len, diag, lo, hi, qk_scale,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr, HAS_TAIL: tl.constexpr,
    D_QK: tl.constexpr, D_V: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_A: tl.constexpr,
    BLOCK_B: tl.constexpr, BLOCK_DV: tl.constexpr, NUM_STAGES: tl.constexpr,
):  # fmt: skip
    """Fold the key tiles ``[lo, hi)`` into (acc, l, m). ``MASKED`` tiles check each key
    against ``k_len`` and, if ``CAUSAL``, against the diagonal (query ``i`` sees keys
    ``<= diag + i``); the tiles before the diagonal need neither test."""
    d_a = tl.arange(0, BLOCK_A)
    d_b = BLOCK_A + tl.arange(0, BLOCK_B)
    d_v = tl.arange(0, BLOCK_DV)
    for start_n in tl.range(lo, hi, BLOCK_N, num_stages=NUM_STAGES):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        mask_n = offs_n < k_len
        k_rows = k_base + offs_n.to(tl.int64)[:, None] * stride_k_t
        if MASKED:
            k_a = tl.load(k_rows + d_a[None, :], mask=mask_n[:, None], other=0.0)
        else:  # every key of the tile exists: no predicate on the copy
            k_a = tl.load(k_rows + d_a[None, :])
        if UPCAST:
            k_a = k_a.to(tl.float32)
        s = tl.dot(q_a, tl.trans(k_a))  # the power-of-two part of QK (128 of 192)
        if HAS_TAIL:  # the rest (64 of 192), instead of padding QK to 256
            mask_b = mask_n[:, None] & (d_b < D_QK)[None, :]
            k_b = tl.load(k_rows + d_b[None, :], mask=mask_b, other=0.0)
            if UPCAST:
                k_b = k_b.to(tl.float32)
            s += tl.dot(q_b, tl.trans(k_b))
        s = s * qk_scale  # base 2: log2(e) is in qk_scale
        if MASKED:
            visible = mask_n[None, :]
            if CAUSAL:
                visible = visible & (offs_n[None, :] <= (diag + offs_m)[:, None])
            s = tl.where(visible, s, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        # A row that has seen no key yet keeps m = -inf; subtract 0 instead (no inf - inf).
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)  # rescales what came before
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v_rows = v_base + offs_n.to(tl.int64)[:, None] * stride_v_t + d_v[None, :]
        if MASKED:
            v = tl.load(v_rows, mask=mask_n[:, None] & (d_v < D_V)[None, :], other=0.0)
        else:
            v = tl.load(v_rows, mask=(d_v < D_V)[None, :], other=0.0)
        if UPCAST:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def flash_attn_varlen_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, cu_seqlens_q_ptr, cu_seqlens_k_ptr,
    stride_q_t, stride_q_h, stride_k_t, stride_k_h, stride_v_t, stride_v_h, stride_o_t, stride_o_h,
    num_heads, scale,
    D_QK: tl.constexpr, D_V: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_A: tl.constexpr, BLOCK_B: tl.constexpr,
    BLOCK_DV: tl.constexpr, NUM_STAGES: tl.constexpr,
):  # fmt: skip
    tile_m = tl.program_id(0)
    seq = tl.program_id(1)
    head = tl.program_id(2).to(tl.int64)
    q_begin = tl.load(cu_seqlens_q_ptr + seq)
    q_len = tl.load(cu_seqlens_q_ptr + seq + 1) - q_begin
    k_begin = tl.load(cu_seqlens_k_ptr + seq)
    k_len = tl.load(cu_seqlens_k_ptr + seq + 1) - k_begin
    if tile_m * BLOCK_M >= q_len:  # the grid is sized for the longest
        return
    HAS_TAIL: tl.constexpr = BLOCK_A < D_QK

    offs_m = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)  # query rows of this tile
    mask_m = offs_m < q_len
    q_rows = q_ptr + (q_begin + offs_m).to(tl.int64)[:, None] * stride_q_t + head * stride_q_h
    d_a = tl.arange(0, BLOCK_A)
    q_a = tl.load(q_rows + d_a[None, :], mask=mask_m[:, None], other=0.0)
    d_b = BLOCK_A + tl.arange(0, BLOCK_B)
    q_b = tl.load(q_rows + d_b[None, :], mask=mask_m[:, None] & (d_b < D_QK)[None, :], other=0.0)
    if UPCAST:  # bf16 on the interpreter: fp32 math
        q_a = q_a.to(tl.float32)
        q_b = q_b.to(tl.float32)
    qk_scale = scale * 1.4426950408889634  # log2(e): exp2 in the loop

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # running max, base 2
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running sum of exp2
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)  # running sum of exp2 * v

    # Query i sees keys <= diag + i (bottom-right causal). Tiles wholly before the first
    # row's bound need no mask; the band up to the last row's bound, and a ragged last
    # tile, do.
    diag = k_len - q_len
    if CAUSAL:
        hi = tl.minimum(k_len, tl.maximum(0, diag + (tile_m + 1) * BLOCK_M))
        full = tl.minimum(hi, tl.maximum(0, diag + tile_m * BLOCK_M + 1))
    else:
        hi = k_len
        full = k_len
    full = full // BLOCK_N * BLOCK_N
    k_base = k_ptr + k_begin.to(tl.int64) * stride_k_t + head * stride_k_h
    v_base = v_ptr + k_begin.to(tl.int64) * stride_v_t + head * stride_v_h
    for masked in tl.static_range(2):  # the unmasked tiles, then the diagonal band
        acc, l_i, m_i = _attend_tiles(
            acc, l_i, m_i, q_a, q_b,
            k_base, v_base, stride_k_t, stride_v_t,
            offs_m, k_len, diag,
            full if masked else 0, hi if masked else full, qk_scale,
            masked == 1, CAUSAL, UPCAST, HAS_TAIL,
            D_QK, D_V, BLOCK_N, BLOCK_A, BLOCK_B, BLOCK_DV, NUM_STAGES,
        )  # fmt: skip

    seen = l_i > 0  # False: this query saw no key
    l_safe = tl.where(seen, l_i, 1.0)
    out = acc / l_safe[:, None]
    lse = tl.where(seen, (m_i + tl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
    out_rows = (q_begin + offs_m).to(tl.int64)
    d_v = tl.arange(0, BLOCK_DV)
    tl.store(
        out_ptr + out_rows[:, None] * stride_o_t + head * stride_o_h + d_v[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=mask_m[:, None] & (d_v < D_V)[None, :],
    )
    tl.store(lse_ptr + out_rows * num_heads + head, lse, mask=mask_m)
