def split_decodes_and_prefills(
    query_lens: list[int],
    is_prefilling: list[bool],
    decode_threshold: int = 1,
    require_uniform: bool = False,
    treat_short_extends_as_decodes: bool = True,
) -> tuple[int, int, int, int]:
    """``(num_decodes, num_prefills, num_decode_tokens, num_prefill_tokens)`` for a batch
    already in the runner's order (decode-like rows first). The decodes are the rows before
    the first row that counts as a prefill."""
    # zh: """对已按 model runner 顺序排好（像解码的行在前）的批次，返回 `(num_decodes, num_prefills,
    # zh: num_decode_tokens, num_prefill_tokens)`。decode 行是第一个算作预填充的行之前的那些行。"""
    raise NotImplementedError("write split_decodes_and_prefills")
