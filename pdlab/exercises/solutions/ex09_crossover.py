def mla_forms_flops(cfg, query_len: int, context_len: int) -> tuple[float, float]:
    h, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    n, v, q, s = cfg.qk_nope_head_dim, cfg.v_head_dim, query_len, context_len
    pairs = q * s + q * (q + 1) / 2  # every cached key, and causal among the new tokens
    proj = 2.0 * L * h * (n + v)  # kv_b_proj for one token: W_UK and W_UV together
    # Naive: up-project every key (cached and new); a pair costs (qk + v) per head.
    naive = (s + q) * proj + pairs * 2.0 * h * (n + R + v)
    # Absorbed: W_UK and W_UV per query instead; a pair costs (L + R) + L per head.
    absorbed = q * proj + pairs * 2.0 * h * ((L + R) + L)
    return naive, absorbed
