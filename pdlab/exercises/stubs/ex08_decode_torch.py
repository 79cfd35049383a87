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
    """Attention of one request's absorbed query ``q[H, W]`` (``W = L + R``) over its
    ``seq_len`` cached rows ``kv_cache[num_blocks, page_size, W]``, page by page through
    ``block_ids``, with the online softmax (never all scores at once). V is the first
    ``kv_lora_rank`` columns of the same rows. Return ``(out[H, L], lse[H])`` in fp32."""
    # zh: """一个请求的吸收形式的 query `q[H, W]`（`W = L + R`）对它的 `seq_len` 行缓存
    # zh: `kv_cache[num_blocks, page_size, W]` 的注意力：经 `block_ids` 逐页读取，用在线
    # zh: softmax（从不同时持有全部分数）。V 是同样这些行的前 `kv_lora_rank` 列。返回 fp32 的
    # zh: `(out[H, L], lse[H])`。"""
    raise NotImplementedError("write paged_decode")
