"""pdlab's message catalog: every word a learner reads, in English and Simplified Chinese,
side by side per key, rendered by one function, :func:`text` (``text(lang, key, **values)``).

Only words live here: every number is computed from a trace (or a cost model) and passed
in as a placeholder. vLLM identifiers (``num_computed_tokens``, ``forward_mha``, ...)
stay in English in both languages, as a Chinese-speaking engineer reads them in the code.
The catalog is a floor of its own: the engine, the lab (views, CLI, simulator, tools,
exercises) and the notebooks all read it, and it imports none of them. Its sections:
this module (the tour: no prefix; the widgets: ``w_``; the step table: ``st_``),
:mod:`pdlab.catalog.views` (trace views and plots), :mod:`pdlab.catalog.notebooks`,
:mod:`pdlab.catalog.designs`, :mod:`pdlab.catalog.mtp`, :mod:`pdlab.catalog.doctor`,
:mod:`pdlab.catalog.bench`, :mod:`pdlab.catalog.exercises` and :mod:`pdlab.catalog.errors`
(what exceptions say: ``err_``), all merged into :data:`TEXT` here; :mod:`pdlab.catalog.help`
(every ``--help`` text: ``help_``) is imported only when a help is printed. The Chinese
follows the glossary, ``docs/glossary.md``.
"""

from __future__ import annotations

from collections.abc import Callable

from pdlab.catalog.bench import TEXT_BENCH
from pdlab.catalog.designs import TEXT_DESIGNS
from pdlab.catalog.doctor import TEXT_DOCTOR
from pdlab.catalog.errors import TEXT_ERRORS
from pdlab.catalog.exercises import TEXT_EXERCISES
from pdlab.catalog.mtp import TEXT_MTP
from pdlab.catalog.notebooks import NOTEBOOKS
from pdlab.catalog.views import VIEWS

LANGS = ("en", "zh")


class Help(str):
    """A ``--help`` text not rendered yet: a ``help_`` key of :mod:`pdlab.catalog.help` and
    its values (a list or tuple value is joined with the language's separator); ``choices``
    are listed after the words (``one of: ...``) unless the words name them all. The string
    itself is the key: a help printed without :func:`pdlab.catalog.help.words` shows it."""

    key: str
    values: dict[str, object]
    choices: tuple[str, ...]

    def __new__(cls, key: str, choices: tuple[str, ...] = (), **values: object) -> Help:
        self = super().__new__(cls, key)
        self.key, self.values, self.choices = key, values, choices
        return self

    def listing(self, choices: tuple[str, ...]) -> Help:
        return Help(self.key, choices, **self.values)


