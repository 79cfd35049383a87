from pdlab.sim.costs import Row, step_cost  # noqa: F401 - pdlab sim 给一步计价用的


def batch_view(model, profile, rows, routing):
    """pdlab sim 眼中 D 批次的一步。`rows`：每个请求一个
    `(num_computed_tokens, prefill_len)`，各调度 1 个 token；`routing`："v2"（Model Runner V2，
    默认）、"pcp"（开启预填充上下文并行的 V2）或 "v1"。返回
    `(decode_graph_eligible, step_time_s)`：这一步是否重放完整解码 CUDA graph，以及它的模型化
    时间，即 `step_cost(model, decode_rows, prefill_rows, eligible).time_s(profile)`，每行一个
    `Row(context)`。"""
    raise NotImplementedError("write batch_view")
