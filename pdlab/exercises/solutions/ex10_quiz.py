def answers() -> dict:
    return {
        # K/V of all 13 tokens arrived, but the logits need the last one's hidden state.
        "d_num_computed_tokens": 12,
        # Yes: one, the last prompt token, run again for its logits.
        "d_prompt_tokens_computed": 1,
        # 12 < 13: it is still in its prompt.
        "d_is_prefilling": True,
        # The MLA builder treats short extends as decodes unless PCP is on.
        "d_forward_default": "forward_mqa",
        "d_forward_pcp2": "forward_mha",
        # Without the params D knows of no remote K/V: it prefills everything.
        "d_prompt_tokens_computed_without_params": 13,
        # Same weights, greedy decoding, the same numbers up to rounding.
        "same_tokens_as_colocated": True,
    }
