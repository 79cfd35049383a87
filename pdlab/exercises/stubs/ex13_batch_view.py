from pdlab.sim.costs import Row, step_cost  # noqa: F401 - what pdlab sim prices a step with
# zh: noqa: F401 - pdlab sim 给一步计价用的


def batch_view(model, profile, rows, routing):
    """One step of D's batch as pdlab sim sees it. ``rows``: one ``(num_computed_tokens,
    prefill_len)`` per request, each scheduling one token; ``routing``: "v2" (Model Runner
    V2, the default), "pcp" (V2 with prefill context parallelism) or "v1". Return
    ``(decode_graph_eligible, step_time_s)``: whether the step replays the full decode CUDA
    graph, and its modelled time, ``step_cost(model, decode_rows, prefill_rows,
    eligible).time_s(profile)`` with ``Row(context)`` for each row."""
    # zh: """pdlab sim 眼中 D 批次的一步。`rows`：每个请求一个
    # zh: `(num_computed_tokens, prefill_len)`，各调度 1 个 token；`routing`："v2"（Model Runner V2，
    # zh: 默认）、"pcp"（开启预填充上下文并行的 V2）或 "v1"。返回
    # zh: `(decode_graph_eligible, step_time_s)`：这一步是否重放完整解码 CUDA graph，以及它的模型化
    # zh: 时间，即 `step_cost(model, decode_rows, prefill_rows, eligible).time_s(profile)`，每行一个
    # zh: `Row(context)`。"""
    raise NotImplementedError("write batch_view")
