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
    # zh: """解码侧：对状态为 WAITING_FOR_REMOTE_KVS 的请求，每次 schedule() 都会调用。K/V 还在路上时
    # zh: 返回 False。到达后（请求 id 在 `self.finished_recving_kv_req_ids` 中）：把它从该集合中
    # zh: 移除（加载失败时它也在 `self.failed_recving_kv_req_ids` 中，也要移除），缓存它的块
    # zh: （`self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)`），把
    # zh: `request.num_computed_tokens` 设成 D 应当视为已计算的数量，然后返回 True。
    # zh:
    # zh: `request.num_computed_tokens` 已经把传来的 token 算进去了（完整提示词为 N，加载失败后
    # zh: 更少）；`request.num_tokens` 为 N。"""
    raise NotImplementedError("write _update_waiting_for_remote_kv")
