from pdlab.engine.core.kv_cache_utils import hash_block_tokens


def get_computed_blocks(self, request):
    bs = self.block_size
    tokens = request.all_token_ids
    # At least the last token must run again: its final hidden state gives the logits.
    # zh: 至少最后一个 token 必须重新计算：它的最终隐藏状态给出 logits。
    max_blocks = (request.num_tokens - 1) // bs
    blocks, parent = [], None
    for i in range(max_blocks):
        block_tokens = tokens[i * bs : (i + 1) * bs]
        # The hash chains the previous block's: equal hashes mean equal prefixes.
        # zh: 块哈希链接前一个块的哈希：哈希相同即前缀相同。
        parent = hash_block_tokens(parent, block_tokens)
        block = self.block_pool.get_cached_block(parent, block_tokens)
        if block is None:
            break
        blocks.append(block)
    return blocks, len(blocks) * bs
