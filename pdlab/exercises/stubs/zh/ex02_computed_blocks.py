from pdlab.kv_cache.block_hash import hash_block_tokens  # noqa: F401 - 供你使用


def get_computed_blocks(self, request):
    """KVCacheManager 的方法（pdlab/kv_cache/manager.py）：存有 `request` 某个前缀的已缓存块，
    以及它们覆盖的 token 数，返回 `(blocks, num_tokens)`。

    可用：`self.block_size`；`request.all_token_ids`（它的 token）和
    `request.num_tokens`；`hash_block_tokens(parent_hash, block_token_ids)`（第一块的
    `parent_hash` 为 None）；`self.block_pool.get_cached_block(block_hash, block_token_ids)`，
    即具有该哈希和 token 的已缓存块，没有则为 None。"""
    raise NotImplementedError("write get_computed_blocks")
