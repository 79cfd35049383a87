from pdlab.kv_cache.block_hash import hash_block_tokens


def get_computed_blocks(self, request):
    """A method of KVCacheManager (pdlab/kv_cache/manager.py): the cached blocks that hold a
    prefix of ``request``, and how many tokens they cover, as ``(blocks, num_tokens)``.

    Available: ``self.block_size``; ``request.all_token_ids`` (its tokens) and
    ``request.num_tokens``; ``hash_block_tokens(parent_hash, block_token_ids)`` (the parent
    of the first block is None); ``self.block_pool.get_cached_block(block_hash,
    block_token_ids)``, the cached block with that hash and tokens, or None."""
    raise NotImplementedError("write get_computed_blocks")
