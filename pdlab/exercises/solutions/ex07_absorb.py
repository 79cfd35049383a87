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
    h, n = q.shape[1], qk_nope_head_dim
    w = w_kv_b.float().view(h, n + v_head_dim, kv_c.shape[-1])
    w_uk_t, w_uv = w[:, :n], w[:, n:].transpose(1, 2)  # [H, nope, L], [H, L, v]
    # zh: `[H, nope, L]`、`[H, L, v]`
    q = q.float()
    # W_UK folded into the query: a latent query per head, then MQA over the latent rows.
    # zh: 把 W_UK 并入 query：每个头得到一个潜向量 query，再在潜向量行上做 MQA。
    q_latent = torch.einsum("thn,hnl->thl", q[..., :n], w_uk_t)
    scores = torch.einsum("thl,sl->ths", q_latent, kv_c.float())
    scores = scores + torch.einsum("thr,sr->ths", q[..., n:], k_pe.float())
    probs = torch.softmax(scores * scale, dim=-1)  # the scale of the naive form: qk_head_dim
    # zh: 缩放沿用朴素形式的：按 qk_head_dim
    o_latent = torch.einsum("ths,sl->thl", probs, kv_c.float())  # V is the latent itself
    # zh: V 就是潜向量本身
    return torch.einsum("thl,hlv->thv", o_latent, w_uv)  # W_UV maps it back per head
    # zh: W_UV 按头把它映射回去
