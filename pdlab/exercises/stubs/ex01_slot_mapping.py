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
    raise NotImplementedError("write slot_mapping")
