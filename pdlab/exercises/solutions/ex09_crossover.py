def mla_forms_flops(cfg, query_len: int, context_len: int) -> tuple[float, float]:
    h, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    n, v, q, s = cfg.qk_nope_head_dim, cfg.v_head_dim, query_len, context_len
    pairs = q * s + q * (q + 1) / 2  # every cached key, and causal among the new tokens
    # zh: 每个已缓存的 key，加上新 token 之间的因果对
    proj = 2.0 * L * h * (n + v)  # kv_b_proj for one token: W_UK and W_UV together
    # zh: 一个 token 的 kv_b_proj：W_UK 与 W_UV 合计
    # Naive: up-project every key (cached and new); a pair costs (qk + v) per head.
    # zh: 朴素形式：每个 key（已缓存的和新的）都要上投影；每对在每个头上花 `(qk + v)`。
    naive = (s + q) * proj + pairs * 2.0 * h * (n + R + v)
    # Absorbed: W_UK and W_UV per query instead; a pair costs (L + R) + L per head.
    # zh: 吸收形式：改为对每个 query 乘 W_UK 和 W_UV；每对在每个头上花 `(L + R) + L`。
    absorbed = q * proj + pairs * 2.0 * h * ((L + R) + L)
    return naive, absorbed
