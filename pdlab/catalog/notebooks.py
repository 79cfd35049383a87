"""The words the notebooks print (their tables' headers, their printed lines), in English
and Simplified Chinese. A notebook reads them with ``t = pdlab.catalog.words(LANG)``; its
bilingual source (``pdlab/tools/bilingual.py``) sets ``LANG`` per language, so both
notebooks run the same code. Key prefixes: ``nb_`` shared, ``nb1_`` ... ``nb4_`` one
notebook's.
"""

from __future__ import annotations

NOTEBOOKS: dict[str, dict[str, str]] = {
    # ---- shared ------------------------------------------------------------------------
    "nb_block": {"en": "block", "zh": "块"},
    "nb_slot": {"en": "slot {s}", "zh": "槽 {s}"},
    "nb_model": {"en": "model", "zh": "模型"},
    "nb_backend": {"en": "backend", "zh": "后端"},
    # ---- 01: the paged KV cache --------------------------------------------------------
    "nb1_taken": {"en": "taken: {ids}", "zh": "取出的块：{ids}"},
    "nb1_free_queue": {"en": "free queue: {ids}", "zh": "空闲队列：{ids}"},
    "nb1_after_free": {"en": "after freeing: {ids}", "zh": "释放之后：{ids}"},
    "nb1_tables": {
        "en": "block table a: {a}  block table b: {b}",
        "zh": "a 的块表：{a}  b 的块表：{b}",
    },
    "nb1_slots": {"en": "slot_mapping a: {slots}", "zh": "a 的 slot_mapping：{slots}"},
    "nb1_read_back": {
        "en": "positions read back through the block table: {pos}",
        "zh": "经块表读回的位置：{pos}",
    },
    "nb1_hashes": {
        "en": "'abcd' as block 0: {a}...   'abcd' after 'xxxx': {b}...",
        "zh": "'abcd' 作为第 0 块：{a}...   'abcd' 跟在 'xxxx' 之后：{b}...",
    },
    "nb1_hashed": {
        "en": "{text!r} ({n} tokens): {full} full blocks hashed; the partial last block is not",
        "zh": "{text!r}（{n} 个 token）：{full} 个满块算了哈希，最后那个不满的块没有",
    },
    "nb1_r2": {
        "en": "r2 reuses {n} tokens in blocks {blocks}",
        "zh": "r2 复用了块 {blocks} 中的 {n} 个 token",
    },
    "nb1_h_full": {"en": "full blocks cached", "zh": "已缓存的满块"},
    "nb1_h_reused": {"en": "tokens reused", "zh": "复用的 token"},
    "nb1_h_computed": {"en": "tokens computed", "zh": "要计算的 token"},
    "nb1_queue_cached": {
        "en": "free queue (* = still cached): {q}",
        "zh": "空闲队列（* = 仍在缓存中）：{q}",
    },
    "nb1_z_took": {
        "en": "z took {ids} -> free queue: {q}",
        "zh": "z 取走了 {ids} -> 空闲队列：{q}",
    },
    "nb1_again": {
        "en": "x's prompt again: {x} tokens hit (block 1 was evicted); y's again: {y}",
        "zh": "再发 x 的提示词：命中 {x} 个 token（块 1 已被驱逐）；再发 y 的：{y}",
    },
    # ---- 02: the scheduler -------------------------------------------------------------
    "nb2_rules_hold": {
        "en": "budget respected, num_computed_tokens continuous, samples only after the last chunk",
        "zh": "预算没有超出，num_computed_tokens 连续推进，只在最后一块算完后才采样",
    },
    "nb2_chunks": {
        "en": "long_prefill_token_threshold={threshold}: chunks {chunks} (the short prompt "
        "finished at step {step})",
        "zh": "long_prefill_token_threshold={threshold}：分块 {chunks}（短提示词在第 {step} "
        "步完成）",
    },
    "nb2_event": {
        "en": "step {step}: {kind} {req} {details}",
        "zh": "第 {step} 步：{kind} {req} {details}",
    },
    "nb2_with": {"en": "with preemption   : {tokens}", "zh": "有抢占：{tokens}"},
    "nb2_without": {"en": "without preemption: {tokens}", "zh": "无抢占：{tokens}"},
    "nb2_admits": {
        "en": "scheduler_reserve_full_isl={reserve}: admits {admitted}, {n} preemption(s)",
        "zh": "scheduler_reserve_full_isl={reserve}：接纳 {admitted}，抢占 {n} 次",
    },
    # ---- 04: the kernels ---------------------------------------------------------------
    "nb4_default": {"en": "default backend: {backend}", "zh": "默认后端：{backend}"},
    "nb4_checked": {"en": "checked here on: {backends}", "zh": "这里检查的后端：{backends}"},
    "nb4_rows": {
        "en": "{backend}: {n} rows written and read back exactly; the skipped token left no trace",
        "zh": "{backend}：{n} 行写入后原样读回；被跳过的 token 什么也没有写",
    },
    "nb4_merged": {
        "en": "{backend}: keys 0..6 and 7..19 merged = attention over all 20 keys (max |diff| {d})",
        "zh": "{backend}：key 0..6 与 7..19 分别算再合并 = 对全部 20 个 key 的注意力"
        "（最大 |差| {d}）",
    },
    "nb4_kernel": {"en": "kernel", "zh": "算子"},
    "nb4_wall": {"en": "wall time", "zh": "耗时"},
    # ---- 03: MLA's two forms -----------------------------------------------------------
    "nb3_dims": {"en": "model dims", "zh": "模型维度"},
    "nb3_shape": {"en": "out shape", "zh": "输出形状"},
    "nb3_lse_diff": {"en": "max |LSE difference|", "zh": "最大 |LSE 之差|"},
    "nb3_heads": {"en": "heads", "zh": "头数"},
    "nb3_mla_values": {"en": "MLA values / token / layer", "zh": "MLA 值数 / token / 层"},
    "nb3_mha_values": {
        "en": "per-head K+V values / token / layer",
        "zh": "逐头 K+V 值数 / token / 层",
    },
    "nb3_ratio": {"en": "ratio", "zh": "倍数"},
    "nb3_mla_bytes": {
        "en": "MLA bytes / token, all layers (bf16)",
        "zh": "MLA 字节 / token，全部层（bf16）",
    },
    "nb3_mha_bytes": {
        "en": "per-head K+V bytes / token, all layers",
        "zh": "逐头 K+V 字节 / token，全部层",
    },
    "nb3_wins_below": {
        "en": "absorb wins below this many query tokens (S >> q)",
        "zh": "query token 少于此数时吸收更省（S >> q）",
    },
    "nb3_naive_line": {"en": "naive (up-project keys)", "zh": "朴素形式（上投影每个 key）"},
    "nb3_absorbed_line": {"en": "absorbed (MQA on latents)", "zh": "吸收形式（在潜向量上做 MQA）"},
    "nb3_crossover": {"en": "crossover {x} query tokens", "zh": "临界点 {x} 个 query token"},
    "nb3_q_axis": {
        "en": "query tokens of one request in this step (q)",
        "zh": "这一步中一个请求的 query token 数（q）",
    },
    "nb3_flops_axis": {
        "en": "FLOPs per cached token, per layer",
        "zh": "每个已缓存 token、每层的 FLOPs",
    },
    "nb3_flops_title": {
        "en": "DeepSeek-V3, per cached key: long context (S >> q)",
        "zh": "DeepSeek-V3，按每个已缓存 key：长上下文（S >> q）",
    },
    "nb3_heat_title": {
        "en": "DeepSeek-V3: absorbed / naive FLOPs (blue: absorbing wins; line: equal)",
        "zh": "DeepSeek-V3：吸收形式 / 朴素形式的 FLOPs（蓝色：吸收更省；线：相等）",
    },
    "nb3_context_axis": {"en": "cached context (S tokens)", "zh": "已缓存上下文（S 个 token）"},
    "nb3_ratio_bar": {"en": "absorbed / naive", "zh": "吸收形式 / 朴素形式"},
    "nb3_fresh_tokens": {"en": "fresh prompt tokens", "zh": "新提示词的 token 数"},
    "nb3_absorbed": {"en": "absorbed", "zh": "吸收形式"},
    "nb3_naive": {"en": "naive", "zh": "朴素形式"},
    "nb3_naive_per_key": {"en": "naive FLOPs / key", "zh": "朴素形式 FLOPs / key"},
    "nb3_absorbed_per_key": {"en": "absorbed FLOPs / key", "zh": "吸收形式 FLOPs / key"},
    "nb3_cheaper": {"en": "cheaper", "zh": "更省的形式"},
    "nb3_dev_h800": {"en": "H100/H800 SXM, bf16 peak", "zh": "H100/H800 SXM，bf16 峰值"},
    "nb3_dev_h200": {"en": "H200 SXM, bf16 peak", "zh": "H200 SXM，bf16 峰值"},
    "nb3_dev_flashmla": {"en": "FlashMLA on H800, reported", "zh": "FlashMLA 在 H800 上（公布值）"},
    "nb3_dev_cpu": {
        "en": "this CPU, measured ({threads} threads, fp32)",
        "zh": "本机 CPU，实测（{threads} 线程，fp32）",
    },
    "nb3_device": {
        "en": "{name:45} {tf:8.3f} TFLOP/s {gb:8.1f} GB/s  ridge {ridge:6.1f} FLOP/B",
        "zh": "{name:30} {tf:8.3f} TFLOP/s {gb:8.1f} GB/s  脊点 {ridge:6.1f} FLOP/B",
    },
    "nb3_decode_point": {"en": "decode path, 1 token", "zh": "decode 路径，1 个 token"},
    "nb3_prefill_point": {"en": "prefill path, 1 token", "zh": "prefill 路径，1 个 token"},
    "nb3_kernel_point": {
        "en": "mla_decode kernel, {q} query token(s)",
        "zh": "mla_decode 算子，{q} 个 query token",
    },
    "nb3_intensity_axis": {
        "en": "arithmetic intensity (FLOP per byte moved)",
        "zh": "算术强度（每搬运一字节的 FLOP）",
    },
    "nb3_attainable_axis": {"en": "attainable FLOP/s", "zh": "可达 FLOP/s"},
    "nb3_roofline_title": {
        "en": "Roofline, with DeepSeek-V3 at context {ctx} placed on the H100/H800 roof",
        "zh": "roofline 模型：上下文 {ctx} 时的 DeepSeek-V3，对照 H100/H800 的算力与带宽上限",
    },
    "nb3_memory": {"en": "memory", "zh": "访存"},
    "nb3_compute": {"en": "compute", "zh": "计算"},
    "nb3_what": {"en": "what", "zh": "对象"},
    "nb3_bound": {"en": "bound on H100/H800", "zh": "在 H100/H800 上受限于"},
    # notebooks 05/06 (notebooks/src/pd_decode_side.py)
    "nb5_setup": {
        "en": "kernels run on backend {b}; model {m}: {layers} layers, {heads} "
        "heads, latent row {L} + {R} = {W} values; weights {w}",
        "zh": "算子后端 {b}；模型 {m}：{layers} 层，{heads} 个头，潜向量行 {L} + {R} "
        "= {W} 个值；权重 {w}",
    },
    "nb5_generated": {
        "en": "prompt {p} ({n} tokens) -> output_token_ids {ids}",
        "zh": "提示词 {p}（{n} 个 token）-> output_token_ids {ids}",
    },
    "nb5_col_layer": {"en": "layer", "zh": "层"},
    "nb5_col_d_rows": {"en": "D rows 0..N-1", "zh": "D 的第 0..N-1 行"},
    "nb5_col_finite": {"en": "finite", "zh": "全为有限值"},
    "nb5_col_eq_p": {"en": "== P rows", "zh": "== P 的行"},
    "nb5_bytes": {
        "en": "{nb} bytes = {blocks} blocks x {bs} slots x {W} values x 4 bytes "
        "(fp32) x {layers} layers",
        "zh": "{nb} 字节 = {blocks} 块 × {bs} 槽 × {W} 个值 × 4 字节（fp32）× {layers} 层",
    },
    "nb5_cache_row": {
        "en": "cache row per token per layer: {W} values (kv_lora_rank {L} + qk_rope_head_dim {R})",
        "zh": "每个 token 每层的缓存行：{W} 个值（kv_lora_rank {L} + qk_rope_head_dim {R}）",
    },
    "nb5_h_last": {
        "en": "h_last[N-1]: {shape}, output of layer {l}; logits {ls}",
        "zh": "h_last[N-1]：{shape}，第 {l} 层的输出；logits {ls}",
    },
    "nb5_v3_row": {
        "en": "{name}: cache row {W} values per token per layer ({layers} layers); "
        "h_last {H} values",
        "zh": "{name}：每个 token 每层的缓存行 {W} 个值（{layers} 层）；h_last {H} 个值",
    },
    "nb5_rewritten": {
        "en": "position N-1 = {p}: rewritten by D, max |new - old| over layers = {d}",
        "zh": "位置 N-1 = {p}：被 D 重写，各层 |新 - 旧| 的最大值 = {d}",
    },
    "nb5_logits_diff": {
        "en": "max |D's first logits - lm_head(norm(h_last[N-1]))| = {d}",
        "zh": "|D 的第一组 logits - lm_head(norm(h_last[N-1]))| 的最大值 = {d}",
    },
    "nb5_col_rank": {"en": "PCP rank", "zh": "PCP rank"},
    "nb5_col_rank_rows": {
        "en": "rows it computes (row[start:end])",
        "zh": "它计算的行（row[start:end]）",
    },
    "nb5_col_kernel": {"en": "kernel", "zh": "算子"},
    "nb5_col_part": {"en": "part", "zh": "部分"},
    "nb5_col_shapes": {"en": "shapes", "zh": "形状"},
    "nb5_col_flops_model": {"en": "FLOPs (model)", "zh": "FLOPs（模型估算）"},
    "nb5_col_bytes_model": {"en": "bytes (model)", "zh": "字节（模型估算）"},
    "nb5_col_old": {"en": "older vLLM", "zh": "旧版 vLLM"},
    "nb5_col_file": {"en": "file", "zh": "文件"},
    "nb5_setup_v2": {"en": "V2 (default)", "zh": "V2（默认）"},
    "nb5_setup_pcp2": {"en": "V2 + PCP 2", "zh": "V2 + PCP 2"},
    "nb5_setup_v1": {"en": "V1", "zh": "V1"},
    "nb5_req_fresh": {"en": "fresh prompt", "zh": "新提示词"},
    "nb5_req_decode": {"en": "ordinary decode", "zh": "普通的 decode 行"},
    "nb5_req_long": {"en": "long extend", "zh": "长 extend"},
    "nb5_req_short": {"en": "D's short extend", "zh": "D 的短 extend"},
    "nb5_col_request": {"en": "request", "zh": "请求"},
    "nb5_tokens_pd": {"en": "P/D, {label}: {toks}", "zh": "P/D，{label}：{toks}"},
    "nb5_tokens_colocated": {"en": "colocated engine: {toks}", "zh": "非分离引擎：{toks}"},
    "nb5_tokens_oracle": {"en": "oracle (no cache): {toks}", "zh": "参考实现（不用缓存）：{toks}"},
    "nb5_col_setup": {"en": "set-up", "zh": "设置"},
    "nb5_col_path": {"en": "path", "zh": "路径"},
    "nb5_col_kernels": {"en": "kernels", "zh": "算子数"},
    "nb5_col_bytes": {"en": "bytes", "zh": "字节"},
    "nb7_accepted": {"en": "{mode}: accepted", "zh": "{mode}：可以运行"},
    "nb5_upproj": {
        "en": "kv_b_proj up-projection: {mf} MFLOP per context token per layer",
        "zh": "kv_b_proj 上投影：每个上下文 token、每层 {mf} MFLOP",
    },
    "nb5_col_context": {"en": "context N-1", "zh": "上下文 N-1"},
    "nb5_col_ratio": {"en": "ratio", "zh": "倍数"},
    "nb5_col_pf_bytes": {"en": "bytes forward_mha", "zh": "字节 forward_mha"},
    "nb5_col_dc_bytes": {"en": "bytes forward_mqa", "zh": "字节 forward_mqa"},
    "nb5_col_batch_ratio": {"en": "ratio per request in a batch", "zh": "批中每个请求的倍数"},
    "nb5_col_pf_bound": {"en": "H800 bound, forward_mha", "zh": "H800 下界，forward_mha"},
    "nb5_col_dc_bound": {"en": "H800 bound, forward_mqa", "zh": "H800 下界，forward_mqa"},
}
