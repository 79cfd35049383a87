def _update_waiting_for_remote_kv(self, request) -> bool:
    """D side: called at each schedule() for a request whose status is
    WAITING_FOR_REMOTE_KVS. Return False while its K/V are still arriving. Once they have
    arrived (the request id is in ``self.finished_recving_kv_req_ids``): take it out of that
    set (and out of ``self.failed_recving_kv_req_ids``, where a failed load also put it),
    cache its blocks (``self.kv_cache_manager.cache_blocks(request,
    request.num_computed_tokens)``), set ``request.num_computed_tokens`` to what D must
    treat as computed, and return True.

    ``request.num_computed_tokens`` already counts the transferred tokens (N for a whole
    prompt, fewer after a failed load); ``request.num_tokens`` is N."""
    raise NotImplementedError("write _update_waiting_for_remote_kv")