TEXT: dict[str, dict[str, str]] = {
    # ---- opening ---------------------------------------------------------------------
    "title": {
        "en": "pdlab tour: why the decode instance runs the last prompt token again",
        "zh": "pdlab 导览：为什么解码实例要把最后一个提示词 token 再算一遍",
    },
    "question": {
        "en": "A user asked (vllm-project/vllm#28566): on the decode instance D of a P/D pair, why "
        "does the scheduler set num_computed_tokens to N - 1? And since num_computed_tokens < "
        "num_prompt_tokens then holds, does D run a prefill (_forward_prefill) for that one token? "
        "This tour runs such a request and shows what the trace recorded.",
        "zh": "有人问（vllm-project/vllm#28566）：在 P/D 分离的解码实例 D 上，调度器为什么把 "
        "num_computed_tokens 设成 N - 1？既然这时 num_computed_tokens < num_prompt_tokens 成立，D "
        "是否要为这一个 token 走一次 prefill 路径（_forward_prefill）？下面真实地跑一遍这样的请求，"
        "逐章展示 trace 记下的内容。",
    },
    "settings": {
        "en": "Run: prompt {prompt} · model {model} ({layers} layers, kv_lora_rank {L}, "
        "qk_rope_head_dim {R}) · block_size {bs} · model runner {runner} · MLA backend profile "
        "{mla}: {why} · prefill_context_parallel_size {pcp} · kernels {backend}",
        "zh": "本次运行：提示词 {prompt} · 模型 {model}（{layers} 层，kv_lora_rank {L}，"
        "qk_rope_head_dim {R}）· block_size {bs} · model runner {runner} · MLA 后端配置 {mla}："
        "{why} · prefill_context_parallel_size {pcp} · 算子后端 {backend}",
    },
    "how_to_read": {
        "en": "{n} chapters. Read one at a time with pdlab tour --chapter N (1 to {n}); in a "
        "terminal the whole tour opens in a pager (arrows or space to move, q to quit; "
        "--no-pager prints it straight through).",
        "zh": "共 {n} 章。可以用 pdlab tour --chapter N（1 到 {n}）一次读一章；"
        "在终端里完整导览会在分页器中打开（方向键或空格翻页，q 退出；--no-pager 直接全部打印）。",
    },
    "tour_failed": {
        "en": "The tour stops here: its chapters read what these requests computed.",
        "zh": "导览到此为止：各章读取的正是这些请求的计算结果。",
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
        "en": "Chapter 4 · The one-token step: a short extend, routed two ways",
        "zh": "第 4 章 · 这一步是“短 extend”：两种路由",
    },
    "ch5": {
        "en": "Chapter 5 · What each path costs at DeepSeek scale",
        "zh": "第 5 章 · 两条路径在 DeepSeek 规模下的开销",
    },
    "ch6": {"en": "Chapter 6 · The rest of the generation on D", "zh": "第 6 章 · D 上余下的生成"},
    # ---- chapter 1: P ----------------------------------------------------------------
    "ch1_tokens": {
        "en": "The prompt {prompt} is N = {n} tokens: the byte tokenizer gives one id per UTF-8 "
        "byte.",
        "zh": "提示词 {prompt} 共 N = {n} 个 token：字节级分词器把每个 UTF-8 字节映射为一个 id。",
    },
    "ch1_whole": {
        "en": "There is no prefill phase: each step gives a request num_tokens - "
        "num_computed_tokens tokens, up to the step's token budget.",
        "zh": "调度器里没有“预填充阶段”：每一步给请求 num_tokens - num_computed_tokens 个 token"
        "，上限是这一步的 token 预算。",
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
        "zh": "P 在位置 {pos} 采样出 token {tok}（{ch}）。代理发给 P 的请求带 max_tokens = 1，所"
        "以 P 上的请求到此结束（finish_reason 为 '{reason}'）。",
    },
    "ch1_hold": {
        "en": "request_finished returns delay_free = {delay}: P holds blocks {blocks} until D "
        "has read them, and hands the proxy these kv_transfer_params:",
        "zh": "request_finished 返回 delay_free = {delay}：P 保留块 {blocks} 直到 D 读完，并把下"
        "面的 kv_transfer_params 交给代理：",
    },
    "ch1_freed": {
        "en": "P frees blocks {blocks} at its step {step}, once D has read them.",
        "zh": "D 读完之后，P 在它的第 {step} 步释放块 {blocks}。",
    },
    # ---- chapter 2: transfer ---------------------------------------------------------
    "ch2_admit": {
        "en": "D gets the original request with those params. get_num_new_matched_tokens reports "
        "{ext} external tokens (computed on P), loaded asynchronously; D allocates blocks "
        "{blocks} for them and computes nothing yet.",
        "zh": "D 收到带着这些参数的原始请求。get_num_new_matched_tokens 报告 {ext} 个外部 token（"
        "已在 P 上算好），异步加载；D 为它们分配块 {blocks}，此时什么也不算。",
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
        "zh": "{nbytes} 字节 = {nb} 块 × {bs} 槽 × {layers} 层 × {W} 个值 × {e} 字节：只有各层的"
        "潜向量行，没有隐藏状态。",
    },
    "ch2_bytes_plain": {"en": "{nbytes} bytes moved.", "zh": "共搬运 {nbytes} 字节。"},
    "ch2_failed": {
        "en": "The read failed ({reason}); D computes the missing tokens itself.",
        "zh": "读取失败（{reason}）；D 在本地计算缺失的 token。",
    },
    # ---- chapter 3: D ----------------------------------------------------------------
    "ch3_wait": {
        "en": "D step {step}: the request is WAITING_FOR_REMOTE_KVS; nothing is scheduled while "
        "the K/V of {ext} tokens arrive.",
        "zh": "D 第 {step} 步：请求处于 WAITING_FOR_REMOTE_KVS；{ext} 个 token 的 K/V 到达之前，"
        "不调度任何计算。",
    },
    "ch3_ready": {
        "en": "D step {step}: K/V for {before} of the N = {n} prompt tokens arrived. "
        "_update_waiting_for_remote_kv sets num_computed_tokens = {nct} (N - 1).",
        "zh": "D 第 {step} 步：N = {n} 个提示词 token 中已有 {before} 个的 K/V 到达。"
        "_update_waiting_for_remote_kv 把它设为 num_computed_tokens = {nct}（即 N - 1）。",
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
        "en": "The cache holds each layer's keys and values: {n} positions × {layers} layers × {W} "
        "values. The logits of the first output token are lm_head(norm(h[{last}])), where "
        "h[{last}] is the last layer's {H}-wide output at position {last}. No cache holds it and "
        "the connector did not move it (0.33.0's P/D connectors move K/V; "
        "ExampleHiddenStatesConnector writes hidden states to disk for the extract_hidden_states "
        "speculative method and the aux-output connector moves auxiliary outputs such as the "
        "routed experts, and neither feeds D's first token), so D runs position {last} through all "
        "{layers} layers again: it reuses the cached K/V of positions {reused}, writes row {last} "
        "once more (equal to P's row up to rounding), and gets h[{last}].",
        "zh": "缓存里存的是每一层的 key 和 value：{n} 个位置 × {layers} 层 × {W} 个值。第一个输出 "
        "token 的 logits 是 lm_head(norm(h[{last}]))，其中 h[{last}] 是最后一层在位置 {last} 的输出"
        "（{H} 维）。任何缓存里都没有它，connector 也没有传它（0.33.0 做 P/D 的 connector 传的是 "
        "K/V；ExampleHiddenStatesConnector 为投机解码的 extract_hidden_states 方法把隐藏状态写到磁"
        "盘，aux_output_connector 传路由到的专家之类的辅助输出，两者都不给 D 的第一个 token 用），"
        "所以 D 必须让位置 {last} 再走一遍全部 {layers} 层：复用位置 {reused} 已缓存的 K/V，把第 "
        "{last} 行再写一次（与 P 写的值相同，至多差舍入误差），得到 h[{last}]。",
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
        "vllm/v1/core/sched/scheduler.py, the Scheduler method of the same name). It "
        "subtracts one only when every token landed (num_computed_tokens == num_tokens). "
        "A failed load fails the request under the default kv_load_failure_policy "
        '"fail"; under "recompute" D recomputes from the last valid block (pdlab too). A '
        "model with DeepSeek V4.1's sliding-window layers would replay a window tail after "
        "a load that left the window out (_mark_prefix_replay); NIXL loads every group, and "
        "for such a model P stops one token short instead (_prefill_backoff)",
        "zh": "做这个减 1 的代码：{path} 的 {qualname}（上游：vllm/v1/core/sched/scheduler.py 中"
        "调度器的同名方法）。只有所有 token 都到齐时（num_computed_tokens == num_tokens）才减 1。"
        '加载失败时，默认的 kv_load_failure_policy "fail" 让请求直接失败；设为 '
        '"recompute" 时，D 从最后一个有效的块开始重算（pdlab 也如此）。带 DeepSeek V4.1 '
        "滑动窗口层的模型，若加载没有带上窗口，会重放窗口末尾（_mark_prefix_replay）；NIXL "
        "会加载所有 KV 缓存组，对这类模型改为让 P 少算一个 token（_prefill_backoff）",
    },
    "ch3_cached": {
        "en": "The same N - 1 is what D would report as the request's cached prompt tokens "
        "(prompt_tokens_details.cached_tokens: {nct} of {n}, all of them from the transfer). "
        "0.33.0 reports P's own prefix-cache hits instead when P's kv_transfer_params carry them "
        "(remote_prefill_cached_tokens, vllm/v1/core/sched/scheduler.py:2485 and "
        "vllm/v1/engine/output_processor.py:798).",
        "zh": "D 若报告这个请求命中缓存的提示词 token 数（prompt_tokens_details.cached_tokens），报"
        "的也是这个 N - 1：{n} 个中的 {nct} 个，全部来自传输。P 的 kv_transfer_params 带上 P 自己的"
        "前缀缓存命中数时（remote_prefill_cached_tokens，vllm/v1/core/sched/scheduler.py:2485 与 "
        "vllm/v1/engine/output_processor.py:798），0.33.0 改报这个数。",
    },
    "ch3_local": {
        "en": "The same rule caps a local prefix-cache hit: {path}, {qualname} (upstream: "
        "vllm/v1/core/kv_cache_manager.py, the same method)",
        "zh": "本地前缀缓存的命中也受同一规则限制：{path} 的 {qualname}（上游："
        "vllm/v1/core/kv_cache_manager.py 中的同名方法）",
    },
    "ch3_local_hit": {
        "en": "The colocated engine ran the prompt a second time and reused {hit} cached tokens: "
        "floor((N - 1) / {bs}) × {bs} = floor({nm1} / {bs}) × {bs} = {expect}, not N = {n}. Hits "
        "are whole blocks and stop at N - 1.",
        "zh": "非分离引擎把这段提示词又跑了一次，复用了 {hit} 个已缓存 token：floor((N - 1) / "
        "{bs}) × {bs} = floor({nm1} / {bs}) × {bs} = {expect}，而不是 N = {n}。命中按整块计，且最"
        "多到 N - 1。",
    },
    # ---- chapter 4: routing ----------------------------------------------------------
    "ch4_intro": {
        "en": "D's step: query_len = {q}, num_computed_tokens = {nct}, num_prompt_tokens = {n}. "
        "The learner's expression is real, and vLLM 0.33.0 computes it in the model runner. By "
        "default 0.33.0 runs Model Runner V2 (vllm/v1/worker/gpu/model_runner.py): it orders the "
        "batch with rows that carry drafts first, then rows of the decode query length, then the "
        "rest by query length (sort_batch_req_ids), computes is_prefilling = "
        "num_computed_prefill_tokens < prefill_len for every row (prefill_len = {plen}, every "
        "token the runner was given with the request; here {prefilling}) and, without prefill "
        "context parallelism, marks a row that schedules one new token over cached context as "
        "prefill_runs_as_decode (here {rad}). Its comment says such a row runs as a decode, and "
        "the step stays decode_graph_eligible ({eligible}): a uniform decode batch, the one a full "
        "decode CUDA graph replays. D's first step is exactly that row. pdlab's copy of the rule:",
        "zh": "D 的这一步：query_len = {q}，num_computed_tokens = {nct}，num_prompt_tokens = {n}。"
        "提问里的表达式确实存在，vLLM 0.33.0 在 model runner 里计算它。0.33.0 默认运行 Model "
        "Runner V2（vllm/v1/worker/gpu/model_runner.py）：它给批次排序时先放带草稿的行，再放 query "
        "长度等于解码 query 长度的行，其余按 query 长度排（sort_batch_req_ids），为每一行计算 "
        "is_prefilling = num_computed_prefill_tokens < prefill_len（prefill_len = {plen}，即 model "
        "runner 随请求收到的全部 token；这里为 {prefilling}）；在不开预填充上下文并行时，把“在已缓"
        "存上下文之上只调度一个新 token”的行标记为 prefill_runs_as_decode（这里为 {rad}）。它的注释"
        "说这样的行按 decode 行运行，于是这一步仍是 decode_graph_eligible（{eligible}）：一个均匀解"
        "码批次，也就是完整的 decode CUDA graph 能重放的那种。D 的第一步恰好就是这样一行。pdlab 里"
        "对应的规则：",
    },
    "ch4_src": {
        "en": "{path}, {qualname} (upstream: vllm/v1/worker/gpu/model_runner.py, "
        "GPUModelRunner.gather_batch_req_state)",
        "zh": "{path} 的 {qualname}（上游：vllm/v1/worker/gpu/model_runner.py 中的 "
        "GPUModelRunner.gather_batch_req_state）",
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
    "ch4_dtype": {
        "en": "FLOPs and bytes above are the tiny model's, at its own dtype ({dtype}); chapter 5 "
        "models DeepSeek's widths in bf16 (a 576-value latent row is 1,152 bytes; an fp8 KV "
        "cache makes it 576 and halves the transfer: pdlab sim --kv-cache-dtype fp8).",
        "zh": "上表的 FLOPs 与字节数是这个小模型在它自己的精度（{dtype}）下的数字；第 5 章按 "
        "DeepSeek 的维度、bf16 建模（576 个值的潜向量行占 1,152 字节；fp8 KV 缓存把它减到 576 "
        "字节，传输量也减半：pdlab sim --kv-cache-dtype fp8）。",
    },
    "ch4_not_read": {"en": "is_prefilling not read", "zh": "不读 is_prefilling"},
    "col_v2_pcp1": {"en": "V2 (default)", "zh": "V2（默认）"},
    "col_v2_pcp2": {"en": "V2 + PCP 2", "zh": "V2 + PCP 2"},
    "col_v1_pcp1": {"en": "V1", "zh": "V1"},
    "ch4_paths": {
        "en": "Under PCP the token takes forward_mha: gather_cache collects the {ctx} cached "
        "latent rows, kv_b_proj up-projects every one of them to per-head K and V, "
        "flash_attn_varlen attends, and merge_attn_states joins the context part with the "
        "new-token part. Without PCP (V2 or V1) it takes forward_mqa: q_nope absorbs W_UK, "
        "mla_decode reads the latent rows as they are, and W_UV maps the result back.",
        "zh": "开启 PCP 时，这个 token 走 forward_mha：gather_cache 取出 {ctx} 行已缓存的潜向量，"
        "kv_b_proj 把每一行都上投影成各个头的 K 和 V，flash_attn_varlen 做注意力，"
        "merge_attn_states 再把上下文部分和新 token 部分合并。不开 PCP 时（V2 或 V1）它走 "
        "forward_mqa：q_nope 吸收 W_UK，mla_decode 直接读潜向量行，最后由 W_UV 映射回来。",
    },
    "ch4_paths_no_context": {
        "en": "With N = 1 there is no cached context and is_prefilling is false on D: every "
        "set-up takes forward_mqa. Try a longer --prompt to see the context gathered "
        "and up-projected under prefill context parallelism.",
        "zh": "N = 1 时没有已缓存的上下文，D 上的 is_prefilling 为假：每种设置都走 "
        "forward_mqa。换一个更长的 --prompt，就能看到开启 PCP 时上下文被取出并上投影。",
    },
    "ch4_why_pcp": {
        "en": "Why PCP flips the switch: the MLA builder passes treat_short_extends_as_decodes = "
        "not use_pcp, and under PCP V2 computes no prefill_runs_as_decode (decode_graph_eligible "
        'is then just "no row is prefilling"). The PCP manager (vllm/v1/worker/gpu/pcp_manager.py) '
        "cuts every row that is still prefilling into 2 × PCP chunks spread over the ranks and "
        "keeps every other row whole (replicated = ~is_prefilling; with PCP alone each whole row "
        "goes to one rank in turn). A one-token row's chunk size is 1, so rank 0 holds all of D's "
        "token: the split does not cut it. What routes it to forward_mha is the builder's not "
        "use_pcp with the rank-local is_prefilling. Upstream gives its reason in code rather than "
        "in words: beside prefill_runs_as_decode V2's comment says \"PCP partitions prefill "
        "rows\", the PCP manager orders each rank's rows decodes first by is_prefilling "
        "(_reorder_segments), and under PCP with DCP the K/V write gathers only the tokens past "
        "num_decode_tokens (vllm/v1/attention/ops/pcp.py). The attention's decode/prefill split "
        "has to agree with PCP's partition, and that partition is drawn by is_prefilling. (Decode "
        "context parallelism is a separate setting, opt-in and not tied to the decode role: see "
        "the last section of this chapter.) D's first step under PCP 2, beside two running decodes "
        "(dec-a, dec-b, drawn for the picture), laid out as that manager lays it out (* = still "
        "prefilling; pdlab reproduces only the routing, on one device):",
        "zh": "为什么 PCP 会翻转这个开关：MLA builder 传入 treat_short_extends_as_decodes = not "
        "use_pcp，而开启 PCP 时 V2 不计算 prefill_runs_as_decode（此时 decode_graph_eligible 只看“"
        "没有任何行在预填充”）。PCPManager（vllm/v1/worker/gpu/pcp_manager.py）把每个仍在预填充的行"
        "切成 2 × PCP 块分给各个 rank，其他行保持完整（replicated = ~is_prefilling；只开 PCP 时，每"
        "个完整的行轮流交给一个 rank）。只有一个 token 的行分块大小为 1，这个 token 整个落在 rank "
        "0 上，切分并没有把它切开。把它送进 forward_mha 的，是 builder 的 not use_pcp 加上 rank 本"
        "地的 is_prefilling。上游没有用文字说明理由，理由写在代码里：V2 在 prefill_runs_as_decode "
        "旁的注释写着“PCP partitions prefill rows”；PCPManager 按 is_prefilling 把每个 rank 上的行"
        "排成 decode 行在前（_reorder_segments）；PCP 与 DCP 同开时，K/V 写入只收集 "
        "num_decode_tokens 之后的 token（vllm/v1/attention/ops/pcp.py）。注意力对 decode 行与 "
        "prefill 行的划分必须与 PCP 的切分一致，而这个切分正是按 is_prefilling 划的。（解码上下文并"
        "行是另一项设置，需显式开启，与解码角色无关：见本章最后一节。）下面是 PCP 2 时 D 的第一步（"
        "旁边画了两个正在解码的请求 dec-a、dec-b 作示意）按 PCPManager 的方式排布的样子（* 表示仍在"
        "预填充；pdlab 只在一个设备上复现路由）：",
    },
    "ch4_v1": {
        "en": "V1 (VLLM_USE_V2_MODEL_RUNNER=0) computes is_prefilling = num_computed_tokens "
        "< num_prompt_tokens and sorts the batch into four regions (decode, "
        "short_extend, long_extend, prefill). It has no prefill_runs_as_decode, and it "
        "refuses prefill context parallelism, which 0.33.0 implements only in V2. For "
        "this step its split is the same as V2's.",
        "zh": "V1（VLLM_USE_V2_MODEL_RUNNER=0）计算 is_prefilling = num_computed_tokens < "
        "num_prompt_tokens，并把批次排成四个区（decode 行、short_extend、long_extend、"
        "prefill 行）。它没有 prefill_runs_as_decode，也拒绝预填充上下文并行：0.33.0 只"
        "在 V2 中实现了 PCP。对这一步，它的划分与 V2 相同。",
    },
    "ch4_same": {
        "en": "Every set-up gives token {tok} (largest |Δ logit| = {d}). MLA's two forms are "
        "algebraically equal; only the rounding differs. The cost does not.",
        "zh": "每种设置得到的 token 都是 {tok}（|Δ logit| 最大为 {d}）。MLA 的两种写法在代数"
        "上相等，只有舍入不同；开销却大不相同。",
    },
    "ch4_diff": {
        "en": "The set-ups gave different tokens, {a} and {b} (|Δ logit| = {d}).",
        "zh": "不同设置得到了不同的 token：{a} 和 {b}（|Δ logit| = {d}）。",
    },
    # ---- chapter 5: cost -------------------------------------------------------------
    "ch4_fresh_decode": {
        "en": "Seen from P's side: under FLASH_ATTN_MLA, the backend vLLM picks on an H100 or H200 "
        "with an auto/bf16 KV cache (reorder_batch_threshold = {t}, varlen; FLASH_ATTN_MLA refuses "
        "an fp8 cache, and vLLM then picks FLASHMLA: 128, uniform), the same prompt as a fresh "
        "request (query_len = {q}, no context, region {region}) took {forward}: P's own short "
        "prompt runs the absorbed decode path. It saves no FLOPs: with no cached context the "
        "absorbed form costs more (chapter 5). Upstream's comment beside the threshold says only "
        '"process small prefills with decode pathway"; it gives no reason. pdlab\'s inference: '
        "the decode path reads fewer bytes and launches fewer kernels (chapter 5's bytes), in a "
        "kernel tuned for it, and that outweighs the FLOPs for a short prompt.",
        "zh": "从 P 这边看：在 FLASH_ATTN_MLA 下（H100 或 H200 上、KV 缓存为 auto/bf16 时 vLLM 选择"
        "的后端，reorder_batch_threshold = {t}，VARLEN；FLASH_ATTN_MLA 不接受 fp8 缓存，这时 vLLM "
        "选 FLASHMLA：128，UNIFORM），同一段提示词作为新请求（query_len = {q}，没有上下文，处于 "
        "{region} 区）走了 {forward}：P 自己的短提示词也走权重吸收的 decode 路径。这并不省 FLOPs："
        "没有已缓存上下文时，吸收形式的 FLOPs 反而更多（见第 5 章）。上游在这个阈值旁的注释只有一句"
        "“process small prefills with decode pathway”，没有给出理由。pdlab 的推断：decode 路径读的"
        "字节更少、启动的算子更少（见第 5 章的字节数），算子也专为它调过，对短提示词来说这比 FLOPs "
        "更重要。",
    },
    "ch4_fresh_prefill": {
        "en": "Seen from P's side: under FLASH_ATTN_MLA, the backend vLLM picks on an H100 or H200 "
        "with an auto/bf16 KV cache (reorder_batch_threshold = {t}, varlen; with an fp8 cache vLLM "
        "picks FLASHMLA: 128, uniform), the same prompt as a fresh request (query_len = {q}, no "
        "context, region {region}) is longer than the threshold and took {forward}. A prompt of at "
        "most {t} tokens would take the absorbed decode path (under a UNIFORM backend such as "
        "FLASHMLA, only when every row of the batch has the same query length).",
        "zh": "从 P 这边看：在 FLASH_ATTN_MLA 下（H100 或 H200 上、KV 缓存为 auto/bf16 时 vLLM 选择"
        "的后端，reorder_batch_threshold = {t}，VARLEN；fp8 缓存时 vLLM 选 FLASHMLA：128，UNIFORM）"
        "，同一段提示词作为新请求（query_len = {q}，没有上下文，处于 {region} 区）超过了阈值，走了 "
        "{forward}。不超过 {t} 个 token 的提示词会走权重吸收的 decode 路径（在 FLASHMLA 这类 "
        "UNIFORM 后端下，只有批次里每一行的 query 长度都相同时才会如此）。",
    },
    "ch4_renames": {
        "en": "Where the learner's code went (older vLLM → 0.33.0)",
        "zh": "提问里的代码去了哪里（旧版 vLLM → 0.33.0）",
    },
    # ---- chapter 4: then and now (pdlab/ui/tour_then.py) ---------------------------
    "tn_title": {
        "en": "Then and now: where the learner's rule decides D's row",
        "zh": "从提问时到现在：提问里的规则在哪里决定 D 的这一行",
    },
    "tn_intro": {
        "en": "The question was asked in November 2025 about code in which, for DeepSeek, "
        "num_computed_tokens < num_prompt_tokens decides the prefill path. Which code that "
        "is depends on the release and the setting. For each: the release, the setting, "
        "the source line that decides D's row, and what pdlab's split (split_query_lens, "
        "upstream's rule) gives for that row under it: one token over num_computed_tokens "
        "= {nct} of num_prompt_tokens = {n}, padded to 1 + K under MTP.",
        "zh": "这个问题提于 2025 年 11 月，针对的代码里，DeepSeek 走不走 prefill 路径由 "
        "num_computed_tokens < num_prompt_tokens 决定。这是哪一份代码，取决于版本和设置。"
        "下面逐一列出：版本、设置、决定 D 这一行的源码行，以及按这条规则用 pdlab 的划分"
        "（split_query_lens，与上游规则相同）算出的结果。这一行是在 num_computed_tokens = "
        "{nct}、num_prompt_tokens = {n} 之上的一个 token，MTP 下补齐到 1 + K 个。",
    },
    "tn_s_v0111": {
        "en": "the release of November 2025, any setting: the MLA split reads query "
        "lengths only (split_decodes_and_prefills has no is_prefilling yet, utils.py:817)",
        "zh": "2025 年 11 月的版本，任何设置：MLA 的划分只看 query 长度"
        "（split_decodes_and_prefills 还没有 is_prefilling，utils.py:817）",
    },
    "tn_s_default": {
        "en": "default (Model Runner V2, no PCP): is_prefilling is computed "
        "(gpu/model_runner.py:1338) but the split does not read it",
        "zh": "默认设置（Model Runner V2，不开 PCP）：is_prefilling 算出来了"
        "（gpu/model_runner.py:1338），但划分不读它",
    },
    "tn_s_pcp": {
        "en": "prefill context parallelism (PCP 2): the builder passes not use_pcp = False, "
        "so the split ORs in the rank-local is_prefilling",
        "zh": "预填充上下文并行（PCP 2）：builder 传入 not use_pcp = False，划分于是并入 "
        "rank 本地的 is_prefilling",
    },
    "tn_s_dcp": {
        "en": "decode context parallelism (DCP 2, opt-in, default 1, on any instance) on a "
        "NIXL instance: the interleave becomes the block size, the threshold is "
        "recomputed, and use_pcp stays False",
        "zh": "解码上下文并行（DCP 2：需显式开启，默认 1，哪种实例都可以用），NIXL 实例上："
        "交错粒度变成块大小，阈值随之重算，use_pcp 仍为 False",
    },
    "tn_s_mtp": {
        "en": "MTP, K = 1, no DCP: the scheduler pads D's row with K placeholder drafts and "
        "the threshold rises to 1 + K. With DCP on a NIXL instance vLLM refuses MTP at "
        "start-up (v1/worker/cp_utils.py:46)",
        "zh": "MTP，K = 1，不开 DCP：调度器给 D 的这一行补上 K 个占位草稿，阈值升到 1 + K。"
        "NIXL 实例开了 DCP 时，vLLM 在启动时就拒绝 MTP（v1/worker/cp_utils.py:46）",
    },
    "tn_s_ascend_2025": {
        "en": "(November 2025), PCP or DCP > 1: the MLA split reads query lengths only "
        "(attention/utils.py:161-165), while the context-parallel metadata counts decodes "
        "by the learner's rule, turned around",
        "zh": "（2025 年 11 月），PCP 或 DCP > 1：MLA 的划分只看 query 长度"
        "（attention/utils.py:161-165），上下文并行的元数据却按提问里的规则（反过来写）"
        "统计 decode 行",
    },
    "tn_s_ascend_cp": {
        "en": "(at #10973), PCP or DCP > 1: the MLA builder counts every "
        "row still in its prompt as a prefill",
        "zh": "（#10973 所在的提交），PCP 或 DCP > 1：MLA builder 把仍在提示词阶段的每一行"
        "都算作 prefill 行",
    },
    "tn_s_ascend_fix": {
        "en": '#10973 ("Fix PD recompute decode classification for MTP"), on a decode '
        "instance with recompute_scheduler_enable: D's first row is a decode again",
        "zh": "#10973（“Fix PD recompute decode classification for MTP”），在开启 "
        "recompute_scheduler_enable 的解码实例上：D 的第一行重新算作 decode 行",
    },
    "tn_run": {
        "en": "D's row: query_len {q}, threshold {t}, is_prefilling {pf} → {path}: {verdict}",
        "zh": "D 的这一行：query_len {q}，阈值 {t}，is_prefilling {pf} → {path}：{verdict}",
    },
    "tn_decode": {"en": "a decode", "zh": "decode 行"},
    "tn_prefill": {"en": "a prefill", "zh": "prefill 行"},
    "tn_forward": {"en": "{path}, {forward}", "zh": "{path}，{forward}"},
    "tn_holds": {"en": "the learner's rule decides it", "zh": "由提问里的规则决定"},
    "tn_not": {"en": "the learner's rule is not read", "zh": "提问里的规则没有被读到"},
    "tn_ascend_meta": {
        "en": "its metadata: num_computed_tokens >= num_prompt_tokens is {counted}, so D's "
        "row is not among the decodes there",
        "zh": "它的元数据里：num_computed_tokens >= num_prompt_tokens 为 {counted}，所以 D "
        "的这一行不在 decode 行之列",
    },
    "tn_outro": {
        "en": "So the premise holds only where something reads is_prefilling for the split "
        "of DeepSeek's MLA: in vLLM 0.33.0 that is PCP alone; in 0.11.1 nothing did; on "
        "vllm-ascend (the plugin that runs vLLM on Ascend NPUs) it is the rule of its MLA "
        "builder under context parallelism, and #10973 exempts D's first step on a decode "
        "instance with recompute_scheduler_enable, where the rule had sent D's row down the "
        "prefill path under DCP and crashed the MTP drafter under PCP.",
        "zh": "所以，只有在 DeepSeek 的 MLA 划分读取 is_prefilling 的地方，提问的前提才成立："
        "vLLM 0.33.0 里只有 PCP；0.11.1 里没有任何地方读它；在 vllm-ascend（让 vLLM 跑在昇腾 "
        "NPU 上的插件）上，它是上下文并行时 MLA builder 的规则，而 #10973 为开启 "
        "recompute_scheduler_enable 的解码实例上 D 的第一步开了例外：这条规则曾在 DCP 下把 D "
        "的这一行送进 prefill 路径，在 PCP 下让 MTP 的草稿模型崩溃。",
    },
    "ch5_intro": {
        "en": "Modelled cost of D's one-token step with {model} dimensions ({H} heads, "
        "kv_lora_rank {L}, qk_rope_head_dim {R}), per layer, bf16 (pdlab/sim/kernel_costs.py; "
        "forward_mha as FLASH_ATTN's FA3 runs it on Hopper, V passed strided):",
        "zh": "按 {model} 的维度（{H} 个头，kv_lora_rank {L}，qk_rope_head_dim {R}）估算 D 这一个"
        " token 的开销，单层、bf16（pdlab/sim/kernel_costs.py；forward_mha 按 Hopper 上 "
        "FLASH_ATTN 的 FA3 计，V 以跨步视图传入，不做拷贝）：",
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
        "MFLOP per context token per layer; the decode path reads {W} values per context token "
        "and up-projects nothing.",
        "zh": "仅上下文上投影（对每个已缓存潜向量做 kv_b_proj）就要每个上下文 token、每层 {mf} "
        "MFLOP；decode 路径每个上下文 token 只读 {W} 个值，不做任何上投影。",
    },
    "ch5_model": {
        "en": "Whole model ({layers} layers), {ctx} tokens of context, attention only (the "
        "projections, norms and MLP/MoE are the same on both paths and are not counted): {pf} "
        "through forward_mha against {df} through forward_mqa, for one token.",
        "zh": "整个模型（{layers} 层）、上下文 {ctx} 个 token，只计注意力部分（各投影、归一化和 "
        "MLP/MoE 两条路径相同，未计入）：这一个 token 走 forward_mha 要 {pf}，走 "
        "forward_mqa 只要 {df}。",
    },
    "ch5_cross": {
        "en": "Absorbing moves the up-projection from the keys to the queries: W_UK and W_UV cost "
        "per query what kv_b_proj costs per key ({mf} MFLOP), and each (query, key) pair costs "
        "({a}) instead of ({b}) per head. So it saves FLOPs only when few queries attend over a "
        "long cached context (below about {x} query tokens per request, the context much longer "
        "than the query), and it always reads fewer bytes. For a fresh prompt, with no cached "
        "context, it never saves FLOPs:",
        "zh": "权重吸收把上投影从 key 挪到了 query 上：W_UK 和 W_UV 对每个 query 的开销，正好等于 "
        "kv_b_proj 对每个 key 的开销（{mf} MFLOP），而每个 (query, key) 对每个头的开销是 ({a})，而"
        "不是 ({b})。所以只有当少量 query 面对很长的已缓存上下文时（每个请求少于约 {x} 个 query "
        "token，且上下文远长于 query），它才省 FLOPs；访存字节则总是更少。对没有已缓存上下文的新提"
        "示词，它从不省 FLOPs：",
    },
    "ch5_fresh_table": {
        "en": "a fresh prompt, one layer, attention FLOPs",
        "zh": "新提示词，单层，注意力 FLOPs",
    },
    "col_prompt_len": {"en": "prompt tokens", "zh": "提示词 token 数"},
    "col_naive_flops": {"en": "forward_mha (naive)", "zh": "forward_mha（朴素形式）"},
    "col_absorbed_flops": {"en": "forward_mqa (absorbed)", "zh": "forward_mqa（吸收形式）"},
    "ch5_upstream": {
        "en": "Upstream vLLM 0.33.0: the MLA metadata builder "
        "(vllm/model_executor/layers/attention/mla_attention.py) calls split_decodes_and_prefills "
        "(vllm/v1/attention/backends/utils.py) with decode_threshold = its backend's "
        "reorder_batch_threshold (1 for TRITON_MLA, FLASHINFER_MLA, CUTLASS_MLA and CPU_MLA, 128 "
        "for FLASHMLA, 512 for FLASH_ATTN_MLA; speculative decoding raises it to the verify width, "
        "decode context parallelism can force 1) and treat_short_extends_as_decodes = not use_pcp. "
        "By default D's short extend is a decode (forward_mqa); with prefill_context_parallel_size "
        "> 1 it is a prefill (forward_mha), at the cost above. Upstream gives no FLOP argument for "
        "the 128 and 512 thresholds (its comment says small prefills use the decode pathway): they "
        "are the backends' own choice.",
        "zh": "上游 vLLM 0.33.0：MLA builder（vllm/model_executor/layers/attention/mla_attention.py"
        "）调用 split_decodes_and_prefills（vllm/v1/attention/backends/utils.py）时，"
        "decode_threshold 取后端的 reorder_batch_threshold（TRITON_MLA、FLASHINFER_MLA、"
        "CUTLASS_MLA 和 CPU_MLA 为 1，FLASHMLA 为 128，FLASH_ATTN_MLA 为 512；投机解码会把它提高到"
        "验证宽度，解码上下文并行可能强制为 1），并传入 treat_short_extends_as_decodes = not "
        "use_pcp。默认情况下 D 的短 extend 算作 decode 行（forward_mqa）；"
        "prefill_context_parallel_size > 1 时它算作 prefill 行（forward_mha），付出上表的代价。对"
        "于 128 和 512 这两个阈值，上游没有给出 FLOPs 上的理由（注释只有一句“process small "
        "prefills with decode pathway”）：这是各后端自己的选择；少读字节、少启动算子是 pdlab 的推断"
        "。",
    },
    "ch5_others": {
        "en": "The same switch elsewhere in 0.33.0: the sparse MLA builder and the MLA "
        "indexer pass not use_pcp as well. The Mamba and GDN builders pass False, but "
        "first rewrite is_prefilling: Mamba turns a one-token prefill with prior state "
        "into a decode row (its comment names NIXL disaggregation's h(N-1) -> N "
        "recompute path), and GDN counts as prefills only rows with no prior state "
        "(first chunks). So D's first step is a decode there too.",
        "zh": "0.33.0 中其他地方的同一开关：稀疏 MLA builder 和 MLA indexer 同样传 not use_pcp"
        "。Mamba 和 GDN 的 builder 传 False，但会先改写 is_prefilling：Mamba 把带有先前状态"
        "的单 token prefill 行改成 decode 行（它的注释点名了 NIXL 分离部署中 h(N-1) -> N "
        "的重算路径），GDN 只把没有先前状态的行（第一个分块）算作 prefill 行。所以在那里 "
        "D 的第一步同样是 decode 行。",
    },
    # ---- chapter 6: the rest ---------------------------------------------------------
    "ch6_steps": {"en": "D, step by step", "zh": "D 的逐步记录"},
    "ch6_agree": {
        "en": "After the short extend every step on D has query_len = 1 and is_prefilling false "
        "(region decode): a decode under either setting.",
        "zh": "短 extend 之后，D 上每一步都是 query_len = 1 且 is_prefilling 为假（decode 区）："
        "两种设置下都是 decode 行。",
    },
    "ch6_outputs": {"en": "Outputs", "zh": "输出对比"},
    "col_run": {"en": "run", "zh": "运行"},
    "col_token_ids": {"en": "token ids", "zh": "token id"},
    "col_text": {"en": "text", "zh": "文本"},
    "run_pd": {
        "en": "P/D, prefill_context_parallel_size = {pcp}",
        "zh": "P/D，prefill_context_parallel_size = {pcp}",
    },
    "run_local": {
        "en": "colocated, prefill_context_parallel_size = {pcp}",
        "zh": "非分离，prefill_context_parallel_size = {pcp}",
    },
    "ch6_equal": {
        "en": "P/D against colocated: {verdict} ({n} tokens).",
        "zh": "P/D 与非分离运行相比：{verdict}（{n} 个 token）。",
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
    # ---- widgets -----------------------------------------------------------------------
    "w_prompt_len": {"en": "prompt length", "zh": "提示词长度"},
    "w_block_size": {"en": "block size", "zh": "块大小"},
    "w_pcp": {"en": "prefill_context_parallel_size", "zh": "prefill_context_parallel_size"},
    "w_mla_backend": {"en": "MLA backend", "zh": "MLA 后端"},
    "w_preset": {"en": "preset", "zh": "预设模型"},
    "w_d_first": {"en": "D's first step", "zh": "D 的第一步"},
    "w_route": {"en": "routing decision", "zh": "路由结果"},
    "w_kernels": {"en": "kernels", "zh": "调用的算子"},
    "w_kernels_note": {
        "en": "D's first step, layer 0 of {layers}",
        "zh": "D 的第一步，第 0 层（共 {layers} 层）",
    },
    "w_cost": {"en": "modelled cost", "zh": "代价（模型估算）"},
    "w_tokens": {"en": "tokens", "zh": "生成的 token"},
    "w_p_trace": {"en": "P: the prefill instance", "zh": "P：预填充实例"},
    "w_d_trace": {"en": "D: the decode instance", "zh": "D：解码实例"},
    "w_ran": {
        "en": "ran a P/D pair and a colocated engine ({model} model, backend {backend}) in "
        "{s:.2f} s",
        "zh": "运行了一个 P/D 对和一个非分离引擎（{model} 模型，后端 {backend}），用时 {s:.2f} 秒",
    },
    "w_equal": {"en": "equal", "zh": "一致"},
    "w_differ": {"en": "DIFFER", "zh": "不一致"},
    "w_colocated": {"en": "colocated", "zh": "非分离"},
    "w_step": {"en": "step", "zh": "步"},
    "w_event": {"en": "event", "zh": "事件"},
    "w_details": {"en": "details", "zh": "内容"},
    "w_path": {"en": "path", "zh": "路径"},
    "w_ratio": {
        "en": "forward_mha costs {f:.3g}x the FLOPs and {b:.3g}x the bytes of forward_mqa",
        "zh": "forward_mha 的 FLOPs 是 forward_mqa 的 {f:.3g} 倍，访存字节是 {b:.3g} 倍",
    },
    "w_context": {
        "en": "{preset}, one token over context N-1 = {ctx}",
        "zh": "{preset}，一个 token，上下文 N-1 = {ctx}",
    },
    "w_error": {"en": "error", "zh": "错误"},
    "w_free": {"en": "free", "zh": "空闲"},
    "w_used": {"en": "in use", "zh": "使用中"},
    "w_cached": {"en": "cached, free", "zh": "已缓存、空闲"},
    "w_queue": {"en": "free queue, evicted first on the left", "zh": "空闲队列（左边最先被驱逐）"},
    "w_none": {"en": "(none)", "zh": "（无）"},
    "w_prompt": {"en": "prompt", "zh": "提示词"},
    "w_add": {"en": "add request", "zh": "添加请求"},
    "w_do_step": {"en": "step", "zh": "执行一步"},
    "w_request": {"en": "request", "zh": "请求"},
    "w_do_free": {"en": "free", "zh": "释放"},
    "w_reset": {"en": "reset", "zh": "重置"},
    "w_no_requests": {"en": "no requests yet", "zh": "还没有请求"},
    "w_weights": {"en": "weights", "zh": "权重"},
    # ---- step table headers ------------------------------------------------------------
    "st_inst": {"en": "inst", "zh": "实例"},
    "st_step": {"en": "step", "zh": "步"},
    "st_request": {"en": "request", "zh": "请求"},
    "st_prompt_N": {"en": "prompt N", "zh": "提示词 N"},
    "st_computed_before": {"en": "computed before", "zh": "本步前已算"},
    "st_scheduled": {"en": "scheduled", "zh": "本步调度"},
    "st_computed_after": {"en": "computed after", "zh": "本步后已算"},
    "st_routed_to": {"en": "routed to", "zh": "路由到"},
    "st_sampled": {"en": "sampled", "zh": "采样"},
    # narrow headers (under 100 columns or so) and what the legend says they stand for
    "st_legend": {"en": "Columns: ", "zh": "列："},
    "st_request_s": {"en": "req", "zh": "请求"},
    "st_prompt_N_s": {"en": "N", "zh": "N"},
    "st_prompt_N_m": {"en": "num_prompt_tokens", "zh": "num_prompt_tokens（提示词长度）"},
    "st_computed_before_s": {"en": "before", "zh": "前"},
    "st_computed_before_m": {
        "en": "num_computed_tokens before",
        "zh": "本步前的 num_computed_tokens",
    },
    "st_scheduled_s": {"en": "sched", "zh": "调度"},
    "st_scheduled_m": {"en": "tokens scheduled", "zh": "本步调度的 token 数"},
    "st_computed_after_s": {"en": "after", "zh": "后"},
    "st_computed_after_m": {
        "en": "num_computed_tokens after",
        "zh": "本步后的 num_computed_tokens",
    },
    "st_sampled_s": {"en": "tok", "zh": "采样"},
    "st_sampled_m": {"en": "token sampled", "zh": "采样出的 token"},
    "st_error": {"en": "error", "zh": "出错"},
    "st_failed": {
        "en": "{req} failed on {inst} at step {step}: {error}",
        "zh": "{req} 在 {inst} 的第 {step} 步出错：{error}",
    },
    # ---- which weights a run loaded (trace.meta["weights"]) ------------------------------
    "weights_line": {"en": "Weights: {weights}", "zh": "权重：{weights}"},
    "weights_trained": {
        "en": "trained (the checkpoint pdlab ships, made by pdlab train)",
        "zh": "训练所得（pdlab 附带的检查点，由 pdlab train 训练）",
    },
    "weights_random": {
        "en": "random, seeded (--weights random): the output is noise, not text",
        "zh": "随机，按种子生成（--weights random）：输出是噪声，不是文字",
    },
    "weights_file": {"en": "from {name}", "zh": "来自 {name}"},
}


_SECTIONS = (VIEWS, NOTEBOOKS, TEXT_DESIGNS, TEXT_MTP, TEXT_DOCTOR, TEXT_BENCH, TEXT_EXERCISES)
for _table in (*_SECTIONS, TEXT_ERRORS):
    if set(_table) & set(TEXT):
        raise KeyError(f"keys defined twice: {sorted(set(_table) & set(TEXT))}")
    TEXT.update(_table)


def check_lang(lang: str) -> str:
    if lang not in LANGS:  # the catalog's own words; pdlab.errors reads the catalog, not back
        allowed = text("en", "err_x_one_of", choices=LANGS)
        raise ValueError(text("en", "err_invalid", name="lang", value=lang, allowed=allowed))
    return lang


def text(lang: str, key: str, **values: object) -> str:
    """The words for ``key`` in ``lang``, with ``values`` filled in (not escaped: a view
    escapes for its medium, rich markup or HTML). A ``help_`` key is read from
    :mod:`pdlab.catalog.help`, imported then."""
    if key.startswith("help_"):
        from pdlab.catalog.help import TEXT_HELP as table
    else:
        table = TEXT
    return table[key][check_lang(lang)].format(**values)


def words(lang: str) -> Callable[..., str]:
    """:func:`text` with ``lang`` bound, for a notebook: ``t = words(LANG)``, then
    ``print(t("nb1_taken", ids=taken))``."""
    check_lang(lang)
    return lambda key, **values: text(lang, key, **values)


def labels(lang: str) -> dict[str, str]:
    """Every widget label (the ``w_`` keys, without the prefix) in ``lang``."""
    check_lang(lang)
    return {k[2:]: v[lang] for k, v in TEXT.items() if k.startswith("w_")}
