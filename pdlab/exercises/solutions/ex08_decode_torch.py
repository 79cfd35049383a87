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
    h = q.shape[0]
    q = q.float()
    m = torch.full((h,), float("-inf"))  # running max of each head's scores
    # zh: 每个头分数的运行最大值
    l = torch.zeros(h)  # running sum of exp(score - m)
    # zh: `exp(score - m)` 的运行和
    acc = torch.zeros(h, kv_lora_rank)  # running sum of exp(score - m) * v
    # zh: `exp(score - m) * v` 的运行和
    for page in range((seq_len + page_size - 1) // page_size):
        n = min(page_size, seq_len - page * page_size)  # the last page may be partly filled
        # zh: 最后一页可能只填了一部分
        rows = kv_cache[block_ids[page], :n].float()  # [n, W]; never the unused slots
        # zh: `[n, W]`；从不读未用的槽
        s = (q @ rows.T) * scale  # [H, n]
        m_new = torch.maximum(m, s.max(dim=1).values)
        alpha = torch.exp(m - m_new)  # rescale what was summed under the old max
        # zh: 把按旧最大值累加的部分重新缩放
        p = torch.exp(s - m_new[:, None])
        l = l * alpha + p.sum(dim=1)
        acc = acc * alpha[:, None] + p @ rows[:, :kv_lora_rank]
        m = m_new
    return acc / l[:, None], m + torch.log(l)
