def mla_forms_flops(cfg, query_len: int, context_len: int) -> tuple[float, float]:
    """``(naive, absorbed)`` attention FLOPs of one layer for ``query_len`` new tokens of
    one request over ``context_len`` cached tokens, causal among the new tokens.

    ``cfg`` has ``num_attention_heads`` (H), ``kv_lora_rank`` (L), ``qk_rope_head_dim`` (R),
    ``qk_nope_head_dim``, ``v_head_dim``. A matrix product [m, k] @ [k, n] costs 2 m n k
    FLOPs. Count only what differs between the two forms (leave out q_proj, o_proj, ...)."""
    # zh: """一个请求 `query_len` 个新 token 在 `context_len` 个已缓存 token 之上（新 token 之间
    # zh: 因果）时，一层注意力的 `(naive, absorbed)` FLOPs。
    # zh:
    # zh: `cfg` 有 `num_attention_heads`（H）、`kv_lora_rank`（L）、`qk_rope_head_dim`（R）、
    # zh: `qk_nope_head_dim`、`v_head_dim`。矩阵乘 [m, k] @ [k, n] 计 2 m n k FLOPs。只计两种
    # zh: 形式之间不同的部分（不计 q_proj、o_proj 等）。"""
    raise NotImplementedError("write mla_forms_flops")
