def decode_flags(
    is_prefilling: list[bool],
    num_scheduled_tokens: list[int],
    num_computed_prefill_tokens: list[int],
    use_pcp: bool,
) -> tuple[list[bool] | None, bool]:
    if use_pcp:
        # PCP splits every still-prefilling row across ranks: only a batch without one
        # is a decode batch.
        # zh: PCP 把每个仍在预填充的行切分到各个 rank 上：只有不含这种行的批次才是解码批次。
        return None, not any(is_prefilling)
    # One new prompt token over existing context runs as a decode.
    # zh: 在已有上下文之上只有一个新的提示词 token 时，这一行按 decode 行运行。
    runs_as_decode = [
        pf and q == 1 and c > 0
        for pf, q, c in zip(is_prefilling, num_scheduled_tokens, num_computed_prefill_tokens)
    ]
    eligible = all(rd or not pf for rd, pf in zip(runs_as_decode, is_prefilling))
    return runs_as_decode, eligible
