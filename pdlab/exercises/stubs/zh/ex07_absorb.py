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
    """吸收形式的 MLA 解码：`q[T, H, nope + rope]`（已施加 RoPE）不带掩码地关注 `S` 行已缓存
    的潜向量 `kv_c[S, L]` 与 `k_pe[S, R]`。`w_kv_b` 即 `kv_b_proj.weight`，
    `[H * (nope + v), L]`。返回 `out[T, H, v]`，等于把每行缓存上投影成各头的 key 和 value
    再计算注意力（朴素形式），但不上投影任何一行缓存。"""
    raise NotImplementedError("write absorbed_decode")
