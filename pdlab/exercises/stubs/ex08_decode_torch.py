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
    raise NotImplementedError("write paged_decode")
