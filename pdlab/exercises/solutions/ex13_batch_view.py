from pdlab.sim.costs import Row, step_cost


def batch_view(model, profile, rows, routing):
    use_pcp = routing == "pcp"
    # Each row schedules one token; it is still in its prompt while computed < prefill_len.
    # zh: 每行调度一个 token；`computed < prefill_len` 时它仍在提示词中。
    prefilling = [c < plen for c, plen in rows]
    if routing == "v1":
        # V1's full decode graph wants a uniform batch of 1 + K-token rows: with no drafts,
        # one token each, as every row here is.
        # zh: V1 的完整 decode CUDA graph 要的是每行 1 + K 个 token 的均匀解码批次：没有草稿时
        # zh: 每行一个 token，这里每一行都是。
        eligible = bool(rows)
    elif use_pcp:
        # V2 under PCP: no prefill_runs_as_decode, so any row in its prompt breaks the graph.
        # zh: PCP 下的 V2：没有 prefill_runs_as_decode，所以任何仍在提示词中的行都让这一步
        # zh: 用不上 CUDA graph。
        eligible = not any(prefilling)
    else:
        # V2: a prompt row of one token over existing context runs as a decode.
        # zh: V2：已有上下文之上只有一个 token 的提示词行按 decode 行运行。
        eligible = all(not pf or c > 0 for (c, _), pf in zip(rows, prefilling))
    # The MLA builder: treat_short_extends_as_decodes = not use_pcp. Under PCP a row in its
    # prompt takes forward_mha; otherwise every one-token row is a decode (forward_mqa).
    # zh: MLA 的 builder：`treat_short_extends_as_decodes = not use_pcp`。PCP 下仍在提示词中的行
    # zh: 走 forward_mha；否则每个只有一个 token 的行都是 decode 行（forward_mqa）。
    decodes = [Row(c) for (c, _), pf in zip(rows, prefilling) if not (use_pcp and pf)]
    prefills = [Row(c) for (c, _), pf in zip(rows, prefilling) if use_pcp and pf]
    return eligible, step_cost(model, decodes, prefills, eligible).time_s(profile)
