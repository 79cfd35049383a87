def _pad_spec_decode(
    self, num_new_tokens, num_computed_tokens, token_budget, prefill_scheduled, any_scheduled
):
    """A method of D's Scheduler, called by the waiting loop for each request it admits:
    how many tokens the row gets. ``num_new_tokens`` unchanged when no padding applies,
    ``1 + K`` when it does (the scheduler adds the ``K`` placeholder drafts), None when the
    padded row does not fit ``token_budget`` (the waiting loop then stops).

    Available: ``self.num_spec_tokens`` (K, 0 without speculative decoding),
    ``self.num_sampled_tokens_per_step`` (1), ``self.max_model_len``;
    ``prefill_scheduled``: a running row scheduled this step is mid-prefill;
    ``any_scheduled``: some row is already scheduled this step."""
    raise NotImplementedError("write _pad_spec_decode")
