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
    # zh: """Model Runner V2，对一步中按批内顺序排列的各行：`(prefill_runs_as_decode,
    # zh: decode_graph_eligible)`。
    # zh:
    # zh: `prefill_runs_as_decode` 每行一个标志；V2 不计算它时为 None（预填充上下文并行下，
    # zh: `use_pcp`）。`decode_graph_eligible`：这一步能否重放完整解码 CUDA graph。"""
    raise NotImplementedError("write decode_flags")
