r"""Variable-length FlashAttention: ``flash_attn_varlen``, the prefill path's attention.

Mirrors the call vLLM's MLA prefill makes to ``flash_attn_varlen_func`` (``vllm_flash_attn``,
with ``return_softmax_lse=True``) in ``forward_mha`` / ``_compute_prefill_context``:
after ``kv_b_proj`` has up-projected the latent rows into per-head keys and values, MLA's
prefill is ordinary multi-head attention with QK width 192 (= 128 nope + 64 rope) and V
width 128 for DeepSeek (48 = 32 + 16 and 32 for the tiny model). The algorithm is
FlashAttention-2's, as in Triton's tutorial ``06-fused-attention.py``.

The math (online softmax, bottom-right causal masking) and the tiling picture are in
``flash_attn_kernels.py``, beside the Triton kernel. This file holds what drives it: the
tiles chosen in plain Python, the launcher, the torch twin and the entry point.
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
    triton,
    upcast,
)
from pdlab.kernels.flash_attn_kernels import flash_attn_varlen_kernel
from pdlab.kernels.merge import partial_attention

BLOCK_N = 64
TWIN_SCORES = 1 << 24  # scores the torch twin holds at once (64 MiB in fp32)


def flash_attn_varlen_config(
    max_seqlen_q: int, d_qk: int, d_v: int, elem_bytes: int = 2, target: int = 90
) -> dict:
    """Tiles chosen in plain Python for compute capability ``target`` (90 = sm_90), as the
    kernels' docstring draws them: ``BLOCK_M`` query rows (fewer for a short query), QK as
    ``BLOCK_A + BLOCK_B``, ``BLOCK_N = 64`` keys per step (32 in fp32, so that two stages of
    K/V tiles fit an A100's shared memory)."""
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
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
    cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int,
    scale: float, causal: bool,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
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
        q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        out.stride(0), out.stride(1), H, float(scale),
        D_QK=d_qk, D_V=d_v, CAUSAL=bool(causal), UPCAST=up, **cfg,
    )  # fmt: skip
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
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
    cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int,
    scale: float, causal: bool,
    *, backend: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Attention over packed variable-length sequences.

    ``q[Tq, H, Dqk]``, ``k[Tk, H, Dqk]``, ``v[Tk, H, Dv]`` of one dtype; ``cu_seqlens_q``,
    ``cu_seqlens_k`` int32 ``[B + 1]``; ``max_seqlen_q`` sizes the grid (``max_seqlen_k`` is
    accepted for FlashAttention's signature). Causal masking is aligned bottom-right.
    Returns ``out[Tq, H, Dv]`` in the input dtype and fp32 ``lse[Tq, H]`` (natural log;
    FlashAttention's is ``[H, Tq]``).
    """
    args = (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale, causal)
    if _backend.resolve(backend) == "triton":
        return flash_attn_varlen_triton(*args)
    return flash_attn_varlen_torch(*args)


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
