from pdlab.engine.core.kv_cache_utils import hash_block_tokens  # noqa: F401 - for you to use
# zh: noqa: F401 - 供你使用


def get_computed_blocks(self, request):
    """A method of KVCacheManager: the cached blocks that hold a
    prefix of ``request``, and how many tokens they cover, as ``(blocks, num_tokens)``.

    Available: ``self.block_size``; ``request.all_token_ids`` (its tokens) and
    ``request.num_tokens``; ``hash_block_tokens(parent_hash, block_token_ids)`` (the parent
    of the first block is None); ``self.block_pool.get_cached_block(block_hash,
    block_token_ids)``, the cached block with that hash and tokens, or None."""
    # zh: """KVCacheManager 的方法：存有 `request` 某个前缀的已缓存块，
    # zh: 以及它们覆盖的 token 数，返回 `(blocks, num_tokens)`。
    # zh:
    # zh: 可用：`self.block_size`；`request.all_token_ids`（它的 token）和
    # zh: `request.num_tokens`；`hash_block_tokens(parent_hash, block_token_ids)`（第一块的
    # zh: `parent_hash` 为 None）；`self.block_pool.get_cached_block(block_hash, block_token_ids)`，
    # zh: 即具有该哈希和 token 的已缓存块，没有则为 None。"""
    raise NotImplementedError("write get_computed_blocks")
