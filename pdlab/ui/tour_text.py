"""The words of ``pdlab tour``, in English and Simplified Chinese, side by side per key.

Only words live here: every number is computed from the run's trace (or the cost model) in
``pdlab/tour.py`` and passed in as a placeholder. vLLM identifiers (``num_computed_tokens``,
``_forward_prefill``, ...) stay in English in both languages, as a Chinese-speaking engineer
reads them in the code. The text carries no rich markup and is escaped whole, so brackets
(``h[28]``, a prompt such as ``[b]``) print as written.
"""

from __future__ import annotations

from rich.markup import escape

LANGS = ("en", "zh")

TEXT: dict[str, dict[str, str]] = {
    # ---- opening ---------------------------------------------------------------------
    "title": {
        "en": "pdlab tour: why the decode instance runs the last prompt token again",
        "zh": "pdlab 导览：为什么解码实例要把最后一个提示词 token 再算一遍",
    },
    "question": {
        "en": "A user asked on the vLLM forum (and in vllm-project/vllm#28566): on the decode "
        "instance D, why does the scheduler set num_computed_tokens to N - 1? DeepSeek's "
        "MLA code calls a request a prefill while num_computed_tokens < "
        "num_prompt_tokens, so does D then run _forward_prefill for that one token? "
        "This tour runs such a request and shows what the trace recorded.",
        "zh": "有人在 vLLM 论坛（以及 vllm-project/vllm#28566）问：在解码实例 D 上，调度器为什么"
        "把 num_computed_tokens 设成 N - 1？DeepSeek 的 MLA 代码以 num_computed_tokens < "
        "num_prompt_tokens 判定 prefill，那 D 上这一个 token 岂不是要走 _forward_prefill？"
        "下面真实地跑一遍这样的请求，逐章展示 trace 记下的内容。",
    },
    "settings": {
        "en": "Run: prompt {prompt} · model {model} ({layers} layers, kv_lora_rank {L}, "
        "qk_rope_head_dim {R}) · block_size {bs} · rule {rule} · kernels {backend}",
        "zh": "本次运行：提示词 {prompt} · 模型 {model}（{layers} 层，kv_lora_rank {L}，"
        "qk_rope_head_dim {R}）· block_size {bs} · 路由规则 {rule} · 算子后端 {backend}",
    },
    # ---- chapter titles --------------------------------------------------------------
    "ch1": {"en": "Chapter 1 · P: the prompt is prefilled", "zh": "第 1 章 · P：预填充提示词"},
    "ch2": {
        "en": "Chapter 2 · Transfer: P's blocks into D's blocks",
        "zh": "第 2 章 · 传输：P 的块搬进 D 的块",
    },
    "ch3": {
        "en": "Chapter 3 · D: num_computed_tokens = N - 1, and why",
        "zh": "第 3 章 · D：num_computed_tokens = N - 1 从何而来",
    },
    "ch4": {
        "en": "Chapter 4 · The one-token step under both routing rules",
        "zh": "第 4 章 · 两种路由规则下的这一步",
    },
    "ch5": {
        "en": "Chapter 5 · What each path costs at DeepSeek scale",
        "zh": "第 5 章 · 两条路径在 DeepSeek 规模下的开销",
    },
    "ch6": {"en": "Chapter 6 · The rest of the generation on D", "zh": "第 6 章 · D 上余下的生成"},
    # ---- chapter 1: P ----------------------------------------------------------------
    "ch1_tokens": {
        "en": "The prompt {prompt} is N = {n} tokens: the byte tokenizer gives one id per "
        "UTF-8 byte.",
        "zh": "提示词 {prompt} 共 N = {n} 个 token：字节级分词器把每个 UTF-8 字节映射为一个 id。",
    },
    "ch1_whole": {
        "en": "There is no prefill phase: each step gives a request num_tokens - "
        "num_computed_tokens tokens, up to the step's token budget.",
        "zh": "调度器里没有“prefill 阶段”：每一步给请求 num_tokens - num_computed_tokens 个 "
        "token，上限是这一步的 token 预算。",
    },
    "ch1_step": {
        "en": "P step {step}: {sched} tokens scheduled, num_computed_tokens {before} → {after} "
        "(query_len = {q}, routed to {forward}).",
        "zh": "P 第 {step} 步：调度 {sched} 个 token，num_computed_tokens 从 {before} 变为 "
        "{after}（query_len = {q}，走 {forward}）。",
    },
    "ch1_write": {
        "en": "In each of the {layers} layers, reshape_and_cache_mla writes one latent row per "
        "token, [kv_c_normed ({L}) | k_pe ({R})] = {W} values, into P's blocks:",
        "zh": "{layers} 层中的每一层，reshape_and_cache_mla 为每个 token 写一行潜向量 "
        "[kv_c_normed ({L}) | k_pe ({R})]，共 {W} 个值，写进 P 的块：",
    },
    "ch1_table": {"en": "P's block table (from the trace)", "zh": "P 的块表（取自 trace）"},
    "col_logical": {"en": "logical block", "zh": "逻辑块"},
    "col_p_block": {"en": "P block", "zh": "P 物理块"},
    "col_positions": {"en": "positions", "zh": "位置"},
    "col_tokens": {"en": "tokens", "zh": "token"},
    "col_ids": {"en": "ids", "zh": "id"},
    "ch1_sample": {
        "en": "P samples token {tok} ({ch}) at position {pos}. The proxy sent the prompt to P "
        "with max_tokens = 1, so P's request ends here ({reason}).",
        "zh": "P 在位置 {pos} 采样出 token {tok}（{ch}）。代理发给 P 的请求带 max_tokens = 1，"
        "所以 P 上的请求到此结束（{reason}）。",
    },
    "ch1_hold": {
        "en": "request_finished returns delay_free = {delay}: P holds blocks {blocks} until D "
        "has read them, and hands the proxy these kv_transfer_params:",
        "zh": "request_finished 返回 delay_free = {delay}：P 保留块 {blocks} 直到 D 读完，"
        "并把下面的 kv_transfer_params 交给代理：",
    },
    "ch1_freed": {
        "en": "P frees blocks {blocks} at its step {step}, once D has read them.",
        "zh": "D 读完之后，P 在它的第 {step} 步释放块 {blocks}。",
    },
    # ---- chapter 2: transfer ---------------------------------------------------------
    "ch2_admit": {
        "en": "D gets the original request with those params. get_num_new_matched_tokens "
        "reports {ext} external tokens (computed on P), loaded asynchronously; D "
        "allocates blocks {blocks} for them and computes nothing yet.",
        "zh": "D 收到带着这些参数的原始请求。get_num_new_matched_tokens 报告 {ext} 个外部 "
        "token（已在 P 上算好），异步加载；D 为它们分配块 {blocks}，此时什么也不算。",
    },
    "ch2_table": {
        "en": "KV blocks read from P into D (kv_transfer event)",
        "zh": "从 P 读进 D 的 KV 块（kv_transfer 事件）",
    },
    "col_d_block": {"en": "D block", "zh": "D 物理块"},
    "col_rows": {"en": "rows per layer", "zh": "每层行数"},
    "ch2_bytes": {
        "en": "{nbytes} bytes = {nb} blocks × {bs} slots × {layers} layers × {W} values × {e} "
        "bytes: each layer's latent rows and nothing else, no hidden state.",
        "zh": "{nbytes} 字节 = {nb} 块 × {bs} 槽 × {layers} 层 × {W} 个值 × {e} 字节："
        "只有各层的潜向量行，没有隐藏状态。",
    },
    "ch2_bytes_plain": {"en": "{nbytes} bytes moved.", "zh": "共搬运 {nbytes} 字节。"},
    "ch2_failed": {
        "en": "The read failed ({reason}); D computes the missing tokens itself.",
        "zh": "读取失败（{reason}）；D 在本地计算缺失的 token。",
    },
    # ---- chapter 3: D ----------------------------------------------------------------
    "ch3_wait": {
        "en": "D step {step}: the request is WAITING_FOR_REMOTE_KVS; nothing is scheduled "
        "while the K/V of {ext} tokens arrive.",
        "zh": "D 第 {step} 步：请求处于 WAITING_FOR_REMOTE_KVS；{ext} 个 token 的 K/V 到达之前，"
        "不调度任何计算。",
    },
    "ch3_ready": {
        "en": "D step {step}: K/V for {before} of the N = {n} prompt tokens arrived. "
        "_update_waiting_for_remote_kv sets num_computed_tokens = {nct} "
        "(N - 1).",
        "zh": "D 第 {step} 步：N = {n} 个提示词 token 中已有 {before} 个的 K/V 到达。"
        "_update_waiting_for_remote_kv 把它设为 num_computed_tokens = {nct}"
        "（即 N - 1）。",
    },
    "ch3_sched": {
        "en": "D step {step} schedules {sched} token, position {pos}: num_computed_tokens "
        "{before} → {after}.",
        "zh": "D 第 {step} 步调度 {sched} 个 token（位置 {pos}）：num_computed_tokens 从 "
        "{before} 变为 {after}。",
    },
    "ch3_table": {
        "en": "What D's cache holds, and what the first output token needs",
        "zh": "D 的缓存里有什么，第一个输出 token 又需要什么",
    },
    "col_pos": {"en": "pos", "zh": "位置"},
    "col_token": {"en": "token", "zh": "token"},
    "col_d_slot": {"en": "D block[slot]", "zh": "D 块[槽]"},
    "col_layer_kv": {"en": "layer {l} K/V row", "zh": "第 {l} 层 K/V 行"},
    "col_layers_kv": {"en": "layers {a}–{b} K/V rows", "zh": "第 {a}–{b} 层 K/V 行"},
    "col_h": {"en": "h after layer {l}", "zh": "第 {l} 层输出 h"},
    "cell_rewritten": {"en": "✓ rewritten", "zh": "✓ 重写"},
    "cell_needed": {"en": "needed → logits", "zh": "需要 → logits"},
    "ch3_explain": {
        "en": "The cache holds each layer's keys and values: {n} positions × {layers} layers × "
        "{W} values. The logits of the first output token are lm_head(norm(h[{last}])), "
        "where h[{last}] is the last layer's {H}-wide output at position {last}. No "
        "cache holds it and the connector did not move it (vLLM v1 connectors move KV "
        "only), so D runs position {last} through all {layers} layers again: it reuses "
        "the cached K/V of positions {reused}, writes row {last} once more (same "
        "values), and gets h[{last}].",
        "zh": "缓存里存的是每一层的 key 和 value：{n} 个位置 × {layers} 层 × {W} 个值。第一个"
        "输出 token 的 logits 是 lm_head(norm(h[{last}]))，其中 h[{last}] 是最后一层在"
        "位置 {last} 的输出（{H} 维）。任何缓存里都没有它，connector 也没有传它（vLLM v1 "
        "的 connector 只搬 KV），所以 D 必须让位置 {last} 再走一遍全部 {layers} 层：复用"
        "位置 {reused} 已缓存的 K/V，把第 {last} 行再写一次（值不变），得到 h[{last}]。",
    },
    "ch3_check": {
        "en": "Checked in the trace: D's first token is {d}, P's discarded token was {p}: "
        "{verdict}.",
        "zh": "用 trace 核对：D 的第一个 token 是 {d}，P 丢弃的那个 token 是 {p}：{verdict}。",
    },
    "same": {"en": "the same", "zh": "相同"},
    "different": {"en": "different", "zh": "不同"},
    "ch3_src": {
        "en": "The line that subtracts one: {path}, {qualname} (upstream: "
        "vllm/v1/core/sched/scheduler.py, the same method)",
        "zh": "做这个减 1 的代码：{path} 的 {qualname}（上游："
        "vllm/v1/core/sched/scheduler.py 中的同名方法）",
    },
    "ch3_local": {
        "en": "The same rule caps a local prefix-cache hit: {path}, {qualname} (upstream: "
        "vllm/v1/core/kv_cache_manager.py, the same method)",
        "zh": "本地前缀缓存的命中也受同一规则限制：{path} 的 {qualname}（上游："
        "vllm/v1/core/kv_cache_manager.py 中的同名方法）",
    },
    "ch3_local_hit": {
        "en": "The colocated engine ran the prompt a second time and reused {hit} cached "
        "tokens: floor((N - 1) / {bs}) × {bs} = floor({nm1} / {bs}) × {bs} = {expect}, "
        "not N = {n}. Hits are whole blocks and stop at N - 1.",
        "zh": "同机引擎把这段提示词又跑了一次，复用了 {hit} 个已缓存 token："
        "floor((N - 1) / {bs}) × {bs} = floor({nm1} / {bs}) × {bs} = {expect}，"
        "而不是 N = {n}。命中按整块计，且最多到 N - 1。",
    },
    # ---- chapter 4: routing ----------------------------------------------------------
    "ch4_intro": {
        "en": "D's step is a short extend: query_len = {q}, num_computed_tokens = {nct}, "
        "num_prompt_tokens = {n}. The two rules read the same values and disagree. The "
        "P/D run was made once under each rule:",
        "zh": "D 的这一步是一次“短 extend”：query_len = {q}，num_computed_tokens = {nct}，"
        "num_prompt_tokens = {n}。两种规则读的是同样的值，结论却不同。P/D 在两种规则下"
        "各跑了一次：",
    },
    "ch4_table": {
        "en": "D's first step, from each run's trace",
        "zh": "D 的第一步（取自各自运行的 trace）",
    },
    "main_run": {"en": " (main run)", "zh": "（主运行）"},
    "row_test": {"en": "test", "zh": "判定"},
    "row_path": {"en": "path", "zh": "路径"},
    "row_kernels": {"en": "kernels, layer 0", "zh": "算子（第 0 层）"},
    "row_flops": {"en": "FLOPs, all layers", "zh": "FLOPs（全部层）"},
    "row_bytes": {"en": "bytes, all layers", "zh": "访存字节（全部层）"},
    "row_token": {"en": "first token on D", "zh": "D 的第一个 token"},
    "row_logit": {"en": "its logit", "zh": "对应 logit"},
    "ch4_paths": {
        "en": 'Under rule "prompt" the token takes _forward_prefill: gather_cache collects '
        "the {ctx} cached latent rows, kv_b_proj up-projects every one of them to per-head "
        "K and V, flash_attn_varlen attends, and merge_attn_states joins the context part "
        'with the new-token part. Under rule "query_len" it takes _forward_decode: '
        "q_nope absorbs W_UK, mla_decode reads the latent rows as they are, and W_UV maps "
        "the result back.",
        "zh": '规则 "prompt" 下这个 token 走 _forward_prefill：gather_cache 取出 {ctx} 行已'
        "缓存的潜向量，kv_b_proj 把每一行都上投影成各个头的 K 和 V，flash_attn_varlen "
        "做注意力，merge_attn_states 再把上下文部分和新 token 部分合并。规则 "
        '"query_len" 下它走 _forward_decode：q_nope 吸收 W_UK，mla_decode 直接读潜向量'
        "行，最后由 W_UV 映射回来。",
    },
    "ch4_paths_no_context": {
        "en": 'With N = 1 there is no cached context: under rule "prompt" _forward_prefill '
        "runs flash_attn_varlen over the token alone (nothing to gather or merge), and "
        'under rule "query_len" _forward_decode runs mla_decode over one latent row. '
        "Try a longer --prompt to see the context gathered and up-projected.",
        "zh": 'N = 1 时没有已缓存的上下文：规则 "prompt" 下 _forward_prefill 只对这个 token '
        '自身做 flash_attn_varlen（无需 gather，也无需合并）；规则 "query_len" 下 '
        "_forward_decode 用 mla_decode 读一行潜向量。换一个更长的 --prompt，就能看到上下文"
        "被取出并上投影。",
    },
    "ch4_same": {
        "en": "Both rules give token {tok}: the same token (|Δ logit| = {d}). MLA's two forms "
        "are algebraically equal; only the rounding differs. The cost does not.",
        "zh": "两种规则得到的 token 都是 {tok}，完全相同（|Δ logit| = {d}）。MLA 的两种写法在"
        "代数上相等，只有舍入不同；开销却大不相同。",
    },
    "ch4_diff": {
        "en": "The rules gave different tokens, {a} and {b} (|Δ logit| = {d}).",
        "zh": "两种规则得到了不同的 token：{a} 和 {b}（|Δ logit| = {d}）。",
    },
    # ---- chapter 5: cost -------------------------------------------------------------
    "ch5_intro": {
        "en": "Modelled cost of D's one-token step with {model} dimensions ({H} heads, "
        "kv_lora_rank {L}, qk_rope_head_dim {R}), per layer, bf16 "
        "(pdlab/attention/cost.py):",
        "zh": "按 {model} 的维度（{H} 个头，kv_lora_rank {L}，qk_rope_head_dim {R}）估算 D "
        "这一个 token 的开销，单层、bf16（pdlab/attention/cost.py）：",
    },
    "ch5_table": {"en": "one token, one layer", "zh": "一个 token，单层"},
    "col_context": {"en": "context", "zh": "上下文长度"},
    "col_ratio": {"en": "ratio", "zh": "倍数"},
    "col_pf_flops": {"en": "prefill path FLOPs", "zh": "prefill 路径 FLOPs"},
    "col_dc_flops": {"en": "decode path FLOPs", "zh": "decode 路径 FLOPs"},
    "col_pf_bytes": {"en": "prefill path bytes", "zh": "prefill 路径字节"},
    "col_dc_bytes": {"en": "decode path bytes", "zh": "decode 路径字节"},
    "ch5_upproj": {
        "en": "The context up-projection (kv_b_proj over every cached latent) alone is {mf} "
        "MFLOP per context token per layer; the decode path reads {W} values per context "
        "token and up-projects nothing.",
        "zh": "仅上下文上投影（对每个已缓存潜向量做 kv_b_proj）就要每个上下文 token、每层 {mf} "
        "MFLOP；decode 路径每个上下文 token 只读 {W} 个值，不做任何上投影。",
    },
    "ch5_model": {
        "en": "Whole model ({layers} layers), {ctx} tokens of context: {pf} FLOPs through "
        "_forward_prefill against {df} through _forward_decode, for one token.",
        "zh": "整个模型（{layers} 层）、上下文 {ctx} 个 token：这一个 token 走 _forward_prefill "
        "要 {pf} FLOPs，走 _forward_decode 只要 {df}。",
    },
    "ch5_cross": {
        "en": "Absorbing costs more FLOPs per (query, key) pair but reads far fewer bytes; it "
        "also needs fewer FLOPs overall below about {x} query tokens per request, which "
        "is why decode absorbs and prefill does not.",
        "zh": "权重吸收让每个 (query, key) 对的 FLOPs 更多，但访存少得多；一个请求的 query "
        "token 少于约 {x} 个时，它的总 FLOPs 也更少。所以 decode 用吸收，prefill 不用。",
    },
    "ch5_upstream": {
        "en": "Upstream vLLM: the MLA metadata builder splits a batch with "
        "split_decodes_and_prefills (vllm/v1/attention/backends/utils.py) by query "
        "length, with decode_threshold = reorder_batch_threshold = 1 by default. A short "
        "extend like D's step counts as a decode and takes the absorbed MQA path "
        "(_forward_decode).",
        "zh": "上游 vLLM：MLA 元数据构建器用 split_decodes_and_prefills"
        "（vllm/v1/attention/backends/utils.py）按 query 长度划分批次，默认 "
        "decode_threshold = reorder_batch_threshold = 1。像 D 这一步这样的短 extend 被算作 "
        "decode，走权重吸收的 MQA 路径（_forward_decode）。",
    },
    "ch5_ascend": {
        "en": "vllm-ascend: its context-parallel MLA metadata builders classified requests by "
        "num_computed_tokens < num_prompt_tokens, which sends D's first step down the "
        "prefill path at the cost above; it later forced decode classification for these "
        "requests on D nodes (vllm-project/vllm-ascend#16435).",
        "zh": "vllm-ascend：它的上下文并行（context parallel）MLA 元数据构建器曾按 "
        "num_computed_tokens < num_prompt_tokens 分类，D 的第一步因此以上表的代价走 "
        "prefill 路径；后来改为在 D 节点上把这类请求强制归为 decode"
        "（vllm-project/vllm-ascend#16435）。",
    },
    # ---- chapter 6: the rest ---------------------------------------------------------
    "ch6_steps": {"en": "D, step by step", "zh": "D 的逐步记录"},
    "ch6_agree": {
        "en": "After the short extend every step on D has query_len = 1 and "
        "num_computed_tokens ≥ num_prompt_tokens: both rules call it a decode.",
        "zh": "短 extend 之后，D 上每一步都是 query_len = 1 且 num_computed_tokens ≥ "
        "num_prompt_tokens：两种规则都判为 decode。",
    },
    "ch6_outputs": {"en": "Outputs", "zh": "输出对比"},
    "col_run": {"en": "run", "zh": "运行"},
    "col_token_ids": {"en": "token ids", "zh": "token id"},
    "col_text": {"en": "text", "zh": "文本"},
    "run_pd": {"en": "P/D, rule {rule}", "zh": "P/D，规则 {rule}"},
    "run_local": {"en": "colocated, rule {rule}", "zh": "同机不分离，规则 {rule}"},
    "ch6_equal": {
        "en": "P/D against colocated: {verdict} ({n} tokens).",
        "zh": "P/D 与同机运行相比：{verdict}（{n} 个 token）。",
    },
    "equal": {"en": "equal, token for token", "zh": "逐 token 相同"},
    "not_equal": {"en": "NOT equal", "zh": "不相同"},
    "ch6_freed": {
        "en": "D frees blocks {blocks} at step {step}.",
        "zh": "D 在第 {step} 步释放块 {blocks}。",
    },
    # ---- files -----------------------------------------------------------------------
    "wrote": {"en": "wrote {path}", "zh": "已写入 {path}"},
    "wrote_plots": {
        "en": "wrote {n} plots to {dir}: {names}",
        "zh": "已写入 {n} 张图到 {dir}：{names}",
    },
}

# Column headers of pdlab.ui.console.step_table, for the Chinese tour (a header missing
# here, say one added later, stays as it is).
STEP_TABLE_HEADERS_ZH = {
    "inst": "实例",
    "step": "步",
    "request": "请求",
    "prompt N": "提示词 N",
    "computed before": "本步前已算",
    "scheduled": "本步调度",
    "computed after": "本步后已算",
    "routed to": "路由到",
    "sampled": "采样",
}


def tr(lang: str, key: str, **values: object) -> str:
    """The text for ``key`` in ``lang`` with ``values`` filled in, escaped for rich."""
    if lang not in LANGS:
        raise ValueError(f"lang={lang!r} is invalid: expected one of {LANGS}")
    return escape(TEXT[key][lang].format(**values))
