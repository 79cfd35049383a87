"""The words of the first-token designs and of ``pdlab sim``, in English and Simplified
Chinese: merged into :data:`pdlab.ui.text.TEXT`, read through :func:`pdlab.ui.text.text`.

Keys: ``dz_`` for the designs table, ``sim_`` for the simulator's report, ``ch7`` for the
tour's closing chapter. Chinese terms: 非分离 for colocated, 前缀缓存 for prefix caching,
潜向量 for latent; vLLM identifiers stay in English.
"""

from __future__ import annotations

TEXT_DESIGNS: dict[str, dict[str, str]] = {
    "dz_title": {
        "en": "Four designs for D's first token, run on the same prompts",
        "zh": "D 的第一个 token 的四种设计，在同一批提示词上实测",
    },
    "dz_mode": {
        "en": "design",
        "zh": "设计",
    },
    "dz_same": {
        "en": "= colocated",
        "zh": "与非分离一致",
    },
    "dz_kv": {
        "en": "K/V bytes",
        "zh": "K/V 字节",
    },
    "dz_payload": {
        "en": "+ with them",
        "zh": "另附字节",
    },
    "dz_flops": {
        "en": "D FLOPs for token 1",
        "zh": "D 为 token 1 的 FLOPs",
    },
    "dz_known": {
        "en": "token 1 known",
        "zh": "token 1 何时已知",
    },
    "dz_first": {
        "en": "D's first step",
        "zh": "D 的第一步",
    },
    "dz_latency": {
        "en": "latency after P ({gpu})",
        "zh": "P 后延迟 {gpu}",
    },
    "dz_link_source": {
        "en": "one 400 Gb/s InfiniBand port per GPU, an assumption",
        "zh": "每块 GPU 一个 400 Gb/s InfiniBand 端口，属假设",
    },
    "dz_v3": {
        "en": "DeepSeek-V3 widths, N = {n}: bytes / D FLOPs / latency",
        "zh": "DeepSeek-V3 宽度，N = {n}：字节 / D FLOPs / 延迟",
    },
    "dz_yes": {
        "en": "yes",
        "zh": "是",
    },
    "dz_no": {
        "en": "NO",
        "zh": "否",
    },
    "dz_prefilling": {
        "en": "prefilling",
        "zh": "仍在预填充",
    },
    "dz_decode": {
        "en": "decode",
        "zh": "解码",
    },
    "dz_note": {
        "en": "Bytes, steps and routing are the trace's; FLOPs and latency are modelled "
        "(pdlab/attention/cost.py, {gpu} roofline, link {link} GB/s: {link_source}).",
        "zh": "字节、步号与路由取自 trace；FLOPs 与延迟为模型估算（pdlab/attention/cost.py"
        "，{gpu} roofline 模型，链路 {link} GB/s：{link_source}）。",
    },
    "sim_title": {
        "en": "D's decode batch as requests arrive ({gpu} profile)",
        "zh": "请求陆续到达时 D 的解码批（{gpu} 配置）",
    },
    "sim_routing": {
        "en": "routing",
        "zh": "路由",
    },
    "sim_design": {
        "en": "design",
        "zh": "设计",
    },
    "sim_tpot": {
        "en": "TPOT ms p50 / p99",
        "zh": "TPOT ms p50 / p99",
    },
    "sim_ttft": {
        "en": "D's TTFT ms",
        "zh": "D 的 TTFT ms",
    },
    "sim_t2t": {
        "en": "D to token 2 ms",
        "zh": "D 到第 2 个 token ms",
    },
    "sim_mixed": {
        "en": "not uniform",
        "zh": "非均匀批",
    },
    "sim_r_v2": {
        "en": "V2",
        "zh": "V2",
    },
    "sim_r_pcp": {
        "en": "V2 + PCP",
        "zh": "V2 + PCP",
    },
    "sim_r_v1": {
        "en": "V1",
        "zh": "V1",
    },
    "sim_caption": {
        "en": "Modelled: roofline per kernel group (pdlab/attention/cost.py) on {source}. "
        "TTFT on D is from arrival at D (K/V landed) to token 1 known; 0 where P's "
        "token is the answer. 'not uniform': steps that are not a uniform decode "
        "batch.",
        "zh": "模型估算：每组算子按roofline 模型计（pdlab/attention/cost.py），设备数据：{source}"
        "。D 的 TTFT 从请求到达 D（K/V 已到）算到 token 1 已知；P 的 token 即答案时为"
        " 0。“非均匀批”：不是均匀解码批的步。",
    },
    "ch7": {
        "en": "Chapter 7 · Could D skip it, and does it matter?",
        "zh": "第 7 章 · D 能省掉这一步吗？这一步要紧吗？",
    },
    "ch7_intro": {
        "en": "D recomputes position N-1 because the K/V do not carry its final hidden "
        "state. Other engines send more instead: P's sampled token (SGLang, "
        "TensorRT-LLM), that token appended to D's prompt, or the hidden state "
        "itself (vLLM V0). First the four designs on this prompt, traced; then D's "
        "whole decode batch, simulated at DeepSeek-V3's widths as requests arrive.",
        "zh": "D 要重算位置 N-1，是因为 K/V 里没有它最后一层的 隐藏状态。别的引擎改为多"
        "传一点：P 采样出的 token（SGLang、TensorRT-LLM），把这个 token 追加到 D 的提"
        "示词里，或者直接传 隐藏状态（vLLM V0）。先看这四种设计在本提示词上的实测"
        " trace，再看请求陆续到达时，按 DeepSeek-V3 宽度模拟的 D 的整个解码批。",
    },
    "ch7_answer": {
        "en": "The answer. At DeepSeek-V3's widths on the {gpu} profile ({batch} running "
        "decodes over {ctx} tokens, {rate} arrivals/s of {plen}-token prompts): "
        "under Model Runner V2's default, D's short extend is a "
        "prefill_runs_as_decode row, every step stays a uniform decode batch and "
        "TPOT is {v2_p50} p50 / {v2_p99} p99 for recompute as for first_token. The "
        "recompute costs the arriving request one batch step, not the batch: D's "
        "TTFT is {rc_ttft} (hidden_state {hs_ttft}; 0 where P's token is the answer) "
        "and token 2 comes {rc_t2t} after the K/V land, against {ft_t2t} with "
        "first_token. Under prefill context parallelism, recompute and append_prompt "
        "make each arrival's step a forward_mha row: {pcp_mixed} of the steps lose "
        "the full decode graph, TPOT p99 rises to {pcp_p99} ({pcp_x} the default's) "
        "and D's TTFT to {pcp_ttft}, while first_token and hidden_state, whose first "
        "row is a decode, stay at {ft_pcp_p99}. So the short extend matters where "
        "something counts it as a prefill (PCP) and the contexts are long; under "
        "V2's default it costs one step of latency for the request that arrives, and "
        "nothing for the rest.",
        "zh": "结论。按 DeepSeek-V3 宽度、{gpu} 配置（{batch} 个运行中的解码请求，上下文 "
        "{ctx} token，每秒到达 {rate} 个 {plen} token 的提示词）：在 Model Runner V2 "
        "的默认设置下，D 的短 extend 是一行 prefill_runs_as_decode，每一步都仍是均匀"
        "解码批，recompute 与 first_token 的 TPOT 同为 p50 {v2_p50} / p99 {v2_p99}。"
        "重算的代价落在到达的那个请求身上，而不是整个批：D 的 TTFT 为 {rc_ttft}（hidd"
        "en_state 为 {hs_ttft}；P 的 token 即答案时为 0），第 2 个 token 在 K/V 到达"
        "后 {rc_t2t} 出现，first_token 则是 {ft_t2t}。开启预填充上下文并行（PCP）"
        "时，recompute 与 append_prompt 让每个到达请求的第一步成为 forward_mha 行：{p"
        "cp_mixed} 的步失去完整的解码 CUDA graph，TPOT p99 升到 {pcp_p99}（默认的 {pc"
        "p_x}），D 的 TTFT 升到 {pcp_ttft}；而第一行本就是解码的 first_token 与 "
        "hidden_state 仍为 {ft_pcp_p99}。所以，只有当某个规则把短 extend 算作 prefill"
        "（PCP）且上下文很长时，它才要紧；在 V2 默认设置下，它只让到达的那个请求多等"
        "一步，对其余请求没有影响。",
    },
    # ---- the simulator's widget (pdlab/ui/sim_widget.py) -------------------------------
    "w_sim_context": {"en": "context log2 (tokens)", "zh": "上下文 log2（token）"},
    "w_sim_batch": {"en": "running decodes", "zh": "运行中的解码数"},
    "w_sim_rate": {"en": "arrivals/s", "zh": "每秒到达数"},
    "w_sim_note": {
        "en": "{steps} steps, {n} arrivals, DeepSeek-V3 widths, {gpu} profile; prompts as "
        "long as the context.",
        "zh": "共 {steps} 步、{n} 个到达请求，DeepSeek-V3 宽度，{gpu} 配置；提示词与上下文等长。",
    },
    "v_arrived_first": {
        "en": "D {req}: K/V for {n} tokens arrived; num_computed_tokens = {nct} (nothing "
        "subtracted: the first token came with them, N = {N})",
        "zh": "D {req}：{n} 个 token 的 K/V 已到达；num_computed_tokens = {nct}（不减一："
        "第一个 token 随 K/V 一起到达，N = {N}）",
    },
}
