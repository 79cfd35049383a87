import dataclasses

from pdlab.disagg.designs import HandOff

# D's first step for an N = 13 prompt, under each design: (num_computed_tokens before the
# step, tokens scheduled in it, is_prefilling).
# zh: N = 13 的提示词在每种设计下 D 的第一步：(这一步之前的 num_computed_tokens,
# zh: 这一步调度的 token 数, is_prefilling)。
PREDICTIONS = {
    "recompute": (12, 1, True),  # the last prompt token again, for its logits
    # zh: 为了 logits，把最后一个提示词 token 再算一次
    "first_token": (13, 1, False),  # P's token, decoded over all 13
    # zh: P 的 token，基于全部 13 个 token 解码
    "append_prompt": (13, 1, True),  # P's token is prompt token 14: still in the prompt
    # zh: P 的 token 是第 14 个提示词 token：仍在提示词中
    "hidden_state": (13, 1, False),  # token 1 came from lm_head(h); this decodes token 2
    # zh: 第 1 个 token 来自 `lm_head(h)`；这一步解码第 2 个
}


def hand_off(mode, prompt, sampling_params, p_tokens, kv_transfer_params, p_step, max_model_len):
    prompt, sp = list(prompt), sampling_params
    # Nothing of P's token travels: D computes token 1 (from the K/V, or from P's hidden
    # state, which is already in the params).
    # zh: P 的 token 什么也不传：D 自己算出第 1 个 token（由 K/V 算，或由 P 的隐藏状态算，
    # zh: 它已经在参数里了）。
    if kv_transfer_params is None or mode in ("recompute", "hidden_state") or not p_tokens:
        return HandOff(prompt, sp, kv_transfer_params)
    t = p_tokens[0]
    # P's token may be the whole answer: then D is never asked.
    # zh: P 的 token 可能就是全部回答：那就根本不请求 D。
    if t in sp.stop_token_ids:
        return HandOff(prompt, sp, None, [t], True, "stop")
    if sp.max_tokens == 1 or len(prompt) + 1 >= max_model_len:
        return HandOff(prompt, sp, None, [t], True, "length")
    params = dict(kv_transfer_params, first_token_step=p_step)
    if mode == "first_token":
        # D takes the token as its first output and decodes the next one over all N.
        # zh: D 把这个 token 当作它的第一个输出，并基于全部 N 个 token 解码下一个。
        return HandOff(prompt, sp, dict(params, first_token_ids=[t]))
    # append_prompt: the token becomes prompt token N + 1, so D owes one token fewer and
    # the proxy puts P's token in front of D's.
    # zh: append_prompt：这个 token 成为第 N + 1 个提示词 token，所以 D 少生成一个 token，
    # zh: 代理把 P 的 token 放在 D 的 token 前面。
    rest = dataclasses.replace(sp, max_tokens=sp.max_tokens - 1)
    return HandOff([*prompt, t], rest, params, [t])
