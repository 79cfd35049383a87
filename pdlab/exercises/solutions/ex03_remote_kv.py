def _update_waiting_for_remote_kv(self, request) -> bool:
    rid = request.request_id
    if rid not in self.finished_recving_kv_req_ids:
        return False
    self.finished_recving_kv_req_ids.remove(rid)
    # A failed load (policy "recompute") is marked here too; num_computed_tokens was
    # already cut to the tokens before the first failed block.
    self.failed_recving_kv_req_ids.discard(rid)
    # The blocks hold data now: hash them so later requests can hit them.
    self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)
    # K/V of every prompt token arrived, but not the last token's final hidden state, and
    # the first output token's logits need it: run the last prompt token again. K/V that
    # arrived short of the prompt leave the last token to compute anyway.
    if request.num_computed_tokens == request.num_tokens:
        request.num_computed_tokens = request.num_tokens - 1
    return True
