def answers() -> dict:
    """Your answers, each to be checked by running the engine. A P/D pair on the tiny model,
    block_size 4, a prompt of N = 13 tokens, default settings unless a question says not."""
    return {
        # vllm-project/vllm#28566: once P's K/V have arrived, D's num_computed_tokens is:
        "d_num_computed_tokens": None,  # an int
        # ai-dynamo/dynamo#850, "D also prefills, is that normal?": how many prompt tokens
        # does D compute?
        "d_prompt_tokens_computed": None,  # an int
        # vllm-project/vllm#28566: is D's first step is_prefilling?
        "d_is_prefilling": None,  # True or False
        # Which MLA path runs D's first step by default: "forward_mqa" or "forward_mha"?
        "d_forward_default": None,
        # ... and with prefill_context_parallel_size = 2?
        "d_forward_pcp2": None,
        # vllm-project/vllm#26896: if the proxy gives D the request without P's
        # kv_transfer_params, how many prompt tokens does D compute?
        "d_prompt_tokens_computed_without_params": None,  # an int
        # Does the pair generate exactly the colocated engine's tokens?
        "same_tokens_as_colocated": None,  # True or False
    }
