import torch


def causal_mask(q_len: int, k_len: int) -> torch.Tensor:
    i = torch.arange(q_len)[:, None]
    j = torch.arange(k_len)[None, :]
    # 右下角对齐：query `i` 是序列中的第 `k_len - q_len + i` 个 token，能看到它自己和它之前的
    # 每个 token。
    return j <= k_len - q_len + i
