from pdlab.sim.costs import Row, step_cost


def batch_view(model, profile, rows, routing):
    use_pcp = routing == "pcp"
    # Each row schedules one token; it is still in its prompt while computed < prefill_len.
    prefilling = [c < plen for c, plen in rows]
    if routing == "v1":
        # V1's full decode graph wants a uniform batch of one-token rows: every row here.
        eligible = bool(rows)
    elif use_pcp:
        # V2 under PCP: no prefill_runs_as_decode, so any row in its prompt breaks the graph.
        eligible = not any(prefilling)
    else:
        # V2: a prompt row of one token over existing context runs as a decode.
        eligible = all(not pf or c > 0 for (c, _), pf in zip(rows, prefilling))
    # The MLA builder: treat_short_extends_as_decodes = not use_pcp. Under PCP a row in its
    # prompt takes forward_mha; otherwise every one-token row is a decode (forward_mqa).
    decodes = [Row(c) for (c, _), pf in zip(rows, prefilling) if not (use_pcp and pf)]
    prefills = [Row(c) for (c, _), pf in zip(rows, prefilling) if use_pcp and pf]
    return eligible, step_cost(model, decodes, prefills, eligible).time_s(profile)
