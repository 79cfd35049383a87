r"""Variable-length FlashAttention: ``flash_attn_varlen``, the prefill path's attention.

Mirrors the call vLLM's MLA prefill makes to ``flash_attn_varlen_func`` (``vllm_flash_attn``,
with ``return_softmax_lse=True``) in ``_forward_prefill`` / ``_compute_prefill_context``:
after ``kv_b_proj`` has up-projected the latent rows into per-head keys and values, MLA's
prefill is ordinary multi-head attention with QK width 192 (= 128 nope + 64 rope) and V
width 128 for DeepSeek (48 = 32 + 16 and 32 for the tiny model). The algorithm is
FlashAttention-2's, as in Triton's tutorial ``06-fused-attention.py``.

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

Output: ``out`` in the input dtype, ``lse`` in fp32, laid out ``[tokens, heads]``
(FlashAttention returns ``[heads, tokens]``).
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
    device_target,
    fail,
    guard_interpreter_dtype,
    out_buffer,
    tl,
    triton,
    upcast,
)
from pdlab.kernels.merge import partial_attention

BLOCK_N = 64
TWIN_SCORES = 1 << 24  # scores the torch twin holds at once (64 MiB in fp32)


# %% Triton
@triton.jit
def _attend_tiles(
    acc,
    l_i,
    m_i,
    q_a,
    q_b,
    k_base,
    v_base,
    stride_k_t,
    stride_v_t,
    offs_m,
    k_len,
    diag,
    lo,
    hi,
    qk_scale,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr,
    HAS_TAIL: tl.constexpr,
    D_QK: tl.constexpr,
    D_V: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_A: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
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
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    lse_ptr,
    cu_seqlens_q_ptr,
    cu_seqlens_k_ptr,
    stride_q_t,
    stride_q_h,
    stride_k_t,
    stride_k_h,
    stride_v_t,
    stride_v_h,
    stride_o_t,
    stride_o_h,
    num_heads,
    scale,
    D_QK: tl.constexpr,
    D_V: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_A: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
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
            acc,
            l_i,
            m_i,
            q_a,
            q_b,
            k_base,
            v_base,
            stride_k_t,
            stride_v_t,
            offs_m,
            k_len,
            diag,
            full if masked else 0,
            hi if masked else full,
            qk_scale,
            masked == 1,
            CAUSAL,
            UPCAST,
            HAS_TAIL,
            D_QK,
            D_V,
            BLOCK_N,
            BLOCK_A,
            BLOCK_B,
            BLOCK_DV,
            NUM_STAGES,
        )

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


def flash_attn_varlen_config(
    max_seqlen_q: int, d_qk: int, d_v: int, elem_bytes: int = 2, target: int = 90
) -> dict:
    """Tiles chosen in plain Python for compute capability ``target`` (90 = sm_90).

    ``BLOCK_M`` query rows: 128 on Hopper (two warp groups of wgmma's 64 rows, 8 warps), 64
    on Ampere (mma.sync), fewer for a short query (at least 16 for ``tl.dot``).
    QK is split into its largest power of two ``BLOCK_A`` (128 of 192) and a tail tile
    ``BLOCK_B`` (64), so no product pads 192 to 256. ``BLOCK_N = 64`` keys per step (32 in
    fp32, so that two stages of K/V tiles fit an A100's shared memory)."""
    block_a = max(16, 1 << (d_qk.bit_length() - 1)) if d_qk >= 16 else 16
    block_m = 128 if target >= 90 else 64
    return {
        "BLOCK_M": min(block_m, block(max_seqlen_q)),
        "BLOCK_N": BLOCK_N if elem_bytes <= 2 else BLOCK_N // 2,
        "BLOCK_A": block_a,
        "BLOCK_B": block(max(d_qk - block_a, 1)),
        "BLOCK_DV": block(d_v),
        "NUM_STAGES": 2,
        # 8 warps: two warp groups for 128 rows; on Ampere, room in registers (4 spill,
        # measured with `pdlab doctor --aot`)
        "num_warps": 8,
    }


def flash_attn_varlen_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    scale: float,
    causal: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    checks.flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    _check_flash(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    Tq, H, d_qk = q.shape
    d_v = v.shape[2]
    up = upcast(q.dtype)
    guard_interpreter_dtype(q.dtype, up)
    out = out_buffer((Tq, H, d_v), q.dtype, q.device, up)
    lse = torch.empty((Tq, H), dtype=torch.float32, device=q.device)
    num_seqs = cu_seqlens_q.shape[0] - 1
    if Tq == 0 or num_seqs == 0 or max_seqlen_q == 0:
        return out.to(q.dtype), lse
    cfg = flash_attn_varlen_config(
        max_seqlen_q, d_qk, d_v, q.element_size(), device_target(q.device)
    )
    grid = (triton.cdiv(max_seqlen_q, cfg["BLOCK_M"]), num_seqs, H)
    check_launchable(flash_attn_varlen_kernel)
    flash_attn_varlen_kernel[grid](
        q,
        k,
        v,
        out,
        lse,
        cu_seqlens_q,
        cu_seqlens_k,
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        out.stride(0),
        out.stride(1),
        H,
        float(scale),
        D_QK=d_qk,
        D_V=d_v,
        CAUSAL=bool(causal),
        UPCAST=up,
        **cfg,
    )
    return out.to(q.dtype), lse


# %% torch twin
def flash_attn_varlen_torch(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    scale: float,
    causal: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same result as tensor operations: per sequence, all its keys at once (the online
    softmax over tiles only matters where scores do not fit in registers), queries in
    chunks of ``TWIN_SCORES // (H * k_len)`` so the score tensor stays bounded."""
    checks.flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    _check_flash(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    Tq, H, _ = q.shape
    out = torch.zeros((Tq, H, v.shape[2]), dtype=torch.float32, device=q.device)
    lse = torch.full((Tq, H), float("-inf"), dtype=torch.float32, device=q.device)
    cu_q, cu_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for i in range(len(cu_q) - 1):
        q_len, k_len = cu_q[i + 1] - cu_q[i], cu_k[i + 1] - cu_k[i]
        if q_len == 0 or k_len == 0:
            continue
        k_i, v_i = k[cu_k[i] : cu_k[i + 1]], v[cu_k[i] : cu_k[i + 1]]
        keys = torch.arange(k_len, device=q.device)
        step = max(1, TWIN_SCORES // (H * k_len))
        for a in range(0, q_len, step):
            b = min(a + step, q_len)
            rows = slice(cu_q[i] + a, cu_q[i] + b)
            # causal, bottom-right: query j of the sequence sees keys <= k_len - q_len + j
            last = torch.arange(a, b, device=q.device) + (k_len - q_len)
            mask = keys[None, :] <= last[:, None] if causal else None
            out[rows], lse[rows] = partial_attention(q[rows], k_i, v_i, scale, mask)
    return out.to(q.dtype), lse


def flash_attn_varlen(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    scale: float,
    causal: bool,
    *,
    backend: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention over packed variable-length sequences.

    ``q[Tq, H, Dqk]``, ``k[Tk, H, Dqk]``, ``v[Tk, H, Dv]`` of one dtype; ``cu_seqlens_q``,
    ``cu_seqlens_k`` int32 ``[B + 1]``; ``max_seqlen_q`` sizes the grid (``max_seqlen_k`` is
    accepted for FlashAttention's signature). Causal masking is aligned bottom-right.
    Returns ``out[Tq, H, Dv]`` in the input dtype and fp32 ``lse[Tq, H]`` (natural log;
    FlashAttention's is ``[H, Tq]``).
    """
    if _backend.resolve(backend) == "triton":
        return flash_attn_varlen_triton(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale, causal
        )
    return flash_attn_varlen_torch(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale, causal
    )


def _check_flash(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k) -> None:
    check_tensor("q", q, 3, FLOAT_DTYPES)
    check_tensor("k", k, 3)
    check_tensor("v", v, 3)
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            fail(name, str(t.dtype), f"dtype {q.dtype} (q's)")
    check_dim("k", k, 1, q.shape[1], "num_heads of q")
    check_dim("k", k, 2, q.shape[2], "QK head width of q")
    check_dim("v", v, 0, k.shape[0], "one value row per key row")
    check_dim("v", v, 1, q.shape[1], "num_heads of q")
    check_tensor("cu_seqlens_q", cu_seqlens_q, 1, (torch.int32,))
    check_tensor("cu_seqlens_k", cu_seqlens_k, 1, (torch.int32,))
    check_dim(
        "cu_seqlens_k", cu_seqlens_k, 0, cu_seqlens_q.shape[0], "num_seqs + 1, like cu_seqlens_q"
    )
    for name, n in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            fail(name, repr(n), "an int >= 0")
    check_same_device(q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
