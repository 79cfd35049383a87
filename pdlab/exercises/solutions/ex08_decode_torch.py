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
    l = torch.zeros(h)  # running sum of exp(score - m)
    acc = torch.zeros(h, kv_lora_rank)  # running sum of exp(score - m) * v
    for page in range((seq_len + page_size - 1) // page_size):
        n = min(page_size, seq_len - page * page_size)  # the last page may be partly filled
        rows = kv_cache[block_ids[page], :n].float()  # [n, W]; never the unused slots
        s = (q @ rows.T) * scale  # [H, n]
        m_new = torch.maximum(m, s.max(dim=1).values)
        alpha = torch.exp(m - m_new)  # rescale what was summed under the old max
        p = torch.exp(s - m_new[:, None])
        l = l * alpha + p.sum(dim=1)
        acc = acc * alpha[:, None] + p @ rows[:, :kv_lora_rank]
        m = m_new
    return acc / l[:, None], m + torch.log(l)
