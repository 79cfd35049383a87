"""Merging two partial attention results by their log-sum-exp: ``merge_attn_states``.

Mirrors vLLM's ``vllm/v1/attention/ops/merge_attn_states.py`` and its Triton version
``triton_merge_attn_states.py`` (vLLM calls it with ``prefix_output, prefix_lse,
suffix_output, suffix_lse``; its LSE is ``[heads, tokens]``, pdlab's is ``[tokens, heads]``).
MLA's prefill path uses it to join attention over the cached context (computed chunk by
chunk) with attention over the new tokens.

The math
--------
Attention of one query over a key set ``K`` is ``out = sum_j softmax(s)_j v_j`` with
``lse = log sum_j exp(s_j)``. Split ``K`` into disjoint parts ``A`` and ``B`` and attend to
each separately: ``out_A, lse_A`` and ``out_B, lse_B``. The whole is recovered exactly::

    lse = log(exp(lse_A) + exp(lse_B))
    out = exp(lse_A - lse) * out_A + exp(lse_B - lse) * out_B

computed stably by subtracting ``m = max(lse_A, lse_B)`` first: the online-softmax update of
FlashAttention, written for whole parts. A part that saw no key has ``lse = -inf`` and
weight 0; when both parts are empty the result is ``out = 0, lse = -inf`` (never NaN). Like
vLLM, an LSE of ``+inf`` is read as ``-inf`` (an empty part some kernels report that way).

The tiling
----------
One program per (token, group of ``BLOCK_H`` heads): it loads the group's two LSE vectors,
computes the two weights per head in registers, and blends the ``[BLOCK_H, D]`` tiles of
the two outputs. All math is in fp32; bf16 on the interpreter only needs the fp32 output
buffer of ``common.py`` (the loads are converted to fp32 before any math anyway).
"""

from __future__ import annotations

import torch

from pdlab.kernels import backend as _backend
from pdlab.kernels.common import (
    FLOAT_DTYPES,
    block,
    check_launchable,
    check_same_device,
    check_tensor,
    fail,
    out_buffer,
    tl,
    triton,
    upcast,
)

NUM_WARPS = 4


