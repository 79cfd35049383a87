def _pad_spec_decode(
    self, num_new_tokens, num_computed_tokens, token_budget, prefill_scheduled, any_scheduled
):
    k = self.num_spec_tokens
    # Only a row of one new token, with speculative decoding on, and never beside a running
    # row that is mid-prefill; a fresh one-token prompt only when some row already runs.
    if not (
        k > 0
        and self.num_sampled_tokens_per_step > 0
        and num_new_tokens == 1
        and not prefill_scheduled
        and (any_scheduled or num_computed_tokens > 0)
    ):
        return num_new_tokens
    padded = 1 + k  # the shape of every verifying row: one token and K placeholders
    # The sampled token must still have a position below max_model_len.
    if num_computed_tokens + padded + self.num_sampled_tokens_per_step > self.max_model_len:
        return num_new_tokens
    if padded > token_budget:
        return None  # upstream would rather not schedule it than schedule it unpadded
    return padded
