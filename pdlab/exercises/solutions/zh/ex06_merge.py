import torch


def merge_attn_states(
    out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    lse_a, lse_b = lse_a.float(), lse_b.float()
    # 先减去较大的 LSE，`exp()` 就不会溢出；两部分都为空时用 0。
    m = torch.maximum(lse_a, lse_b)
    m = torch.where(torch.isinf(m) & (m < 0), torch.zeros_like(m), m)
    w_a, w_b = torch.exp(lse_a - m), torch.exp(lse_b - m)  # `exp(-inf) = 0`：空的部分
    total = w_a + w_b
    lse = m + torch.log(total)  # 两部分都为空时 `log(0) = -inf`
    safe = torch.where(total > 0, total, torch.ones_like(total))
    c_a, c_b = (w_a / safe)[..., None], (w_b / safe)[..., None]
    # 从不读取空的部分：`0 * NaN` 会混进结果。
    out = torch.where(c_a > 0, c_a * out_a.float(), 0.0) + torch.where(
        c_b > 0, c_b * out_b.float(), 0.0
    )
    return out.to(out_a.dtype), lse
