from pdlab.sim.costs import Row, step_cost  # noqa: F401 - what pdlab sim prices a step with


def batch_view(model, profile, rows, routing):
    """One step of D's batch as pdlab sim sees it. ``rows``: one ``(num_computed_tokens,
    prefill_len)`` per request, each scheduling one token; ``routing``: "v2" (Model Runner
    V2, the default), "pcp" (V2 with prefill context parallelism) or "v1". Return
    ``(decode_graph_eligible, step_time_s)``: whether the step replays the full decode CUDA
    graph, and its modelled time, ``step_cost(model, decode_rows, prefill_rows,
    eligible).time_s(profile)`` with ``Row(context)`` for each row."""
    raise NotImplementedError("write batch_view")
