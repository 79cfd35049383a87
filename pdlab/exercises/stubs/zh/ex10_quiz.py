def answers() -> dict:
    """你的答案，每一项都通过运行引擎来检查。tiny 模型上的 P/D 对，block_size 4，N = 13 个
    token 的提示词，除非题目另有说明均为默认设置。"""
    return {
        # vllm-project/vllm#28566：P 的 K/V 到达后，D 的 num_computed_tokens 是：
        "d_num_computed_tokens": None,  # 整数
        # ai-dynamo/dynamo#850，“D 也在做预填充，正常吗？”：D 计算多少个提示词 token？
        "d_prompt_tokens_computed": None,  # 整数
        # vllm-project/vllm#28566：D 的第一步 is_prefilling 吗？
        "d_is_prefilling": None,  # True 或 False
        # 默认设置下 D 的第一步走哪条 MLA 路径："forward_mqa" 还是 "forward_mha"？
        "d_forward_default": None,
        # ……prefill_context_parallel_size = 2 时呢？
        "d_forward_pcp2": None,
        # vllm-project/vllm#26896：如果代理把请求交给 D 时没有带 P 的 kv_transfer_params，
        # D 计算多少个提示词 token？
        "d_prompt_tokens_computed_without_params": None,  # 整数
        # P/D 对生成的 token 与非分离引擎完全相同吗？
        "same_tokens_as_colocated": None,  # True 或 False
    }
