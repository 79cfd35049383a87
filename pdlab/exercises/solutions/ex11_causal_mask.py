import torch


def causal_mask(q_len: int, k_len: int) -> torch.Tensor:
    i = torch.arange(q_len)[:, None]
    j = torch.arange(k_len)[None, :]
    # Bottom-right: query i is token k_len - q_len + i of the sequence and sees itself and
    # every token before it.
    return j <= k_len - q_len + i
