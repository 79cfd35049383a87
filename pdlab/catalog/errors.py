"""The catalog's error messages (keys ``err_``): what pdlab raises, in English and Chinese.

An exception carries one of these keys and its values (``pdlab/errors.py``); its English is
the ``en`` template, and ``--lang zh`` renders the ``zh`` one from the same values, spaced by
the glossary's typography. Most messages are one family, ``err_invalid`` (``name=value is
invalid: expected ...``), whose ``allowed`` value is itself a key: ``err_x_`` keys say what
is allowed, ``err_n_`` keys the note in parentheses after it. Identifiers, values, options
and paths stay as they were in both languages (a ``name=value`` in backticks in Chinese).
"""

from __future__ import annotations

TEXT_ERRORS: dict[str, dict[str, str]] = {
    # ---- the families: a value, and what is allowed --------------------------------------
    "err_invalid": {
        "en": "{name}={value!r} is invalid: expected {allowed}",
        "zh": "`{name}={value!r}` 无效：应为 {allowed}",
    },
    "err_invalid_str": {  # a value shown as str(): an int, a number, a tensor's item
        "en": "{name}={value} is invalid: expected {allowed}",
        "zh": "`{name}={value}` 无效：应为 {allowed}",
    },
    "err_option_invalid": {
        "en": "{option} {value} is invalid: expected {allowed}",
        "zh": "{option} {value} 无效：应为 {allowed}",
    },
    "err_value_invalid": {
        "en": "{value!r} is invalid: expected {allowed}",
        "zh": "{value!r} 无效：应为 {allowed}",
    },
    "err_unknown": {
        "en": "{name}={value!r} is unknown: expected {allowed}",
        "zh": "`{name}={value!r}` 未知：应为 {allowed}",
    },
    "err_out_of_range": {
        "en": "{name}={value} is out of range: expected {allowed}",
        "zh": "`{name}={value}` 超出范围：应为 {allowed}",
    },
    "err_contains": {
        "en": "{name} contains {value!r}: expected {allowed}",
        "zh": "`{name}` 含有 {value!r}：应为 {allowed}",
    },
    "err_value_expected": {
        "en": "{value!r}: expected {allowed}",
        "zh": "{value!r}：应为 {allowed}",
    },
    "err_not_int": {"en": "{value!r} is not an integer", "zh": "{value!r} 不是整数"},
    "err_not_number": {"en": "{value!r} is not a number", "zh": "{value!r} 不是数"},
    "err_not": {"en": "{value} is not {allowed}", "zh": "{value} 无效：应为 {allowed}"},
    # ---- what "expected" allows ---------------------------------------------------------
    "err_x_int_ge": {"en": "an integer >= {n}", "zh": "不小于 {n} 的整数"},
    "err_x_int_ge_short": {"en": ">= {n}", "zh": "不小于 {n} 的整数"},
    "err_x_ints_ge": {"en": "integers >= {n}", "zh": "不小于 {n} 的整数"},
    "err_x_int_range": {"en": "an integer from {a} to {b}", "zh": "{a} 到 {b} 之间的整数"},
    "err_x_int_to": {"en": "an integer {a} to {b}", "zh": "{a} 到 {b} 之间的整数"},
    "err_x_even_ge": {"en": "an even integer >= {n}", "zh": "不小于 {n} 的偶数"},
    "err_x_num_gt": {"en": "a number > {n}", "zh": "大于 {n} 的数"},
    "err_x_num_gt_le": {"en": "a number > {a} and <= {b}", "zh": "大于 {a} 且不大于 {b} 的数"},
    "err_x_num_ge": {"en": "a number >= {n}", "zh": "不小于 {n} 的数"},
    "err_x_num_range": {"en": "a number from {a} to {b}", "zh": "{a} 到 {b} 之间的数"},
    "err_x_finite_gt": {"en": "a finite number > {n}", "zh": "大于 {n} 的有限数"},
    "err_x_finite_ge": {"en": "a finite number >= {n}", "zh": "不小于 {n} 的有限数"},
    "err_x_port": {"en": "a port in [{a}, {b}]", "zh": "{a} 到 {b} 之间的端口号"},
    "err_x_prompt_len_ge": {"en": "a prompt length >= {n}", "zh": "不小于 {n} 的提示词长度"},
    "err_x_one_of": {"en": "one of {choices}", "zh": "{choices} 之一"},
    "err_x_or": {"en": "{a} or {b}", "zh": "{a} 或 {b}"},
    "err_x_bool": {"en": "True or False", "zh": "True 或 False"},
    "err_x_bool_none": {"en": "True, False or None", "zh": "True、False 或 None"},
    "err_x_none": {"en": "None", "zh": "None"},
    "err_x_none_or_dict": {"en": "None or a dict", "zh": "None 或 `dict`"},
    "err_x_none_or_int": {"en": "None or an integer", "zh": "None 或整数"},
    "err_x_none_or": {"en": "None or a {t}", "zh": "None 或 {t}"},
    "err_x_a": {"en": "a {t}", "zh": "{t}"},
    "err_x_str": {"en": "a string", "zh": "字符串"},
    "err_x_nonempty_str": {"en": "a non-empty string", "zh": "非空字符串"},
    "err_x_str_or_ids": {"en": "a string or a list of token ids", "zh": "字符串或 token id 列表"},
    "err_x_token_ids": {"en": "a list of token ids", "zh": "token id 列表"},
    "err_x_token_ids_seq": {"en": "a list or tuple of token ids", "zh": "token id 的列表或元组"},
    "err_x_token_ids_ge0": {
        "en": "token ids that are integers >= 0",
        "zh": "不小于 0 的整数 token id",
    },
    "err_x_token_ids_in": {"en": "token ids in {span}", "zh": "{span} 范围内的 token id"},
    "err_x_token_id_in": {"en": "a token id in {span}", "zh": "{span} 范围内的 token id"},
    "err_x_int_token_id_in": {
        "en": "an integer token id in {span}",
        "zh": "{span} 范围内的整数 token id",
    },
    "err_x_block_ids": {"en": "a list of block ids", "zh": "块 id 列表"},
    "err_x_block_ids_in": {"en": "block ids in {span}", "zh": "{span} 范围内的块 id"},
    "err_x_nonempty_block_ids": {"en": "a non-empty list of block ids", "zh": "非空的块 id 列表"},
    "err_x_floats": {"en": "a list of floats", "zh": "浮点数列表"},
    "err_x_engine_name": {"en": "a string naming P's engine", "zh": "命名 P 的引擎的字符串"},
    "err_x_one_token": {"en": "at least one token", "zh": "至少一个 token"},
    "err_x_one_token_id": {"en": "at least one token id", "zh": "至少一个 token id"},
    "err_x_at_most": {"en": "at most {bound}", "zh": "不超过 {bound}"},
    "err_x_at_most_of": {"en": "at most {bound} of {whose}", "zh": "不超过 {whose} 的 {bound}"},
    "err_x_parts_of": {"en": "parts of {whole}", "zh": "{whole} 中的部分"},
    "err_x_id_returned": {"en": "an id add_request returned", "zh": "add_request 返回过的 id"},
    "err_x_request_ids": {"en": "a request id or a list of them", "zh": "请求 id 或请求 id 列表"},
    "err_x_deepseek_dict": {
        "en": "a dict loaded from a DeepSeek config.json",
        "zh": "从 DeepSeek 的 config.json 读出的 `dict`",
    },
    "err_x_safetensors_path": {
        "en": "a path ending in .safetensors",
        "zh": "以 `.safetensors` 结尾的路径",
    },
    "err_x_weights": {
        "en": "'trained', 'random' or a path ending in .safetensors",
        "zh": "'trained'、'random' 或以 `.safetensors` 结尾的路径",
    },
    "err_x_slot": {
        "en": "a slot in {span} = num_blocks * block_size of kv_cache, or negative to skip "
        "the token",
        "zh": "{span} 范围内的槽（即 kv_cache 的 num_blocks * block_size），或负数（跳过这个 "
        "token）",
    },
    "err_x_block_id_in": {"en": "a block id in {span}", "zh": "{span} 范围内的块 id"},
    "err_x_fixed_by_weights": {
        "en": "{value!r} with weights='trained' (the shipped checkpoint has the tiny preset's "
        "shape); pass weights='random' for another",
        "zh": "{value!r}（`weights='trained'` 时：随附的检查点是 tiny 预设的形状）；要用别的值请传 "
        "`weights='random'`",
    },
    "err_x_with": {"en": "{x} with {setting} ({note})", "zh": "{x}（`{setting}` 时；{note}）"},
    "err_x_when": {"en": "{x} when {flag} is {value}", "zh": "{x}（{flag} 为 {value} 时）"},
    "err_x_when_note": {
        "en": "{x} when {flag} is {value} ({note})",
        "zh": "{x}（{flag} 为 {value} 时；{note}）",
    },
    "err_x_side_block_size": {
        "en": "{x}, P's block size (both sides must share it)",
        "zh": "{x}（P 的块大小，两侧必须一致）",
    },
    "err_x_function_or_path": {"en": "a function or a file path", "zh": "函数或文件路径"},
    "err_x_note": {"en": "{x} ({note})", "zh": "{x}（{note}）"},
    "err_x_for_instance": {
        "en": "one of {choices} for instance {instance!r}",
        "zh": "实例 {instance!r} 的 {choices} 之一",
    },
    "err_x_ge": {"en": ">= {bound}", "zh": "不小于 {bound}"},
    "err_x_rows_of": {
        "en": "{total}, the number of rows of {what}",
        "zh": "{total}（{what} 的行数）",
    },
    "err_x_position_ge": {"en": "a position >= {n}", "zh": "不小于 {n} 的位置"},
    "err_x_length_in_table": {
        "en": "a length in [0, {capacity}], the block table's capacity ({blocks} blocks of "
        "{block_size})",
        "zh": "[0, {capacity}] 范围内的长度（块表的容量：{blocks} 个 {block_size} 行的块）",
    },
    "err_x_read_past": {
        "en": "at most {n} rows: request {i} would read position {pos} past its block table's "
        "capacity of {capacity} ({blocks} blocks of {block_size})",
        "zh": "至多 {n} 行：请求 {i} 会读到位置 {pos}，超出它的块表容量 {capacity}（{blocks} 个 "
        "{block_size} 行的块）",
    },
    "err_x_queries_in_keys": {
        "en": "at most seq_lens[{b}]={n}: a request's queries are among its keys (this step's "
        "tokens are cached before attention)",
        "zh": "不超过 seq_lens[{b}]={n}：请求的 query 都在它的 key 之中（这一步的 token 在注意力"
        "之前已写入缓存）",
    },
    # ---- the notes in parentheses -------------------------------------------------------
    "err_n_v2": {"en": "V2", "zh": "V2"},
    "err_n_v1": {"en": "V1", "zh": "V1"},
    "err_n_p": {"en": "P", "zh": "P"},
    "err_n_d": {"en": "D", "zh": "D"},
    "err_n_first_row": {
        "en": "the first sequence starts at row 0",
        "zh": "第一个序列从第 0 行开始",
    },
    "err_n_monotone": {"en": "offsets never decrease", "zh": "偏移量不会减小"},
    "err_n_interpreter": {"en": "Triton's CPU interpreter", "zh": "Triton 的 CPU 解释器"},
    "err_n_compile": {"en": "compile for the GPU", "zh": "为 GPU 编译"},
    "err_n_in_pair": {"en": "still in the pair", "zh": "仍在 P/D 对中"},
    "err_n_in_scheduler": {"en": "already in the scheduler", "zh": "已在调度器中"},
    "err_n_check": {"en": "check indices", "zh": "检查索引"},
    "err_n_skip": {"en": "skip", "zh": "跳过"},
    "err_n_one_mtp_trained": {
        "en": "the shipped checkpoint holds one MTP module; weights='random' for more",
        "zh": "随附的检查点只有一个 MTP 模块；更多请用 `weights='random'`",
    },
    "err_n_rope_pairs": {"en": "RoPE rotates pairs", "zh": "RoPE 成对旋转"},
    "err_n_verify_width": {"en": "1 + num_speculative_tokens", "zh": "1 + num_speculative_tokens"},
    "err_n_ngram_only": {"en": "ngram only", "zh": "只用于 `ngram` 方法"},
    "err_x_sim_fits": {
        "en": "at least {n} on the {gpu} profile ({model}'s {dtype} weights take {gb} GB a "
        "GPU on {value}; one {gpu} holds {mem} GB)",
        "zh": "{gpu} 配置下至少 {n}（{value} 块 GPU 时 {model} 的 {dtype} 权重每块占 {gb} GB；"
        "一块 {gpu} 只有 {mem} GB）",
    },
    "err_x_sim_rate": {
        "en": "a number from 0 to {top} (at most {n} arrivals in {setting})",
        "zh": "0 到 {top} 之间的数（{setting} 内至多 {n} 个请求到达）",
    },
    "err_n_yarn_only": {"en": "the only scaling DeepSeek uses", "zh": "DeepSeek 只用这一种缩放"},
    "err_n_p_tokens": {"en": "the tokens P's blocks hold", "zh": "P 的块中的 token 数"},
    "err_n_ints_ge0": {"en": "integers >= 0", "zh": "不小于 0 的整数"},
    "err_n_p_hidden": {"en": "P's last hidden state", "zh": "P 最后的隐藏状态"},
    "err_n_p_or_d": {
        "en": "a request is either P's prefill or D's decode",
        "zh": "一个请求要么是 P 的预填充，要么是 D 的解码",
    },
    "err_n_vocab_of": {"en": "vocab_size of model {model!r}", "zh": "模型 {model!r} 的 vocab_size"},
    "err_n_greedy": {"en": "0 means greedy", "zh": "0 表示贪心"},
    "err_n_prefill": {"en": "prefill", "zh": "预填充实例"},
    # ---- whole messages -----------------------------------------------------------------
    "err_no_free_blocks": {"en": "no free blocks left", "zh": "没有空闲的块了"},
    "err_few_free_blocks": {
        "en": "num_blocks={n} is invalid: only {free} free blocks",
        "zh": "`num_blocks={n}` 无效：只剩 {free} 个空闲块",
    },
    "err_no_tokens_to_allocate": {
        "en": "num_new_tokens=0 is invalid when there are no external computed tokens: "
        "expected at least one token to allocate for",
        "zh": "没有外部已计算的 token 时 `num_new_tokens=0` 无效：至少要为一个 token 分配",
    },
    "err_prompt_too_long": {
        "en": "prompt has {n} tokens: expected fewer than max_model_len={limit} (one position "
        "is left for the first output token)",
        "zh": "提示词有 {n} 个 token：应少于 max_model_len={limit}（要给第一个输出 token 留一个"
        "位置）",
    },
    "err_cache_too_large": {
        "en": "CacheConfig(num_blocks={num_blocks}, block_size={block_size}) is too large: it "
        "needs {need:.1f} GiB on {device} and {free:.1f} GiB is available; expected fewer blocks "
        "or a smaller block_size",
        "zh": "CacheConfig(num_blocks={num_blocks}, block_size={block_size}) 太大：它在 `{device}` "
        "上需要 {need:.1f} GiB，而可用的只有 {free:.1f} GiB；请减少块数或减小 block_size",
    },
    "err_unfinished": {
        "en": "requests still unfinished after {n} steps",
        "zh": "{n} 步之后仍有请求没有完成",
    },
    "err_model_max_len": {
        "en": "SchedulerConfig.max_model_len={value} is invalid: expected at most "
        "max_position_embeddings={limit} of model {model!r} (RoPE has no positions beyond it)",
        "zh": "`SchedulerConfig.max_model_len={value}` 无效：应不超过模型 {model!r} 的 "
        "max_position_embeddings={limit}（RoPE 没有超出它的位置）",
    },
    "err_model_mismatch": {
        "en": "model was built for a different ModelConfig than model_config",
        "zh": "`model` 是按另一个 ModelConfig 构建的，与 model_config 不同",
    },
    "err_pcp_needs_v2": {
        "en": "{runner} cannot run prefill_context_parallel_size={pcp}: vLLM 0.33.0 "
        "implements prefill context parallelism only in Model Runner V2; expected "
        "model_runner='v2' or prefill_context_parallel_size=1",
        "zh": "{runner} 不能运行 prefill_context_parallel_size={pcp}：vLLM 0.33.0 只在 Model "
        "Runner V2 中实现了预填充上下文并行；应为 model_runner='v2' 或 "
        "prefill_context_parallel_size=1",
    },
    "err_config_missing": {
        "en": "config is missing {missing}: expected a DeepSeek-V2/V3 config.json with MLA fields",
        "zh": "`config` 缺少 {missing}：应为带 MLA 字段的 DeepSeek-V2/V3 config.json",
    },
    "err_seq_too_long": {
        "en": "seq_lens_cpu={value} is invalid: every length must be <= workspace_size={limit}",
        "zh": "`seq_lens_cpu={value}` 无效：每个长度都必须 <= workspace_size={limit}",
    },
    "err_workspace_small": {
        "en": "workspace_size={value} is invalid: it must hold at least one block of {rows} rows",
        "zh": "`workspace_size={value}` 无效：它至少要容纳一个 {rows} 行的块",
    },
    "err_no_is_prefilling": {
        "en": "is_prefilling is None: treat_short_extends_as_decodes=False needs "
        "CommonAttentionMetadata.is_prefilling",
        "zh": "is_prefilling 为 None：treat_short_extends_as_decodes=False 需要 "
        "CommonAttentionMetadata.is_prefilling",
    },
    "err_empty_offsets": {
        "en": "{name} is empty: expected num_seqs + 1 offsets starting at 0",
        "zh": "`{name}` 为空：应为 num_seqs + 1 个从 0 开始的偏移量",
    },
    "err_seqlen_small": {
        "en": "{name}={value} is too small: expected at least {longest}, the longest sequence "
        "in {where}",
        "zh": "`{name}={value}` 太小：应至少为 {longest}，即 {where} 中最长的序列",
    },
    "err_same_device": {
        "en": "tensors must share one device; got {devices}",
        "zh": "张量必须在同一个设备上；实际为 {devices}",
    },
    "err_bf16_interpreter": {
        "en": "bf16 through the Triton interpreter needs UPCAST=True: the interpreter's bf16 "
        "arithmetic is wrong (see TRITON.md)",
        "zh": "经 Triton 解释器运行 bf16 需要 UPCAST=True：解释器的 bf16 运算有误（见 TRITON.md）",
    },
    "err_triton_imported_first": {
        "en": "triton was imported before pdlab.kernels, with TRITON_INTERPRET unset, so its "
        "library is compiled-only while pdlab's kernels are interpreted. Import pdlab.kernels "
        "first, or set TRITON_INTERPRET=1 before starting Python.",
        "zh": "triton 在 `pdlab.kernels` 之前被导入，且当时没有设置 TRITON_INTERPRET，所以它的"
        "库只能编译运行，而 pdlab 的算子是解释运行的。请先导入 `pdlab.kernels`，或在启动 Python "
        "之前设置 TRITON_INTERPRET=1。",
    },
    "err_expected_got": {
        "en": "{name}: expected {expected}, got {got}",
        "zh": "`{name}`：应为 {expected}，得到 {got}",
    },
    "err_no_such_weights": {
        "en": "weights={path!r} is invalid: no such file",
        "zh": "`weights={path!r}` 无效：文件不存在",
    },
    "err_not_safetensors": {
        "en": "weights={path!r} is not a safetensors checkpoint: {why}",
        "zh": "`weights={path!r}` 不是 `safetensors` 检查点：{why}",
    },
    "err_needs_safetensors": {
        "en": "weights={path!r} needs the safetensors package (a pdlab dependency): pip install "
        "safetensors, or run with weights='random'",
        "zh": "`weights={path!r}` 需要 `safetensors` 包（pdlab 的依赖）：请 `pip install "
        "safetensors`，或改用 `weights='random'` 运行",
    },
    "err_handshake_failed": {
        "en": "{peer} failed during the handshake: {why}",
        "zh": "{peer} 在握手时出错：{why}",
    },
    "err_handshake_timeout": {
        "en": "{peer} did not answer the handshake within {timeout:g} s",
        "zh": "{peer} 在 {timeout:g} s 内没有回应握手",
    },
    "err_payload_size": {
        "en": "P sent {n} values: expected {shape}",
        "zh": "P 发来 {n} 个值：应为 {shape}",
    },
    "err_kv_differs": {
        "en": "{key} differs between the two sides: {me} has {mine!r}, {peer} has {theirs!r}; "
        "expected P and D to agree on it (block size, KV dtype, speculative decoding, model)",
        "zh": "两侧的 {key} 不同：{me} 为 {mine!r}，{peer} 为 {theirs!r}；P 和 D 在这一项上必须"
        "一致（块大小、KV 缓存的数据类型、投机解码、模型）",
    },
    "err_spec_temperature": {
        "en": "SamplingParams.temperature={t} is invalid with speculative decoding "
        "(num_speculative_tokens={k}): pdlab verifies drafts greedily only (upstream's "
        "probabilistic rejection sampling is not built); expected temperature=0",
        "zh": "`SamplingParams.temperature={t}` 在投机解码（num_speculative_tokens={k}）下无效："
        "pdlab 只按贪心验证草稿（上游的概率式拒绝采样没有实现）；应为 temperature=0",
    },
    "err_mtp_needs_layer": {
        "en": "SpeculativeConfig(method='mtp') needs a model with an MTP layer: "
        "ModelConfig.num_nextn_predict_layers={n}, expected 1 or more",
        "zh": "`SpeculativeConfig(method='mtp')` 需要带 MTP 层的模型："
        "`ModelConfig.num_nextn_predict_layers={n}`，应不小于 1",
    },
    "err_mtp_k_over_modules": {
        "en": "num_speculative_tokens={k} is more than the model's {n} MTP modules: expected at "
        "most {n} (vLLM 0.33.0 would run the modules round again, each rewriting its own K/V rows)",
        "zh": "`num_speculative_tokens={k}` 多于模型的 {n} 个 MTP 模块：应不超过 {n}（vLLM 0.33.0 "
        "会让各模块再轮一遍，各自改写自己的 K/V 行）",
    },
    "err_checkpoint_no_mtp": {
        "en": "{source} has no MTP layer (no model.layers.{n}.* tensors), which "
        "num_nextn_predict_layers=1 asks for: pass num_nextn_predict_layers=0 to run it "
        "without one, or train one with pdlab train",
        "zh": "{source} 没有 MTP 层（没有 `model.layers.{n}.*` 张量），而 "
        "num_nextn_predict_layers=1 需要它：传 num_nextn_predict_layers=0 不带它运行，或用 "
        "`pdlab train` 训练一个",
    },
    "err_checkpoint_unshared": {
        "en": "{source} has {copy} unlike {main}: pdlab's MTP layer shares it with the target, "
        "as DeepSeek-V3's does",
        "zh": "{source} 中的 {copy} 与 {main} 不同：pdlab 的 MTP 层与目标模型共用它，DeepSeek-V3 "
        "也是如此",
    },
    "err_no_events": {
        "en": "no {kind!r} event for instance={instance!r} {match}",
        "zh": "实例 {instance!r} 没有 {kind!r} 事件 {match}",
    },
    "err_no_step_events": {
        "en": "the trace has no step events for instance={instance!r}",
        "zh": "trace 中没有实例 {instance!r} 的 `step` 事件",
    },
    "err_no_mtp_layer": {
        "en": "the model has no MTP layer: num_nextn_predict_layers=0",
        "zh": "模型没有 MTP 层：num_nextn_predict_layers=0",
    },
    "err_event_field_unknown": {
        "en": "{kind!r} event: field {name!r} is unknown: expected the fields {fields}",
        "zh": "{kind!r} 事件：字段 {name!r} 未知：应为这些字段之一 {fields}",
    },
    "err_event_field_missing": {
        "en": "{kind!r} event: field {name!r} is missing",
        "zh": "{kind!r} 事件：缺少字段 {name!r}",
    },
    "err_too_many_drafts": {
        "en": "draft_tokens[{req!r}] has {n} drafts: expected a scheduled request with fewer "
        "drafts than its num_scheduled_tokens ({scheduled})",
        "zh": "`draft_tokens[{req!r}]` 有 {n} 个草稿：应为已调度的请求，且草稿数少于它的 "
        "num_scheduled_tokens（{scheduled}）",
    },
    "err_argmax_len": {
        "en": "target_argmax has {n} tokens for {drafts} drafts: expected one per draft plus "
        "the bonus",
        "zh": "target_argmax 有 {n} 个 token，而草稿有 {drafts} 个：应为每个草稿一个，再加一个"
        "额外 token",
    },
    # ---- messages of rooms still raising plain exceptions (read back by parse()) ---------
    "err_cache_too_small": {
        "en": "the KV cache is too small for request {req!r}: {n} tokens (prompt {prompt} + "
        "max_tokens {max_tokens} - 1, at most max_model_len) need {need} blocks of "
        "{block_size}; expected at most num_blocks={num_blocks}",
        "zh": "KV 缓存对请求 {req!r} 太小：{n} 个 token（提示词 {prompt} + max_tokens "
        "{max_tokens} - 1，至多为 max_model_len）需要 {need} 个 {block_size} token 的块；应不超过 "
        "num_blocks={num_blocks}",
    },
    "err_cache_too_small_spec": {
        "en": "the KV cache is too small for request {req!r}: {n} tokens (prompt {prompt} + "
        "max_tokens {max_tokens} - 1, at most max_model_len) + {extra} for speculative "
        "decoding need {need} blocks of {block_size}; expected at most num_blocks={num_blocks}",
        "zh": "KV 缓存对请求 {req!r} 太小：{n} 个 token（提示词 {prompt} + max_tokens "
        "{max_tokens} - 1，至多为 max_model_len）再加投机解码的 {extra} 个，需要 {need} 个 "
        "{block_size} token 的块；应不超过 num_blocks={num_blocks}",
    },
    "err_cache_too_small_receiving": {
        "en": "the KV cache is too small for request {req!r}: receiving its {n} prompt tokens "
        "takes {need} blocks, and {kept} more are kept for a verifying step of 1 + K tokens; "
        "expected at most num_blocks={num_blocks}",
        "zh": "KV 缓存对请求 {req!r} 太小：接收它的 {n} 个提示词 token 要 {need} 个块，另有 "
        "{kept} 个留给 1 + K 个 token 的验证步；应不超过 num_blocks={num_blocks}",
    },
    "err_kv_params_here": {
        "en": "kv_transfer_params={params!r} is invalid here: expected a scheduler with a KV "
        "connector for P/D requests",
        "zh": "`kv_transfer_params={params!r}` 在这里无效：P/D 请求需要带 KV connector 的调度器",
    },
    "err_dtype_on_platform": {
        "en": "kv_cache_dtype={dtype!r} is invalid on {platform}: no MLA backend of its "
        "platform takes it (CPU_MLA takes 'auto' only)",
        "zh": "`kv_cache_dtype={dtype!r}` 在 {platform} 上无效：其平台没有接受它的 MLA 后端"
        "（CPU_MLA 只接受 'auto'）",
    },
    "err_subject_invalid": {
        "en": "{subject} is invalid: expected {allowed}",
        "zh": "{subject} 无效：应为 {allowed}",
    },
    "err_needs_triton": {
        "en": "{what} needs triton, which is not installed (it has Linux wheels only): use "
        "{instead}",
        "zh": "{what} 需要 triton，但它没有安装（它只有 Linux 的 wheel）：请改用 {instead}",
    },
    "err_triton_interpret": {
        "en": "{what}: TRITON_INTERPRET={raw!r} is invalid: expected {allowed}",
        "zh": "{what}：`TRITON_INTERPRET={raw!r}` 无效：应为 {allowed}",
    },
    "err_no_gpu_to_compile": {
        "en": "{what} with TRITON_INTERPRET={raw!r} compiles for a GPU and this machine has "
        "none: unset TRITON_INTERPRET (or set it to 1, the interpreter) or use {instead}",
        "zh": "{what} 在 `TRITON_INTERPRET={raw!r}` 下要为 GPU 编译，而这台机器没有 GPU：请取消 "
        "TRITON_INTERPRET（或设为 1，即解释器），或改用 {instead}",
    },
    # ---- why the runner leaves a request out, why P refuses a read (trace text) ---------
    "err_runner_no_state": {
        "en": "the runner has no state for request {req!r}",
        "zh": "model runner 中没有请求 {req!r} 的状态",
    },
    "err_runner_tokens": {
        "en": "scheduled {n} known tokens from {start} but only {known} are known",
        "zh": "从位置 {start} 起调度了 {n} 个已知 token，但已知的只有 {known} 个",
    },
    "err_runner_token_id": {
        "en": "token id {value} is out of range: expected [0, {vocab}) (vocab_size)",
        "zh": "token id {value} 超出范围：应在 [0, {vocab}) 内（vocab_size）",
    },
    "err_runner_position": {
        "en": "position {value} is out of range: expected < {limit} (max_position_embeddings)",
        "zh": "位置 {value} 超出范围：应小于 {limit}（max_position_embeddings）",
    },
    "err_runner_blocks": {
        "en": "{have} blocks hold {tokens} tokens: expected {need}",
        "zh": "{have} 个块装 {tokens} 个 token：应为 {need} 个块",
    },
    "err_runner_block_id": {
        "en": "block id {value} is out of range: expected [0, {num_blocks}) (num_blocks)",
        "zh": "块 id {value} 超出范围：应在 [0, {num_blocks}) 内（num_blocks）",
    },
    "err_claim_no_blocks": {
        "en": "P holds no blocks for request {req!r} (released or timed out)",
        "zh": "P 没有为请求 {req!r} 保留块（已释放或已超时）",
    },
    "err_claim_stale": {
        "en": "transfer_id={tid!r} is stale: P's current transfer of {req!r} is {current!r}",
        "zh": "`transfer_id={tid!r}` 已过时：P 对 {req!r} 当前的传输是 {current!r}",
    },
    "err_claim_read": {
        "en": "transfer {tid!r} was already read",
        "zh": "传输 {tid!r} 已经被读取过",
    },
    "err_claim_expired": {
        "en": "transfer {tid!r} expired after kv_transfer_timeout_s={timeout}",
        "zh": "传输 {tid!r} 已在 `kv_transfer_timeout_s={timeout}` 后过期",
    },
    "err_claim_foreign": {
        "en": "block {block} is not one of the blocks P holds for {tid!r}",
        "zh": "块 {block} 不是 P 为 {tid!r} 保留的块",
    },
    "err_duplicate_id": {
        "en": "request_id={req!r} is invalid: a request with this id is {where}; expected a "
        "unique id",
        "zh": "`request_id={req!r}` 无效：已有同一 id 的请求；应为唯一的 id",
    },
    "err_pd_unfinished": {
        "en": "P/D requests still unfinished after {n} steps",
        "zh": "{n} 步之后仍有 P/D 请求没有完成",
    },
    "err_port_busy": {
        "en": "port={port} on {host} is not available ({why}): expected a free port, or 0 to "
        "pick one",
        "zh": "{host} 上的 `port={port}` 不可用（{why}）：应为空闲端口，或用 0 自动挑选",
    },
    "err_not_priced": {
        "en": "event name={name!r} is not a kernel this model prices: expected one of "
        "reshape_and_cache_mla, q_nope @ W_UK_T, mla_decode, o_latent @ W_UV, gather_cache, "
        "kv_b_proj, K/V assembly, flash_attn_varlen, merge_attn_states",
        "zh": "`event name={name!r}` 不是这个模型计价的算子：应为 reshape_and_cache_mla、"
        "`q_nope @ W_UK_T`、mla_decode、`o_latent @ W_UV`、gather_cache、kv_b_proj、K/V 拼装、"
        "flash_attn_varlen、merge_attn_states 之一",
    },
    "err_predictions_unknown": {
        "en": "predictions={unknown} are unknown: expected {keys}",
        "zh": "`predictions={unknown}` 未知：应为 {keys}",
    },
    # ---- the scheduler (pdlab/engine/core/sched/)
    # ------------------------------------------------------
    "err_spec_budget": {
        "en": "SchedulerConfig.max_num_batched_tokens={budget} is invalid with "
        "SpeculativeConfig(method={method!r}, num_speculative_tokens={k}): expected at least "
        "1 + num_speculative_tokens = {need}",
        "zh": "`SchedulerConfig.max_num_batched_tokens={budget}` 与 `SpeculativeConfig(method="
        "{method!r}, num_speculative_tokens={k})` 不兼容：应至少为 1 + num_speculative_tokens = "
        "{need}",
    },
    "err_mtp_block_size": {
        "en": "CacheConfig.block_size={bs} is invalid with multi-module MTP and prefix "
        "caching: expected at least num_speculative_tokens={k} (a dropped block must hold "
        "the drafter's lookahead)",
        "zh": "`CacheConfig.block_size={bs}` 与多模块 MTP 加前缀缓存不兼容：应至少为 "
        "num_speculative_tokens={k}（丢掉的块须容下草稿模型的前瞻 token）",
    },
    "err_spec_threshold": {
        "en": "SchedulerConfig.long_prefill_token_threshold={threshold} is invalid with "
        "num_speculative_tokens={k}: expected 0 or at least {need} (a padded row of 1 + K "
        "tokens cannot be cut)",
        "zh": "`SchedulerConfig.long_prefill_token_threshold={threshold}` 与 "
        "num_speculative_tokens={k} 不兼容：应为 0 或至少 {need}（补齐到 1 + K 个 token 的行不能"
        "切开）",
    },
    "err_runner_no_entry": {
        "en": "model_runner_output has no entry for scheduled request {req!r}: expected one "
        "per scheduled request",
        "zh": "model_runner_output 中没有已调度请求 {req!r} 的条目：应为每个已调度请求一条",
    },
    "err_sampled_count": {
        "en": "model_runner_output.sampled_token_ids for {req!r} is {tokens}: expected {want} "
        "after {done} of {total} tokens computed",
        "zh": "请求 {req!r} 的 model_runner_output.sampled_token_ids 为 {tokens}：已算 {done}/"
        "{total} 个 token 时应为 {want}",
    },
    "err_sampled_ids": {
        "en": "model_runner_output.sampled_token_ids for {req!r} is {tokens!r}: expected a list "
        "of token ids (integers >= 0)",
        "zh": "请求 {req!r} 的 model_runner_output.sampled_token_ids 为 {tokens!r}：应为 token id "
        "列表（不小于 0 的整数）",
    },
    "err_sampled_ids_vocab": {
        "en": "model_runner_output.sampled_token_ids for {req!r} is {tokens!r}: expected a list "
        "of token ids from 0 to {top} (vocab_size={vocab_size})",
        "zh": "请求 {req!r} 的 model_runner_output.sampled_token_ids 为 {tokens!r}：应为 0 到 "
        "{top} 之间的 token id 列表（vocab_size={vocab_size}）",
    },
    "err_x_unique_req_ids": {
        "en": "a list of distinct request ids (strings)",
        "zh": "互不相同的请求 id（字符串）列表",
    },
    "err_x_token_id_lists": {
        "en": "a list of token-id lists (integers), one per request",
        "zh": "token id（整数）列表的列表，每个请求一个",
    },
    "err_x_empty_prompt_incomplete": {
        "en": "[] (its prompt is not complete)",
        "zh": "[]（它的提示词还没算完）",
    },
    "err_x_accepted_plus_one": {
        "en": "1 to {n} tokens (one per accepted draft, then one)",
        "zh": "1 到 {n} 个 token（每个被接受的草稿一个，再加一个）",
    },
    "err_x_one_sampled": {"en": "one token", "zh": "一个 token"},
    "err_drafts_invalid": {
        "en": "draft_token_ids for {req!r} is {spec}: expected at most num_speculative_tokens="
        "{k} token ids (integers >= 0, or -1)",
        "zh": "请求 {req!r} 的 draft_token_ids 为 {spec}：应为至多 num_speculative_tokens={k} 个 "
        "token id（不小于 0 的整数，或 -1）",
    },
    "err_prompt_ids_too_long": {
        "en": "prompt_token_ids has {n} tokens: expected fewer than max_model_len={limit} (one "
        "position is left for the first output token)",
        "zh": "prompt_token_ids 有 {n} 个 token：应少于 max_model_len={limit}（要给第一个输出 "
        "token 留一个位置）",
    },
    "err_entries_per_request": {
        "en": "{name} has {n} entries for {k} req_ids: expected one per request",
        "zh": "`{name}` 有 {n} 项，而 req_ids 有 {k} 个：应每个请求一项",
    },
    "err_x_fresh_request": {
        "en": "a fresh Request that no scheduler has run",
        "zh": "尚未被任何调度器运行过的新 `Request`",
    },
    "err_x_finished_status": {"en": "a FINISHED_* status", "zh": "FINISHED_* 状态"},
    # ---- the command line (pdlab/cli/) ------------------------------------------------
    "err_not_utf8": {
        "en": "{value!r} is not UTF-8 text (characters {a}-{b} are undecodable bytes): "
        "expected text in UTF-8, as the byte tokenizer reads it",
        "zh": "{value!r} 不是 UTF-8 文本（第 {a}-{b} 个字符是无法解码的字节）：应为 UTF-8 文本，"
        "字节分词器按它读取",
    },
    "err_not_int_list": {
        "en": "{value!r} is not a comma-separated list of integers",
        "zh": "{value!r} 不是以逗号分隔的整数列表",
    },
    "err_not_weights": {
        "en": "{value!r} is not trained, random or a path ending in .safetensors",
        "zh": "{value!r} 无效：应为 `trained`、`random` 或以 `.safetensors` 结尾的路径",
    },
    "err_no_such_file": {"en": "{value!r}: no such file", "zh": "{value!r}：文件不存在"},
    "err_path_is_file": {
        "en": "{option} {path} is a file: expected a directory",
        "zh": "{option} {path} 是文件：应为目录",
    },
    "err_path_is_dir": {
        "en": "{option} {path} is a directory: expected a file path",
        "zh": "{option} {path} 是目录：应为文件路径",
    },
    "err_no_parent": {
        "en": "{option} {path}: the folder {parent} does not exist (it is not created for a "
        "file; make it first, or write the file elsewhere)",
        "zh": "{option} {path}：文件夹 {parent} 不存在（不会为文件自动创建它；请先创建，或把文件"
        "写到别处）",
    },
    "err_base_is_file": {
        "en": "{option} {path} is not writable: {base} is a file, not a directory",
        "zh": "{option} {path} 不可写：{base} 是文件，不是目录",
    },
    "err_not_writable_in": {
        "en": "{option} {path} is not writable: {why} in {base}",
        "zh": "{option} {path} 不可写：{base} 中 {why}",
    },
    "err_not_writable": {
        "en": "{option} {path} is not writable: {why}",
        "zh": "{option} {path} 不可写：{why}",
    },
    "err_context_needs": {
        "en": "--context {n} needs about {need:.1f} GiB for the prefill path with {heads} heads "
        "and {free:.1f} GiB is free: expected a shorter context or fewer --heads",
        "zh": "--context {n} 在 {heads} 个头时 prefill 路径约需 {need:.1f} GiB，而空闲的只有 "
        "{free:.1f} GiB：请缩短上下文或减少 --heads",
    },
    "err_tour_tokens": {
        "en": "{value} is more than the tour shows: expected 1 to {n} (`pdlab trace "
        "--max-tokens` runs longer generations)",
        "zh": "{value} 超出了导览展示的长度：应为 1 到 {n}（更长的生成请用 `pdlab trace "
        "--max-tokens`）",
    },
    "err_no_scheduled_step": {
        "en": "the trace has no scheduled step for instance {instance!r}",
        "zh": "trace 中没有实例 {instance!r} 调度过的步",
    },
    "err_bench_decoding": {
        "en": "expected {n} decoding requests, scheduled {tokens} tokens",
        "zh": "应有 {n} 个请求在解码，实际调度了 {tokens} 个 token",
    },
    "err_bench_needs_triton": {
        "en": "device=cuda needs triton for the kernels under test",
        "zh": "device=cuda 需要 triton 来运行被测的算子",
    },
    "err_empty_prompt": {"en": "--prompt must not be empty", "zh": "--prompt 不能为空"},
    "err_peer_unreachable": {
        "en": "could not reach the {who} peer at {address} within {timeout:g} s",
        "zh": "在 {timeout:g} s 内没能连上 {address} 的 {who}",
    },
    "err_pd_compare_role": {
        "en": "--compare-designs does not go with --role (it runs both sides)",
        "zh": "--compare-designs 不能与 --role 同用（它自己运行两侧）",
    },
    "err_pd_role_port": {
        "en": "--role needs --port (the same on both machines)",
        "zh": "--role 需要 --port（两台机器上取同一个值）",
    },
    "err_option_without": {
        "en": "{option} {value} has no effect without {needed}: expected {needed} too, or "
        "no {option}",
        "zh": "没有 {needed} 时 {option} {value} 不起作用：应同时给出 {needed}，或不给 {option}",
    },
    "err_pd_procs_role": {
        "en": "--procs does not go with --role (each command runs one side)",
        "zh": "--procs 不能与 --role 同用（每条命令只运行一侧）",
    },
    "err_pd_prompt_prefill": {
        "en": "--prompt goes to --role prefill, which holds the prompts",
        "zh": "--prompt 应交给 --role prefill：提示词在那一侧",
    },
    # ---- pdlab exercises start (pdlab/exercises/__init__.py) ------------------------------
    "err_start_dir_file": {
        "en": "DIR={path!r} is a file; expected a folder for the stub (new or existing)",
        "zh": "`DIR={path!r}` 是文件：应为放桩函数的文件夹（新建或已有的均可）",
    },
    # ---- pdlab lab and pdlab notebooks (pdlab/tools/lab.py) ------------------------------
    "err_lab_dest_file": {
        "en": "DIR={path!r} is a file; expected a folder (new or existing)",
        "zh": "`DIR={path!r}` 是文件：应为文件夹（新建或已有的均可）",
    },
    "err_lab_edited": {
        "en": "DIR={path!r} already has edited copies of {names}; pass --force to overwrite "
        "them, or choose another folder",
        "zh": "`DIR={path!r}` 中已有改过的副本 {names}；用 --force 覆盖它们，或换一个文件夹",
    },
    "err_lab_cannot_write": {
        "en": "{option}={path!r} cannot be written: {why}",
        "zh": "`{option}={path!r}` 无法写入：{why}",
    },
    "err_lab_no_notebook": {
        "en": "--notebook={name!r} matches no notebook; expected a number or a name among: {names}",
        "zh": "`--notebook={name!r}` 没有对应的笔记本：应为数字，或以下名称之一：{names}",
    },
    "err_lab_own_folder": {
        "en": "--dir={path!r} is {where}: JupyterLab saves into the folder it serves; pick a "
        "folder of yours (default {default})",
        "zh": "`--dir={path!r}` 是 {where}：JupyterLab 会保存到它打开的文件夹里；请选一个你自己的"
        "文件夹（默认 {default}）",
    },
    "err_nbs_own_folder": {
        "en": "DIR={path!r} is {where}: pick a folder of yours to copy the notebooks into "
        "(default {default})",
        "zh": "`DIR={path!r}` 是 {where}：请选一个你自己的文件夹来存放笔记本副本（默认 {default}）",
    },
    "err_n_tracked_notebooks": {
        "en": "the checkout's tracked notebooks",
        "zh": "检出目录中受版本管理的笔记本文件夹",
    },
    "err_n_own_notebooks": {"en": "pdlab's own", "zh": "pdlab 自带的笔记本文件夹"},
    "err_lab_dir_file": {
        "en": "--dir={path!r} is a file; expected a folder",
        "zh": "`--dir={path!r}` 是文件：应为文件夹",
    },
    "err_lab_port": {
        "en": "--port={port} is out of range; expected 0..65535 (0 picks a free one)",
        "zh": "`--port={port}` 超出范围：应为 0 到 65535（0 表示挑一个空闲端口）",
    },
    # ---- what the operating system said (an OSError's errno; the English is its strerror) --
    "err_os_EACCES": {"en": "{strerror}", "zh": "权限不足"},
    "err_os_EPERM": {"en": "{strerror}", "zh": "权限不足"},
    "err_os_EROFS": {"en": "{strerror}", "zh": "只读文件系统"},
    "err_os_ENOSPC": {"en": "{strerror}", "zh": "设备空间不足"},
    "err_os_ENOENT": {"en": "{strerror}", "zh": "没有这个文件或目录"},
    "err_os_EISDIR": {"en": "{strerror}", "zh": "是目录"},
    "err_os_ENOTDIR": {"en": "{strerror}", "zh": "不是目录"},
    "err_os_EEXIST": {"en": "{strerror}", "zh": "文件已存在"},
    "err_permission_denied": {"en": "permission denied", "zh": "权限不足"},
    # ---- argparse's own messages (Lib/argparse.py; pdlab/cli/errors.py reads them back) ----
    "err_ap_argument": {"en": "argument {opt}: {rest}", "zh": "参数 {opt}：{rest}"},
    "err_ap_choice": {
        "en": "invalid choice: {value} (choose from {choices})",
        "zh": "无效的选择 {value}（可选：{choices}）",
    },
    "err_ap_int": {"en": "invalid int value: {value}", "zh": "{value} 不是整数"},
    "err_ap_float": {"en": "invalid float value: {value}", "zh": "{value} 不是数"},
    "err_ap_type": {"en": "invalid {type} value: {value}", "zh": "{value} 不是有效的 {type} 值"},
    "err_ap_one": {"en": "expected one argument", "zh": "需要一个值"},
    "err_ap_at_least_one": {"en": "expected at least one argument", "zh": "至少需要一个值"},
    "err_ap_at_most_one": {"en": "expected at most one argument", "zh": "至多接受一个值"},
    "err_ap_ignored": {
        "en": "ignored explicit argument {value}",
        "zh": "这个开关不接受取值（给了 {value}）",
    },
    "err_ap_unrecognized": {
        "en": "unrecognized arguments: {args}",
        "zh": "无法识别的参数：`{args}`",
    },
    "err_ap_required": {
        "en": "the following arguments are required: {names}",
        "zh": "缺少必需的参数：{names}",
    },
    "err_ap_one_required": {
        "en": "one of the arguments {names} is required",
        "zh": "参数 {names} 必须给出其中一个",
    },
    "err_ap_ambiguous": {
        "en": "ambiguous option: {option} could match {matches}",
        "zh": "选项 {option} 有歧义，可能是：{matches}",
    },
    "err_ap_not_allowed": {
        "en": "not allowed with argument {option}",
        "zh": "不能与参数 {option} 同时使用",
    },
    # ---- how an error is shown (keys of their own: parse() never reads these back) -----------
    "show_error_line": {"en": "{prog}: error: {message}", "zh": "{prog}：错误：{message}"},
    "show_error_kind": {"en": "{kind}: {message}", "zh": "{kind}：{message}"},
    "show_error_report": {
        "en": "where it failed (attach it to a bug report)",
        "zh": "出错位置（请附在问题报告里）",
    },
    "show_interrupted": {"en": "{prog}: interrupted", "zh": "{prog}: 已中断"},
    # ---- a first-token design that cannot honour the sampling (pdlab/disagg/designs.py) ----
    "err_greedy_only": {
        "en": "first_token={mode!r} cannot honour SamplingParams.temperature={temperature} "
        "(seed={seed}): {why}; expected temperature=0 or first_token='recompute'",
        "zh": "`first_token={mode!r}` 无法满足 `SamplingParams.temperature={temperature}`"
        "（`seed={seed}`）：{why}；应为 `temperature=0` 或 `first_token='recompute'`",
    },
    "err_n_two_samplers": {
        "en": "P samples token 1 and D the rest, from two generators seeded apart",
        "zh": "token 1 由 P 采样，其余由 D 采样，两个随机数生成器各自播种",
    },
    "err_n_before_seed": {
        "en": "D takes token 1 from P's hidden state before its runner seeds the "
        "request's generator",
        "zh": "D 在它的 model runner 为这个请求的随机数生成器播种之前，就从 P 的隐藏状态得到了 "
        "token 1",
    },
}
