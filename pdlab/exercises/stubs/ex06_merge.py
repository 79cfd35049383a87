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
    raise NotImplementedError("write merge_attn_states")
