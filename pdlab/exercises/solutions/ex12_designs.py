import dataclasses

from pdlab.disagg.designs import HandOff

# D's first step for an N = 13 prompt, under each design: (num_computed_tokens before the
# step, tokens scheduled in it, is_prefilling).
PREDICTIONS = {
    "recompute": (12, 1, True),  # the last prompt token again, for its logits
    "first_token": (13, 1, False),  # P's token, decoded over all 13
    "append_prompt": (13, 1, True),  # P's token is prompt token 14: still in the prompt
    "hidden_state": (13, 1, False),  # token 1 came from lm_head(h); this decodes token 2
}


def hand_off(mode, prompt, sampling_params, p_tokens, kv_transfer_params, p_step, max_model_len):
    prompt, sp = list(prompt), sampling_params
    # Nothing of P's token travels: D computes token 1 (from the K/V, or from P's hidden
    # state, which is already in the params).
    if kv_transfer_params is None or mode in ("recompute", "hidden_state") or not p_tokens:
        return HandOff(prompt, sp, kv_transfer_params)
    t = p_tokens[0]
    # P's token may be the whole answer: then D is never asked.
    if t in sp.stop_token_ids:
        return HandOff(prompt, sp, None, [t], True, "stop")
    if sp.max_tokens == 1 or len(prompt) + 1 >= max_model_len:
        return HandOff(prompt, sp, None, [t], True, "length")
    params = dict(kv_transfer_params, first_token_step=p_step)
    if mode == "first_token":
        # D takes the token as its first output and decodes the next one over all N.
        return HandOff(prompt, sp, dict(params, first_token_ids=[t]))
    # append_prompt: the token becomes prompt token N + 1, so D owes one token fewer and
    # the proxy puts P's token in front of D's.
    rest = dataclasses.replace(sp, max_tokens=sp.max_tokens - 1)
    return HandOff([*prompt, t], rest, params, [t])
