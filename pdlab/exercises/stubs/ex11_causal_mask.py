import torch


def causal_mask(q_len: int, k_len: int) -> torch.Tensor:
    """``bool[q_len, k_len]``, True where query ``i`` may attend to key ``j``, for the last
    ``q_len`` tokens of a sequence of ``k_len`` (the new tokens of a chunk, attending to the
    context before them and causally to each other)."""
    raise NotImplementedError("write causal_mask")
