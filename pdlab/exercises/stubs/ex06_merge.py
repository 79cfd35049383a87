import torch


def merge_attn_states(
    out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Join two attention results over disjoint key sets A and B.

    ``out_a``, ``out_b``: ``[tokens, heads, head_dim]``; ``lse_a``, ``lse_b``: fp32
    ``[tokens, heads]``, the natural-log log-sum-exp of each part's scaled scores. A part that
    saw no key has ``lse = -inf`` (its output may hold anything). Return ``(out, lse)``: the
    attention over A and B together, in the inputs' dtype, and its fp32 LSE; when both parts
    are empty, ``out = 0`` and ``lse = -inf``, never NaN."""
    # zh: """合并不相交的 key 集合 A、B 上的两个注意力结果。
    # zh:
    # zh: `out_a`、`out_b`：`[tokens, heads, head_dim]`；`lse_a`、`lse_b`：fp32
    # zh: `[tokens, heads]`，各部分缩放后分数的自然对数 log-sum-exp。没有看到任何 key 的部分
    # zh: `lse = -inf`（它的输出可能是任何值）。返回 `(out, lse)`：A、B 合起来的注意力（与输入
    # zh: 同 `dtype`）及其 fp32 LSE；两部分都为空时 `out = 0`、`lse = -inf`，绝不是 NaN。"""
    raise NotImplementedError("write merge_attn_states")
