def mla_forms_flops(cfg, query_len: int, context_len: int) -> tuple[float, float]:
    """``(naive, absorbed)`` attention FLOPs of one layer for ``query_len`` new tokens of
    one request over ``context_len`` cached tokens, causal among the new tokens.

    ``cfg`` has ``num_attention_heads`` (H), ``kv_lora_rank`` (L), ``qk_rope_head_dim`` (R),
    ``qk_nope_head_dim``, ``v_head_dim``. A matrix product [m, k] @ [k, n] costs 2 m n k
    FLOPs. Count only what differs between the two forms (leave out q_proj, o_proj, ...)."""
    raise NotImplementedError("write mla_forms_flops")
