def decode_flags(
    is_prefilling: list[bool],
    num_scheduled_tokens: list[int],
    num_computed_prefill_tokens: list[int],
    use_pcp: bool,
) -> tuple[list[bool] | None, bool]:
    """Model Runner V2, for one step's rows in batch order: ``(prefill_runs_as_decode,
    decode_graph_eligible)``.

    ``prefill_runs_as_decode`` has one flag per row, or is None where V2 computes none
    (under prefill context parallelism, ``use_pcp``). ``decode_graph_eligible``: whether the
    step may replay the full decode CUDA graph."""
    raise NotImplementedError("write decode_flags")
