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
    # zh: """D 的调度器类 `Scheduler` 的方法，等待队列循环每接纳一个请求就调用一次：这一行调度多少
    # zh: 个 token。不需要补齐时原样返回 `num_new_tokens`，需要时返回 `1 + K`（调度器会补上 K 个
    # zh: 占位草稿），补齐后的行放不进 `token_budget` 时返回 None（等待队列循环随即停止）。
    # zh:
    # zh: 可用：`self.num_spec_tokens`（K，不开投机解码时为 0）、
    # zh: `self.num_sampled_tokens_per_step`（1）、`self.max_model_len`；
    # zh: `prefill_scheduled`：本步已调度的某个运行中的行还在预填充中途；
    # zh: `any_scheduled`：本步已经调度了某一行。"""
    raise NotImplementedError("write _pad_spec_decode")
