from pdlab.kv_cache.block_hash import hash_block_tokens


def get_computed_blocks(self, request):
    bs = self.block_size
    tokens = request.all_token_ids
    # At least the last token must run again: its final hidden state gives the logits.
    max_blocks = (request.num_tokens - 1) // bs
    blocks, parent = [], None
    for i in range(max_blocks):
        block_tokens = tokens[i * bs : (i + 1) * bs]
        # The hash chains the previous block's: equal hashes mean equal prefixes.
        parent = hash_block_tokens(parent, block_tokens)
        block = self.block_pool.get_cached_block(parent, block_tokens)
        if block is None:
            break
        blocks.append(block)
    return blocks, len(blocks) * bs
