import torch


def causal_mask(q_len: int, k_len: int) -> torch.Tensor:
    i = torch.arange(q_len)[:, None]
    j = torch.arange(k_len)[None, :]
    # Bottom-right: query i is token k_len - q_len + i of the sequence and sees itself and
    # every token before it.
    # zh: 右下角对齐：query `i` 是序列中的第 `k_len - q_len + i` 个 token，能看到它自己和它之前的
    # zh: 每个 token。
    return j <= k_len - q_len + i
