"""The words of the trace views, the console tables and the plots, in English and Simplified
Chinese. Key prefixes: ``v_`` trace views and console tables, ``plot_`` the matplotlib
figures, ``w_`` widget labels (as in ``text.py``).
"""

from __future__ import annotations

VIEWS: dict[str, dict[str, str]] = {
    # ---- trace panels and the step player (pdlab/ui/trace_views.py) -------------------
    "v_schedule": {"en": "schedule", "zh": "调度"},
    "v_schedule_row": {
        "en": "{req}: num_computed_tokens {before} → {after} (+{n}), num_prompt_tokens {N}, "
        "blocks {blocks}",
        "zh": "{req}：num_computed_tokens {before} → {after}（+{n}），num_prompt_tokens {N}，"
        "块 {blocks}",
    },
    "v_kernels_layer": {"en": "kernels (layer {layer})", "zh": "算子（第 {layer} 层）"},
    "v_sample_row": {
        "en": "{req}: token {tok} at position {pos}",
        "zh": "{req}：在位置 {pos} 采样出 token {tok}",
    },
    "v_tokens": {"en": "tokens", "zh": "token 数"},
    "v_player_title": {
        "en": "instance {inst}, engine step {step}",
        "zh": "实例 {inst}，引擎第 {step} 步",
    },
    "v_player_sub": {
        "en": ": {total} tokens scheduled, KV cache usage {usage}",
        "zh": "：调度 {total} 个 token，KV 缓存占用 {usage}",
    },
    "v_path": {"en": "path", "zh": "路径"},
    "v_sampled": {"en": "sampled", "zh": "采样"},
    # ---- console tables (pdlab/ui/console.py, pdlab trace, pdlab pd) ------------------
    "v_steps": {"en": "steps", "zh": "逐步记录"},
    "v_steps_on": {"en": "steps on {inst}", "zh": "{inst} 上的逐步记录"},
    "v_instance": {"en": "instance {inst}", "zh": "实例 {inst}"},
    "v_one_engine": {"en": "one engine", "zh": "单个引擎"},
    "v_pd_run": {"en": "P/D run over {transport}", "zh": "P/D 运行，传输方式 {transport}"},
    # why an MLA backend profile was followed (pdlab/engine/platforms.py)
    "pf_cpu": {"en": "the CPU platform", "zh": "CPU"},  # 在 CPU 上选 (no space before 上)
    "pf_cpu_label": {"en": "CPU (no GPU)", "zh": "CPU（没有 GPU）"},
    "pf_named": {
        "en": "{gpu} (named): {where} picks {backend}",
        "zh": "{gpu}（指定）：在 {where} 上选 {backend}",
    },
    "pf_env": {
        "en": "{gpu} (PDLAB_GPU): {where} picks {backend}",
        "zh": "{gpu}（PDLAB_GPU）：在 {where} 上选 {backend}",
    },
    "pf_local": {
        "en": "{gpu} (this machine's GPU): {where} picks {backend}",
        "zh": "{gpu}（本机的 GPU）：在 {where} 上选 {backend}",
    },
    "pf_none": {
        "en": "no GPU named and none here: {where} picks {backend} ({flag} follows a Hopper "
        "deployment)",
        "zh": "没有指定 GPU，本机也没有：在 {where} 上选 {backend}（{flag} 可按 Hopper 部署来走）",
    },
    "pf_backend": {"en": "{backend} (named)", "zh": "{backend}（指定）"},
    # the first-token designs' pictures (pdlab/ui/plots_designs.py)
    "pg_layer": {"en": "layer {r}", "zh": "第 {r} 层"},
    "pg_hidden": {"en": "h (final norm)", "zh": "h（经最终的 RMSNorm）"},
    "pg_position": {
        "en": "position (N = {n}; column N: token 1)",
        "zh": "位置（N = {n}；第 N 列：第 1 个输出 token）",
    },
    "pg_held": {"en": "K/V from P", "zh": "来自 P 的 K/V"},
    "pg_computed": {"en": "computed by D's first step", "zh": "D 的第一步算出的"},
    "pg_shipped": {"en": "hidden state from P", "zh": "来自 P 的隐藏状态"},
    "pg_token": {"en": "token 1 from P", "zh": "来自 P 的第 1 个 token"},
    "pg_needs": {"en": "what token 1 needs", "zh": "第 1 个 token 需要的"},
    "pg_grid_title": {
        "en": "What D holds against what token 1 needs ({req})",
        "zh": "D 持有的与第 1 个 token 需要的（{req}）",
    },
    "pg_handoff": {"en": "hand-off", "zh": "交接"},
    "pg_steps": {
        "en": "steps in trace order (green: decode_graph_eligible, red: not)",
        "zh": "按 trace 顺序的各步（绿色：decode_graph_eligible，红色：否）",
    },
    "pg_timeline_title": {
        "en": "{req}: proxy -> P -> transfer -> D",
        "zh": "{req}：代理 -> P -> 传输 -> D",
    },
    "v_routing": {
        "en": "model runner {runner} · MLA backend profile {backend}: {why}",
        "zh": "model runner {runner} · MLA 后端配置 {backend}：{why}",
    },
    "v_moved": {"en": "KV blocks moved P -> D", "zh": "从 P 搬到 D 的 KV 块"},
    "v_col_request": {"en": "request", "zh": "请求"},
    "v_col_p_blocks": {"en": "P blocks", "zh": "P 的块"},
    "v_col_d_blocks": {"en": "D blocks", "zh": "D 的块"},
    "v_col_bytes": {"en": "bytes", "zh": "字节"},
    "v_col_ok": {"en": "ok", "zh": "成功"},
    "v_yes": {"en": "yes", "zh": "是"},
    "v_no": {"en": "no: {reason}", "zh": "否：{reason}"},
    "v_arrived": {
        "en": "D {req}: K/V for {n} tokens arrived; num_computed_tokens = {nct} (N - 1, N = {N})",
        "zh": "D {req}：{n} 个 token 的 K/V 已到达；num_computed_tokens = {nct}（N - 1，N = {N}）",
    },
    "v_missing": {"en": "missing", "zh": "缺失"},
    "v_failed": {"en": "{role} failed:", "zh": "{role} 失败："},
    # ---- plots (pdlab/ui/plots.py) ------------------------------------------------------
    "plot_bt_x": {
        "en": "logical block (block_size={bs}); cell = physical block id",
        "zh": "逻辑块（block_size={bs}）；格内数字 = 物理块 id",
    },
    "plot_bt_y": {"en": "request", "zh": "请求"},
    "plot_bt_title": {
        "en": "block table, instance {inst}, step {step}",
        "zh": "块表，实例 {inst}，第 {step} 步",
    },
    "plot_nct_x": {"en": "engine step", "zh": "引擎步"},
    "plot_nct_y": {
        "en": "num_computed_tokens (after the step)",
        "zh": "num_computed_tokens（本步之后）",
    },
    "plot_nct_title": {
        "en": "num_computed_tokens per step\n(hollow: forward_mha, filled: forward_mqa)",
        "zh": "每一步的 num_computed_tokens\n（空心：forward_mha，实心：forward_mqa）",
    },
    # A label starting with "_" is hidden from the legend by matplotlib: hence "path ...".
    "plot_pf_pcp": {"en": "path forward_mha (PCP > 1)", "zh": "路径 forward_mha（PCP > 1）"},
    "plot_dc_default": {"en": "path forward_mqa (default)", "zh": "路径 forward_mqa（默认）"},
    "plot_pf": {"en": "path forward_mha", "zh": "路径 forward_mha"},
    "plot_dc": {"en": "path forward_mqa", "zh": "路径 forward_mqa"},
    "plot_ctx_x": {
        "en": "context length (tokens cached before the step)",
        "zh": "上下文长度（本步之前已缓存的 token 数）",
    },
    "plot_flops_y": {"en": "FLOPs per layer", "zh": "每层 FLOPs"},
    "plot_bytes_y": {"en": "bytes moved per layer", "zh": "每层访存字节"},
    "plot_flops_title": {"en": "{model}: one token, FLOPs", "zh": "{model}：一个 token 的 FLOPs"},
    "plot_bytes_title": {"en": "{model}: one token, bytes", "zh": "{model}：一个 token 的访存字节"},
    # ---- widgets: the explorer's cost table and route line, the block pool ------------
    "w_flops_per_layer": {"en": "FLOPs, per layer", "zh": "FLOPs（每层）"},
    "w_bytes_per_layer": {"en": "bytes, per layer", "zh": "访存字节（每层）"},
    "w_flops_all": {"en": "FLOPs, all {n} layers", "zh": "FLOPs（全部 {n} 层）"},
    "w_bytes_all": {"en": "bytes, all {n} layers", "zh": "访存字节（全部 {n} 层）"},
    "w_region": {"en": "region {region}", "zh": "{region} 区"},
    "w_kind": {"en": "a {path}", "zh": "按 {path} 处理"},
    "w_block_n": {"en": "block {id}", "zh": "块 {id}"},
    "w_cached_mark": {"en": "(* = cached)", "zh": "（* = 已缓存）"},
    "w_status": {"en": "status", "zh": "状态"},
    "w_block_table": {"en": "block table", "zh": "块表"},
    "w_slots_last": {
        "en": "slot_mapping (last computed tokens)",
        "zh": "slot_mapping（最后几个已算 token）",
    },
    # ---- pdlab sim, when nothing arrived --------------------------------------------
    "sim_no_arrivals": {
        "en": "No request arrived in the {s:g} simulated seconds (--rate {rate:g}): the D TTFT and "
        "token-2 columns have nothing to time, so they show 0. Raise --rate or --duration.",
        "zh": "模拟的 {s:g} 秒内没有请求到达（--rate {rate:g}）：D 的 TTFT 与第 2 个 token 两列无可"
        "计时，因此显示 0。请调高 --rate 或 --duration。",
    },
    # ---- labels of the views that name engine things ------------------------------
    "v_on_step": {"en": "{on} step {step}", "zh": "{on} 第 {step} 步"},
    "k_new_tokens": {"en": "new tokens", "zh": "新 token"},
    "k_context": {"en": "context", "zh": "上下文"},
    "k_assembly": {"en": "K/V assembly", "zh": "K/V 组装"},
    "k_causal": {"en": "causal", "zh": "因果"},
    "rn_v1": {"en": "Model Runner V1; the default is V2", "zh": "Model Runner V1；默认的是 V2"},
}
