def answers() -> dict:
    """Your answers, each to be checked by running the engine. A P/D pair on the tiny model,
    block_size 4, a prompt of N = 13 tokens, default settings unless a question says not."""
    # zh: """你的答案，每一项都通过运行引擎来检查。tiny 模型上的 P/D 对，block_size 4，N = 13 个
    # zh: token 的提示词，除非题目另有说明均为默认设置。"""
    return {
        # vllm-project/vllm#28566: once P's K/V have arrived, D's num_computed_tokens is:
        # zh: vllm-project/vllm#28566：P 的 K/V 到达后，D 的 num_computed_tokens 是：
        "d_num_computed_tokens": None,  # an int
        # zh: 整数
        # ai-dynamo/dynamo#850, "D also prefills, is that normal?": how many prompt tokens
        # does D compute?
        # zh: ai-dynamo/dynamo#850，“D 也在做预填充，正常吗？”：D 计算多少个提示词 token？
        "d_prompt_tokens_computed": None,  # an int
        # zh: 整数
        # vllm-project/vllm#28566: is D's first step is_prefilling?
        # zh: vllm-project/vllm#28566：D 的第一步 is_prefilling 吗？
        "d_is_prefilling": None,  # True or False
        # zh: True 或 False
        # Which MLA path runs D's first step by default: "forward_mqa" or "forward_mha"?
        # zh: 默认设置下 D 的第一步走哪条 MLA 路径："forward_mqa" 还是 "forward_mha"？
        "d_forward_default": None,
        # ... and with prefill_context_parallel_size = 2?
        # zh: ……prefill_context_parallel_size = 2 时呢？
        "d_forward_pcp2": None,
        # vllm-project/vllm#26896: if the proxy gives D the request without P's
        # kv_transfer_params, how many prompt tokens does D compute?
        # zh: vllm-project/vllm#26896：如果代理把请求交给 D 时没有带 P 的 kv_transfer_params，
        # zh: D 计算多少个提示词 token？
        "d_prompt_tokens_computed_without_params": None,  # an int
        # zh: 整数
        # Does the pair generate exactly the colocated engine's tokens?
        # zh: P/D 对生成的 token 与非分离引擎完全相同吗？
        "same_tokens_as_colocated": None,  # True or False
        # zh: True 或 False
    }
