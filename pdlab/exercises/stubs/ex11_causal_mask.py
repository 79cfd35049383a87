import torch


def causal_mask(q_len: int, k_len: int) -> torch.Tensor:
    """``bool[q_len, k_len]``, True where query ``i`` may attend to key ``j``, for the last
    ``q_len`` tokens of a sequence of ``k_len`` (the new tokens of a chunk, attending to the
    context before them and causally to each other)."""
    # zh: """`bool[q_len, k_len]`：query `i` 可以关注 key `j` 处为 True。query 是长度为
    # zh: `k_len` 的序列的最后 `q_len` 个 token（一个分块的新 token：关注它们之前的上下文，
    # zh: 彼此之间因果）。"""
    raise NotImplementedError("write causal_mask")
