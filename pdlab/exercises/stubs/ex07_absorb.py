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
    raise NotImplementedError("write absorbed_decode")
