import torch


def absorbed_decode(
    q: torch.Tensor,
    kv_c: torch.Tensor,
    k_pe: torch.Tensor,
    w_kv_b: torch.Tensor,
    qk_nope_head_dim: int,
    v_head_dim: int,
    scale: float,
) -> torch.Tensor:
    """MLA's decode in its absorbed form: ``q[T, H, nope + rope]`` (RoPE applied) attends,
    without a mask, to ``S`` cached latent rows ``kv_c[S, L]`` and ``k_pe[S, R]``.
    ``w_kv_b`` is ``kv_b_proj.weight``, ``[H * (nope + v), L]``. Return ``out[T, H, v]``,
    equal to up-projecting every cached row to per-head keys and values and attending
    (the naive form), without up-projecting any cached row."""
    # zh: """吸收形式的 MLA 解码：`q[T, H, nope + rope]`（已施加 RoPE）不带掩码地关注 `S` 行已缓存
    # zh: 的潜向量 `kv_c[S, L]` 与 `k_pe[S, R]`。`w_kv_b` 即 `kv_b_proj.weight`，
    # zh: `[H * (nope + v), L]`。返回 `out[T, H, v]`，等于把每行缓存上投影成各头的 key 和 value
    # zh: 再计算注意力（朴素形式），但不上投影任何一行缓存。"""
    raise NotImplementedError("write absorbed_decode")
