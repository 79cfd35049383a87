def answers() -> dict:
    return {
        # K/V of all 13 tokens arrived, but the logits need the last one's hidden state.
        # zh: 13 个 token 的 K/V 都到了，但 logits 需要最后一个 token 的隐藏状态。
        "d_num_computed_tokens": 12,
        # Yes: one, the last prompt token, run again for its logits.
        # zh: 是：1 个，即最后一个提示词 token，为了它的 logits 再算一次。
        "d_prompt_tokens_computed": 1,
        # 12 < 13: it is still in its prompt.
        # zh: 12 < 13：它仍在提示词中。
        "d_is_prefilling": True,
        # The MLA builder treats short extends as decodes unless PCP is on.
        # zh: 除非开启 PCP，MLA 的 builder 都把短 extend 当作 decode 行。
        "d_forward_default": "forward_mqa",
        "d_forward_pcp2": "forward_mha",
        # Without the params D knows of no remote K/V: it prefills everything.
        # zh: 没有这些参数，D 不知道有远端 K/V：它对整个提示词做预填充。
        "d_prompt_tokens_computed_without_params": 13,
        # Same weights, greedy decoding, the same numbers up to rounding.
        # zh: 权重相同，贪心解码，数值在舍入误差内相同。
        "same_tokens_as_colocated": True,
    }
