import torch


def merge_attn_states(
    out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    lse_a, lse_b = lse_a.float(), lse_b.float()
    # Subtract the larger LSE first, so exp() never overflows; with both parts empty use 0.
    # zh: 先减去较大的 LSE，`exp()` 就不会溢出；两部分都为空时用 0。
    m = torch.maximum(lse_a, lse_b)
    m = torch.where(torch.isinf(m) & (m < 0), torch.zeros_like(m), m)
    w_a, w_b = torch.exp(lse_a - m), torch.exp(lse_b - m)  # exp(-inf) = 0: an empty part
    # zh: `exp(-inf) = 0`：空的部分
    total = w_a + w_b
    lse = m + torch.log(total)  # log(0) = -inf when both are empty
    # zh: 两部分都为空时 `log(0) = -inf`
    safe = torch.where(total > 0, total, torch.ones_like(total))
    c_a, c_b = (w_a / safe)[..., None], (w_b / safe)[..., None]
    # An empty part is never read: 0 * NaN would leak into the result.
    # zh: 从不读取空的部分：`0 * NaN` 会混进结果。
    out = torch.where(c_a > 0, c_a * out_a.float(), 0.0) + torch.where(
        c_b > 0, c_b * out_b.float(), 0.0
    )
    return out.to(out_a.dtype), lse
