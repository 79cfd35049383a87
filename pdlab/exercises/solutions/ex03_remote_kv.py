def _update_waiting_for_remote_kv(self, request) -> bool:
    rid = request.request_id
    if rid not in self.finished_recving_kv_req_ids:
        return False
    self.finished_recving_kv_req_ids.remove(rid)
    # A failed load (policy "recompute") is marked here too; num_computed_tokens was
    # already cut to the tokens before the first failed block.
    # zh: 加载失败（策略 "recompute"）时请求也记在这里；num_computed_tokens 已经截到第一个
    # zh: 失败的块之前的 token。
    self.failed_recving_kv_req_ids.discard(rid)
    # The blocks hold data now: hash them so later requests can hit them.
    # zh: 这些块现在有数据了：给它们算哈希，之后的请求才能命中。
    self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)
    # K/V of every prompt token arrived, but not the last token's final hidden state, and
    # the first output token's logits need it: run the last prompt token again. K/V that
    # arrived short of the prompt leave the last token to compute anyway.
    # zh: 每个提示词 token 的 K/V 都到了，但最后一个 token 的最终隐藏状态没有传来，而第一个输出
    # zh: token 的 logits 需要它：把最后一个提示词 token 再算一次。K/V 没传满整个提示词时，
    # zh: 最后一个 token 本来就要计算。
    if request.num_computed_tokens == request.num_tokens:
        request.num_computed_tokens = request.num_tokens - 1
    return True
