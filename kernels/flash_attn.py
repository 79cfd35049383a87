"""Variable-length FlashAttention: ``flash_attn_varlen``, the prefill path's attention.

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
``lse = m + log(l)``. Nothing of size ``k_len`` is ever stored.

The tiling
----------
Grid ``(cdiv(max_seqlen_q, BLOCK_M), num_seqs, num_heads)``: one program owns ``BLOCK_M``
queries of one sequence and one head. Its query tile ``[BLOCK_M, D_QK]``, the running
``m`` and ``l`` ``[BLOCK_M]`` and ``acc [BLOCK_M, D_V]`` stay in registers while it walks
the key/value tiles ``[BLOCK_N, D_QK]``, ``[BLOCK_N, D_V]`` of its sequence. A causal
program stops at the last key its last query can see. Widths that are not powers of two
(192, 48) are padded to the next one (256, 64): padded columns load as zeros, which add
nothing to ``q . k``, and padded output columns are never stored. ``tl.dot`` needs every
dimension >= 16 on a GPU, so ``BLOCK_M`` is at least 16 even for a one-token query.

Output: ``out`` in the input dtype, ``lse`` in fp32, laid out ``[tokens, heads]``
(FlashAttention returns ``[heads, tokens]``).
"""

from __future__ import annotations

import torch

from pdlab.kernels import backend as _backend
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
from pdlab.kernels.merge import partial_attention

BLOCK_N = 64
TWIN_SCORES = 1 << 24  # scores the torch twin holds at once (64 MiB in fp32)


# %% Triton
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
    D_QK,
    D_V,
    CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_DQK: tl.constexpr,
    BLOCK_DV: tl.constexpr,
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

    offs_m = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)  # query rows of this tile
    mask_m = offs_m < q_len
    d_qk = tl.arange(0, BLOCK_DQK)
    d_v = tl.arange(0, BLOCK_DV)
    mask_dqk = d_qk < D_QK
    mask_dv = d_v < D_V

    q_rows = (q_begin + offs_m).to(tl.int64)
    q = tl.load(
        q_ptr + q_rows[:, None] * stride_q_t + head * stride_q_h + d_qk[None, :],
        mask=mask_m[:, None] & mask_dqk[None, :],
        other=0.0,
    )
    if UPCAST:  # bf16 on the interpreter: fp32 math
        q = q.to(tl.float32)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # running max
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running sum of exp
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)  # running sum of exp * v

    # Query i sees keys < k_len - q_len + i + 1; this tile's last query bounds the loop.
    if CAUSAL:
        hi = tl.minimum(k_len, tl.maximum(0, k_len - q_len + (tile_m + 1) * BLOCK_M))
    else:
        hi = k_len
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        mask_n = offs_n < k_len
        k_rows = (k_begin + offs_n).to(tl.int64)
        k = tl.load(
            k_ptr + k_rows[:, None] * stride_k_t + head * stride_k_h + d_qk[None, :],
            mask=mask_n[:, None] & mask_dqk[None, :],
            other=0.0,
        )
        if UPCAST:
            k = k.to(tl.float32)
        s = tl.dot(q, tl.trans(k)) * scale  # [BLOCK_M, BLOCK_N], fp32
        visible = mask_n[None, :]
        if CAUSAL:
            visible = visible & (offs_n[None, :] < (k_len - q_len + offs_m + 1)[:, None])
        s = tl.where(visible, s, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        # A row that has seen no key yet keeps m = -inf; subtract 0 instead (no inf - inf).
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_safe)  # rescales what came before
        p = tl.exp(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)

        v = tl.load(
            v_ptr + k_rows[:, None] * stride_v_t + head * stride_v_h + d_v[None, :],
            mask=mask_n[:, None] & mask_dv[None, :],
            other=0.0,
        )
        if UPCAST:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    seen = l_i > 0  # False: this query saw no key
    l_safe = tl.where(seen, l_i, 1.0)
    out = acc / l_safe[:, None]
    lse = tl.where(seen, m_i + tl.log(l_safe), float("-inf"))
    tl.store(
        out_ptr + q_rows[:, None] * stride_o_t + head * stride_o_h + d_v[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=mask_m[:, None] & mask_dv[None, :],
    )
    tl.store(lse_ptr + q_rows * num_heads + head, lse, mask=mask_m)


def flash_attn_varlen_config(max_seqlen_q: int, d_qk: int, d_v: int, elem_bytes: int = 2) -> dict:
    """Tiles chosen in plain Python: ``BLOCK_M`` covers a short query in one tile (at least
    16 for ``tl.dot``, at most 64), ``BLOCK_N = 64`` keys per step (32 in fp32, so two
    stages of K/V tiles fit an A100's shared memory); 8 warps once the padded QK width
    reaches 256 (DeepSeek's 192) to keep the tiles in registers."""
    block_dqk = block(d_qk)
    return {
        "BLOCK_M": min(64, block(max_seqlen_q)),
        "BLOCK_N": BLOCK_N if elem_bytes <= 2 else BLOCK_N // 2,
        "BLOCK_DQK": block_dqk,
        "BLOCK_DV": block(d_v),
        "num_warps": 8 if block_dqk >= 256 else 4,
        "num_stages": 2,
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
    cfg = flash_attn_varlen_config(max_seqlen_q, d_qk, d_v, q.element_size())
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
        d_qk,
        d_v,
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
