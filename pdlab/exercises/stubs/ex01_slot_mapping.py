def slot_mapping(
    block_table: list[list[int]],
    num_computed_tokens: list[int],
    query_lens: list[int],
    block_size: int,
) -> list[int]:
    """The cache slot of every token this step computes, requests in batch order.

    Request i computes positions num_computed_tokens[i] .. num_computed_tokens[i] +
    query_lens[i] - 1; block_table[i] lists the ids of its blocks, in order (the row may be
    padded with zeros after its last block). Return one slot per token, in that order."""
    # zh: """本步计算的每个 token 的缓存槽，按批内请求的顺序。
    # zh:
    # zh: 请求 i 计算位置 num_computed_tokens[i] .. num_computed_tokens[i] + query_lens[i] - 1；
    # zh: block_table[i] 按顺序列出它的块 id（这一行在最后一块之后可能补零）。按这个顺序每个
    # zh: token 返回一个槽。"""
    raise NotImplementedError("write slot_mapping")
