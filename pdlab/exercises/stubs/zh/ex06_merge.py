import torch


def merge_attn_states(
    out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """合并不相交的 key 集合 A、B 上的两个注意力结果。

    `out_a`、`out_b`：`[tokens, heads, head_dim]`；`lse_a`、`lse_b`：fp32
    `[tokens, heads]`，各部分缩放后分数的自然对数 log-sum-exp。没有看到任何 key 的部分
    `lse = -inf`（它的输出可能是任何值）。返回 `(out, lse)`：A、B 合起来的注意力（与输入
    同 `dtype`）及其 fp32 LSE；两部分都为空时 `out = 0`、`lse = -inf`，绝不是 NaN。"""
    raise NotImplementedError("write merge_attn_states")
