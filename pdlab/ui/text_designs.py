"""The words of the first-token designs and of ``pdlab sim``, in English and Simplified
Chinese: merged into :data:`pdlab.ui.text.TEXT`, read through :func:`pdlab.ui.text.text`.

Keys: ``dz_`` for the designs table, ``sim_`` for the simulator's report, ``ch7`` for the
tour's closing chapter. Chinese terms: 共置 for colocated, 前缀缓存 for prefix caching,
潜向量 for latent; vLLM identifiers stay in English.
"""

from __future__ import annotations

TEXT_DESIGNS: dict[str, dict[str, str]] = {
    # ---- the designs table (pdlab pd --compare-designs, notebook 07) -------------------
    "dz_title": {
        "en": "Four designs for D's first token, run on the same prompts",
        "zh": "D 的第一个 token 的四种设计，在同一批提示词上实测",
    },
    "dz_mode": {"en": "design", "zh": "设计"},
    "dz_same": {"en": "= colocated", "zh": "与共置一致"},
    "dz_kv": {"en": "K/V bytes", "zh": "K/V 字节"},
    "dz_payload": {"en": "+ with them", "zh": "另附字节"},
    "dz_flops": {"en": "D FLOPs for token 1", "zh": "D 为 token 1 的 FLOPs"},
    "dz_known": {"en": "token 1 known", "zh": "token 1 何时已知"},
    "dz_first": {"en": "D's first step", "zh": "D 的第一步"},
    "dz_latency": {"en": "latency after P ({gpu})", "zh": "P 后延迟 {gpu}"},
    "dz_link_source": {
        "en": "one 400 Gb/s InfiniBand port per GPU, an assumption",
        "zh": "每块 GPU 一个 400 Gb/s InfiniBand 端口，属假设",
    },
    "dz_v3": {
        "en": "DeepSeek-V3 widths, N = {n}: bytes / D FLOPs / latency",
        "zh": "DeepSeek-V3 宽度，N = {n}：字节 / D FLOPs / 延迟",
    },
    "dz_yes": {"en": "yes", "zh": "是"},
    "dz_no": {"en": "NO", "zh": "否"},
    "dz_prefilling": {"en": "prefilling", "zh": "仍在预填充"},
    "dz_decode": {"en": "decode", "zh": "解码"},
    "dz_note": {
        "en": "Bytes, steps and routing are the trace's; FLOPs and latency are modelled "
        "(pdlab/attention/cost.py, {gpu} roofline, link {link} GB/s: {link_source}).",
        "zh": "字节、步号与路由取自 trace；FLOPs 与延迟为模型估算（pdlab/attention/cost.py，"
        "{gpu} 屋顶线，链路 {link} GB/s：{link_source}）。",
    },
    # ---- pdlab sim ---------------------------------------------------------------------
    "sim_title": {
        "en": "D's decode batch as requests arrive ({gpu} profile)",
        "zh": "请求陆续到达时 D 的解码批（{gpu} 配置）",
    },
    "sim_routing": {"en": "routing", "zh": "路由"},
    "sim_design": {"en": "design", "zh": "设计"},
    "sim_tpot": {"en": "TPOT p50 / p99", "zh": "TPOT p50 / p99"},
    "sim_ttft": {"en": "D's TTFT p50 / p99", "zh": "D 的 TTFT p50 / p99"},
    "sim_t2t": {"en": "D to token 2", "zh": "D 到第 2 个 token"},
    "sim_mixed": {"en": "not uniform", "zh": "非均匀批"},
    "sim_r_v2": {"en": "V2", "zh": "V2"},
    "sim_r_pcp": {"en": "V2 + PCP", "zh": "V2 + PCP"},
    "sim_r_v1": {"en": "V1", "zh": "V1"},
    "sim_caption": {
        "en": "Modelled: roofline per kernel group (pdlab/attention/cost.py) on {source}. "
        "TTFT on D is from arrival at D (K/V landed) to token 1 known; 0 where P's token "
        "is the answer. 'not uniform': steps that are not a uniform decode batch.",
        "zh": "模型估算：每组算子按屋顶线计（pdlab/attention/cost.py），设备数据：{source}。"
        "D 的 TTFT 从请求到达 D（K/V 已到）算到 token 1 已知；P 的 token 即答案时为 0。"
        "“非均匀批”：不是均匀解码批的步。",
    },
}
