def split_decodes_and_prefills(
    query_lens: list[int],
    is_prefilling: list[bool],
    decode_threshold: int = 1,
    require_uniform: bool = False,
    treat_short_extends_as_decodes: bool = True,
) -> tuple[int, int, int, int]:
    # Only short rows (with require_uniform, only under threshold 1): all decodes, padding
    # rows wherever they are; upstream returns before looking at any row.
    # zh: 只有短行（require_uniform 时只在阈值为 1 时）：全部是 decode 行，填充行无论在哪里
    # zh: 都一样；上游不看任何一行就直接返回。
    if (
        max(query_lens, default=0) <= decode_threshold
        and (not require_uniform or decode_threshold <= 1)
        and treat_short_extends_as_decodes
    ):
        return len(query_lens), 0, sum(query_lens), 0

    def is_prefill(i: int) -> bool:
        q = query_lens[i]
        if require_uniform:
            # Every decode must have the first row's query length; a 0 is padding.
            # zh: 每个 decode 行的 query 长度都必须等于第一行的；0 是填充。
            prefill = q > decode_threshold or (q != query_lens[0] and q != 0)
        else:
            prefill = q > decode_threshold
        # The switch: only when short extends are NOT treated as decodes does a row still
        # in its prompt count as a prefill whatever its length.
        # zh: 开关：只有在不把短 extend 当作 decode 行时，仍在提示词中的行才不论长度都算作
        # zh: prefill 行。
        return prefill or (not treat_short_extends_as_decodes and is_prefilling[i])

    num_decodes = next((i for i in range(len(query_lens)) if is_prefill(i)), len(query_lens))
    num_decode_tokens = sum(query_lens[:num_decodes])
    return (
        num_decodes,
        len(query_lens) - num_decodes,
        num_decode_tokens,
        sum(query_lens) - num_decode_tokens,
    )
