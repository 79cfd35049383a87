def _pad_spec_decode(
    self, num_new_tokens, num_computed_tokens, token_budget, prefill_scheduled, any_scheduled
):
    """D 的调度器类 `Scheduler` 的方法，等待队列循环每接纳一个请求就调用一次：这一行调度多少
    个 token。不需要补齐时原样返回 `num_new_tokens`，需要时返回 `1 + K`（调度器会补上 K 个
    占位草稿），补齐后的行放不进 `token_budget` 时返回 None（等待队列循环随即停止）。

    可用：`self.num_spec_tokens`（K，不开投机解码时为 0）、
    `self.num_sampled_tokens_per_step`（1）、`self.max_model_len`；
    `prefill_scheduled`：本步已调度的某个运行中的行还在预填充中途；
    `any_scheduled`：本步已经调度了某一行。"""
    raise NotImplementedError("write _pad_spec_decode")
