def slot_mapping(
    block_table: list[list[int]],
    num_computed_tokens: list[int],
    query_lens: list[int],
    block_size: int,
) -> list[int]:
    slots = []
    for blocks, start, n in zip(block_table, num_computed_tokens, query_lens):
        for pos in range(start, start + n):
            # The position's block in the request's table, then its offset in the block.
            # zh: 先取该位置在请求块表中对应的块，再加上它在块内的偏移。
            slots.append(blocks[pos // block_size] * block_size + pos % block_size)
    return slots