# %% Triton
@triton.jit
def merge_attn_states_kernel(
    out_ptr, lse_ptr, out_a_ptr, lse_a_ptr, out_b_ptr, lse_b_ptr,
    stride_out_t, stride_out_h, stride_a_t, stride_a_h, stride_b_t, stride_b_h,
    H, D,
    BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    token = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    mask_h = heads < H
    cols = tl.arange(0, BLOCK_D)
    mask = mask_h[:, None] & (cols < D)[None, :]

    # The LSEs are contiguous [T, H] fp32.
    lse_a = tl.load(lse_a_ptr + token * H + heads, mask=mask_h, other=float("-inf"))
    lse_b = tl.load(lse_b_ptr + token * H + heads, mask=mask_h, other=float("-inf"))
    lse_a = tl.where(lse_a == float("inf"), float("-inf"), lse_a)
    lse_b = tl.where(lse_b == float("inf"), float("-inf"), lse_b)
    m = tl.maximum(lse_a, lse_b)
    m = tl.where(m == float("-inf"), 0.0, m)  # both empty: keep exp() away from NaN
    w_a = tl.exp(lse_a - m)  # exp(-inf) = 0 for an empty part
    w_b = tl.exp(lse_b - m)
    total = w_a + w_b
    seen = total > 0  # False: both parts are empty
    total = tl.where(seen, total, 1.0)
    tl.store(
        lse_ptr + token * H + heads, tl.where(seen, m + tl.log(total), float("-inf")), mask=mask_h
    )
    c_a = (w_a / total)[:, None]
    c_b = (w_b / total)[:, None]

    a = tl.load(
        out_a_ptr + token * stride_a_t + heads[:, None] * stride_a_h + cols[None, :],
        mask=mask,
        other=0.0,
    ).to(tl.float32)
    b = tl.load(
        out_b_ptr + token * stride_b_t + heads[:, None] * stride_b_h + cols[None, :],
        mask=mask,
        other=0.0,
    ).to(tl.float32)
    # An empty part's output is not read at all: whatever it holds, 0 * NaN would leak.
    out = tl.where(c_a > 0, c_a * a, 0.0) + tl.where(c_b > 0, c_b * b, 0.0)
    tl.store(
        out_ptr + token * stride_out_t + heads[:, None] * stride_out_h + cols[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=mask,
    )


def merge_attn_states_config(H: int, D: int) -> dict:
    """``BLOCK_H`` heads per program, so that a tile holds at most 4K values."""
    block_d = block(D, minimum=1)
    block_h = max(1, min(block(H, minimum=1), 4096 // block_d))
    return {"BLOCK_H": block_h, "BLOCK_D": block_d, "num_warps": NUM_WARPS}


def merge_attn_states_triton(
    out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    _check_merge(out_a, lse_a, out_b, lse_b)
    T, H, D = out_a.shape
    out_a, out_b = (t if t.stride(-1) == 1 else t.contiguous() for t in (out_a, out_b))
    lse_a, lse_b = lse_a.contiguous(), lse_b.contiguous()
    out = out_buffer((T, H, D), out_a.dtype, out_a.device, upcast(out_a.dtype))
    lse = torch.empty((T, H), dtype=torch.float32, device=out_a.device)
    if T == 0 or H == 0:
        return out.to(out_a.dtype), lse
    cfg = merge_attn_states_config(H, D)
    grid = (T, triton.cdiv(H, cfg["BLOCK_H"]))
    check_launchable(merge_attn_states_kernel)
    merge_attn_states_kernel[grid](
        out, lse, out_a, lse_a, out_b, lse_b,
        out.stride(0), out.stride(1),
        out_a.stride(0), out_a.stride(1), out_b.stride(0), out_b.stride(1),
        H, D, **cfg,
    )  # fmt: skip
    return out.to(out_a.dtype), lse


# %% torch twin
def merge_attn_states_torch(
    out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    _check_merge(out_a, lse_a, out_b, lse_b)
    inf = float("inf")
    lse_a = lse_a.float().masked_fill(lse_a == inf, -inf)
    lse_b = lse_b.float().masked_fill(lse_b == inf, -inf)
    m = torch.maximum(lse_a, lse_b)
    m = m.masked_fill(m == -inf, 0.0)
    w_a, w_b = torch.exp(lse_a - m), torch.exp(lse_b - m)
    total = w_a + w_b
    lse = m + torch.log(total)
    total = torch.where(total > 0, total, torch.ones_like(total))
    c_a, c_b = (w_a / total)[..., None], (w_b / total)[..., None]
    out = torch.where(c_a > 0, c_a * out_a.float(), 0.0) + torch.where(
        c_b > 0, c_b * out_b.float(), 0.0
    )
    return out.to(out_a.dtype), lse


def merge_splits_torch(
    out_s: torch.Tensor, lse_s: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`merge_attn_states_torch`'s algebra over any number of parts at once:
    ``out_s[..., S, D]`` with ``lse_s[..., S]`` (fp32) folded along ``S``."""
    inf = float("inf")
    lse_s = lse_s.float().masked_fill(lse_s == inf, -inf)
    m = lse_s.amax(dim=-1, keepdim=True)
    m = m.masked_fill(m == -inf, 0.0)
    w = torch.exp(lse_s - m)  # [..., S]
    total = w.sum(dim=-1)
    lse = m[..., 0] + torch.log(total)
    c = w / torch.where(total > 0, total, torch.ones_like(total))[..., None]
    out = torch.where(c[..., None] > 0, c[..., None] * out_s.float(), 0.0).sum(dim=-2)
    return out, lse


def partial_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Attention of ``q[Tq, H, Dqk]`` over one part of the keys, ``k[Tk, H or 1, Dqk]``,
    ``v[Tk, H or 1, Dv]`` (``mask[Tq, Tk]``, True = visible). Returns fp32 ``out[Tq, H, Dv]``
    and ``lse[Tq, H]``; a query that sees no key of this part gets ``0`` and ``-inf``."""
    Tq, H, _ = q.shape
    Tk = k.shape[0]
    q, k, v = q.float() * scale, k.float(), v.float()  # the scale on the smallest operand
    mqa = k.shape[1] == 1  # one KV head shared by all: one plain matrix product
    if mqa:
        scores = (q.reshape(Tq * H, -1) @ k[:, 0].T).view(Tq, H, Tk)
    else:
        scores = torch.einsum("qhd,khd->hqk", q, k)  # heads first: batched products
    if mask is not None:
        scores.masked_fill_(~(mask[:, None, :] if mqa else mask[None]), float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    finite = lse.masked_fill(lse == float("-inf"), 0.0)
    probs = scores.sub_(finite[..., None]).exp_()  # in place: scores are not needed again
    if mqa:
        return (probs.view(Tq * H, Tk) @ v[:, 0]).view(Tq, H, -1), lse
    return torch.einsum("hqk,khd->qhd", probs, v), lse.T


def merge_attn_states(
    out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor,
    *, backend: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Join two attention results over disjoint key sets: ``out_a/out_b[T, H, D]`` (same
    dtype) with fp32 ``lse_a/lse_b[T, H]`` (natural log; vLLM stores ``[H, T]``).

    Returns ``out[T, H, D]`` in the inputs' dtype and fp32 ``lse[T, H]``. A part with
    ``lse = -inf`` (or ``+inf``) is empty and contributes nothing; two empty parts give
    ``out = 0, lse = -inf``.
    """
    if _backend.resolve(backend) == "triton":
        return merge_attn_states_triton(out_a, lse_a, out_b, lse_b)
    return merge_attn_states_torch(out_a, lse_a, out_b, lse_b)


def _check_merge(out_a, lse_a, out_b, lse_b) -> None:
    check_tensor("out_a", out_a, 3, FLOAT_DTYPES)
    check_tensor("out_b", out_b, 3, FLOAT_DTYPES)
    check_tensor("lse_a", lse_a, 2, (torch.float32,))
    check_tensor("lse_b", lse_b, 2, (torch.float32,))
    if out_b.shape != out_a.shape:
        fail("out_b", f"shape {tuple(out_b.shape)}", f"shape {tuple(out_a.shape)} (out_a's)")
    if out_b.dtype != out_a.dtype:
        fail("out_b", str(out_b.dtype), f"dtype {out_a.dtype} (out_a's)")
    for name, lse in (("lse_a", lse_a), ("lse_b", lse_b)):
        if lse.shape != out_a.shape[:2]:
            fail(name, f"shape {tuple(lse.shape)}", f"[tokens, heads] = {tuple(out_a.shape[:2])}")
    check_same_device(out_a=out_a, lse_a=lse_a, out_b=out_b, lse_b=lse_b)
