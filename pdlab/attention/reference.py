"""The naive oracle: every kernel and every fast path in pdlab is tested against this file.

Plain PyTorch, fp32 accumulation, materialised scores, no paging, no tricks. MLA is written
twice, after DeepSeek-V3's published reference (``inference/model.py``, ``attn_impl="naive"``
and ``attn_impl="absorb"``), so the equality of the two forms is visible side by side:
``mla_naive`` up-projects every latent row into per-head keys and values, ``mla_absorbed``
runs MQA over the latent rows (the form vLLM's ``forward_mqa`` and FlashMLA use).

LSE is the natural-log log-sum-exp of the scaled scores, ``[num_tokens, num_heads]`` (vLLM
and FlashAttention store it transposed).
"""

from __future__ import annotations

import torch


def causal_mask(q_len: int, k_len: int, device: torch.device | None = None) -> torch.Tensor:
    """Bottom-right aligned causal mask ``[q_len, k_len]`` (True = may attend): query ``i``
    sees keys ``< k_len - q_len + i + 1``, as FlashAttention aligns it."""
    i = torch.arange(q_len, device=device)[:, None]
    j = torch.arange(k_len, device=device)[None, :]
    return j < (k_len - q_len + i + 1)


def naive_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of one sequence: ``q[Tq, H, D]``, ``k[Tk, Hk, D]``, ``v[Tk, Hk, Dv]`` with
    ``H % Hk == 0`` (``Hk = 1`` is MQA, as in absorbed MLA).

    Returns ``out[Tq, H, Dv]`` and ``lse[Tq, H]`` in fp32. A query row that may see no key
    (only possible with ``causal`` and ``Tq > Tk``) gets ``out = 0`` and ``lse = -inf``.
    """
    if q.dim() != 3 or k.dim() != 3 or v.dim() != 3:
        raise ValueError(
            f"q, k, v must be [tokens, heads, dim]; got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    tq, h, _ = q.shape
    tk, hk, _ = k.shape
    if h % hk or v.shape[:2] != k.shape[:2] or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"incompatible shapes q={tuple(q.shape)} k={tuple(k.shape)} v={tuple(v.shape)}"
        )
    qf, kf, vf = q.float(), k.float(), v.float()
    if hk != h:
        kf = kf.repeat_interleave(h // hk, dim=1)
        vf = vf.repeat_interleave(h // hk, dim=1)
    scores = torch.einsum("qhd,khd->hqk", qf, kf) * scale
    if causal:
        scores = scores.masked_fill(~causal_mask(tq, tk, q.device), float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)  # [H, Tq]
    probs = torch.exp(scores - lse[..., None].masked_fill(lse[..., None].isinf(), 0.0))
    probs = probs.nan_to_num(0.0)
    out = torch.einsum("hqk,khd->qhd", probs, vf)
    return out, lse.transpose(0, 1).contiguous()


def split_kv_b_proj(
    w_kv_b: torch.Tensor, num_heads: int, qk_nope_head_dim: int, v_head_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split ``kv_b_proj.weight[H * (nope + v), L]`` into ``W_UK[H, nope, L]`` and
    ``W_UV[H, v, L]`` (DeepSeek's ``wkv_b.view(n_heads, -1, kv_lora_rank)``)."""
    w = w_kv_b.view(num_heads, qk_nope_head_dim + v_head_dim, w_kv_b.shape[-1])
    return w[:, :qk_nope_head_dim], w[:, qk_nope_head_dim:]


def mla_naive(
    q: torch.Tensor,
    kv_c: torch.Tensor,
    k_pe: torch.Tensor,
    w_kv_b: torch.Tensor,
    qk_nope_head_dim: int,
    v_head_dim: int,
    scale: float,
    causal: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """MLA, un-absorbed. ``q[T, H, nope + rope]`` (RoPE applied), latent ``kv_c[S, L]``
    (after ``kv_a_layernorm``), ``k_pe[S, R]`` (RoPE applied), ``w_kv_b[H*(nope+v), L]``.

    Every latent row is up-projected to ``k_nope[S, H, nope]`` and ``v[S, H, v]``; the shared
    ``k_pe`` is broadcast to every head. Returns ``out[T, H, v]`` and ``lse[T, H]`` (fp32).
    """
    h = q.shape[1]
    w_uk, w_uv = split_kv_b_proj(w_kv_b.float(), h, qk_nope_head_dim, v_head_dim)
    c = kv_c.float()
    k_nope = torch.einsum("sl,hdl->shd", c, w_uk)
    v = torch.einsum("sl,hdl->shd", c, w_uv)
    k = torch.cat([k_nope, k_pe.float()[:, None, :].expand(-1, h, -1)], dim=-1)
    return naive_attention(q.float(), k, v, scale, causal)


def mla_absorbed(
    q: torch.Tensor,
    kv_c: torch.Tensor,
    k_pe: torch.Tensor,
    w_kv_b: torch.Tensor,
    qk_nope_head_dim: int,
    v_head_dim: int,
    scale: float,
    causal: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """MLA, absorbed: same arguments and result as :func:`mla_naive`.

    ``q_nope @ W_UK`` turns each head's query into a latent query ``[T, H, L]``; attention is
    then MQA over the latent rows ``[kv_c | k_pe]`` with ``V = kv_c``, and ``W_UV`` maps the
    latent output ``[T, H, L]`` back to ``[T, H, v]``. The scale is unchanged.
    """
    h = q.shape[1]
    w_uk, w_uv = split_kv_b_proj(w_kv_b.float(), h, qk_nope_head_dim, v_head_dim)
    q_nope, q_pe = q.float()[..., :qk_nope_head_dim], q.float()[..., qk_nope_head_dim:]
    q_latent = torch.einsum("thd,hdl->thl", q_nope, w_uk)
    q_mqa = torch.cat([q_latent, q_pe], dim=-1)  # [T, H, L + R]
    kv_rows = torch.cat([kv_c.float(), k_pe.float()], dim=-1)[:, None, :]  # [S, 1, L + R]
    out_latent, lse = naive_attention(q_mqa, kv_rows, kv_c.float()[:, None, :], scale, causal)
    return torch.einsum("thl,hdl->thd", out_latent, w_uv), lse
