import dataclasses  # noqa: F401 - dataclasses.replace(sampling_params, ...) may help

from pdlab.disagg.designs import HandOff  # noqa: F401 - what hand_off returns

# First predict: D's first step for an N = 13 prompt under each design, as
# (num_computed_tokens before the step, tokens scheduled in it, is_prefilling).
PREDICTIONS = {
    "recompute": None,
    "first_token": None,
    "append_prompt": None,
    "hidden_state": None,
}


def hand_off(mode, prompt, sampling_params, p_tokens, kv_transfer_params, p_step, max_model_len):
    """The proxy's step 2: P finished ``prompt`` with ``p_tokens`` (its one sampled token)
    and ``kv_transfer_params`` (where its blocks are; None when P could not hand over).
    Return ``HandOff(prompt, sampling_params, kv_transfer_params, prefix=[], done=False,
    finish_reason=None)``: what D is sent, and the tokens the proxy puts before D's.
    ``done=True`` answers with ``prefix`` alone (D is never asked). The designs:
    "recompute" and "hidden_state" send nothing of P's token; "first_token" sends it in
    the params as ``first_token_ids=[t]``; "append_prompt" appends it to D's prompt."""
    raise NotImplementedError("write PREDICTIONS, then hand_off")
