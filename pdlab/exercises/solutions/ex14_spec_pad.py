def _pad_spec_decode(
    self, num_new_tokens, num_computed_tokens, token_budget, prefill_scheduled, any_scheduled
):
    k = self.num_spec_tokens
    # Only a row of one new token, with speculative decoding on, and never beside a running
    # row that is mid-prefill; a fresh one-token prompt only when some row already runs.
    # zh: 只补齐新 token 恰为一个的行，且要开启投机解码，也绝不挨着正处于预填充中途的运行中的行；
    # zh: 全新的单 token 提示词只在已有某行在运行时才补齐。
    if not (
        k > 0
        and self.num_sampled_tokens_per_step > 0
        and num_new_tokens == 1
        and not prefill_scheduled
        and (any_scheduled or num_computed_tokens > 0)
    ):
        return num_new_tokens
    padded = 1 + k  # the shape of every verifying row: one token and K placeholders
    # zh: 每个验证行的形状：1 个 token 加 K 个占位草稿
    # The sampled token must still have a position below max_model_len.
    # zh: 采样出的 token 必须仍有一个小于 max_model_len 的位置。
    if num_computed_tokens + padded + self.num_sampled_tokens_per_step > self.max_model_len:
        return num_new_tokens
    if padded > token_budget:
        return None  # upstream would rather not schedule it than schedule it unpadded
        # zh: 上游宁可不调度它，也不会不补齐就调度它
    return padded
