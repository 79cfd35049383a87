import torch


def paged_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_ids: list[int],
    seq_len: int,
    scale: float,
    kv_lora_rank: int,
    page_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """一个请求的吸收式 query `q[H, W]`（`W = L + R`）对它的 `seq_len` 行缓存
    `kv_cache[num_blocks, page_size, W]` 的注意力：经 `block_ids` 逐页读取，用在线
    softmax（从不同时持有全部分数）。V 是同样这些行的前 `kv_lora_rank` 列。返回 fp32 的
    `(out[H, L], lse[H])`。"""
    raise NotImplementedError("write paged_decode")
