"""The words of chapter 4 under speculative decoding (:mod:`pdlab.ui.tour_mtp`), English and
Simplified Chinese; the Chinese terms: 投机解码, 草稿 token, 草稿模型, 占位草稿."""

from __future__ import annotations

TEXT_MTP: dict[str, dict[str, str]] = {
    "mtp_src": {
        "en": "pdlab: {path}, {qualname} (upstream: {upstream})",
        "zh": "pdlab：{path}，{qualname}（上游：{upstream}）",
    },
    "mtp_padded": {
        "en": "With speculative decoding (DeepSeek's MTP layer drafting K = {k} tokens per step) "
        "D's first step changes shape. The scheduler admitted the request with one new token over "
        "{nct} cached (N - 1) and padded it to 1 + K = {q} tokens: scheduled_spec_decode_tokens = "
        "{drafts}, K placeholder drafts. Upstream's comment: pad new decode requests to the "
        "uniform spec decoding size to keep the full CUDA graph for this step.",
        "zh": "开启投机解码（DeepSeek 的 MTP 层每步提出 K = {k} 个草稿 token）后，D 的第一步换了形"
        "状。调度器接纳这个请求时，它在 {nct} 个已缓存 token（N - 1）之上只有一个新 token，于是被补"
        "齐到 1 + K = {q} 个 token：scheduled_spec_decode_tokens = {drafts}，即 K 个占位草稿。上游"
        "的注释：把新的解码请求补齐到统一的投机解码宽度，让这一步仍能重放完整的 CUDA graph。",
    },
    "mtp_stays_decode": {
        "en": "Why it stays a decode: Model Runner V2 subtracts a row's drafts before it asks "
        "whether one new token runs over context ({q} - {d} = 1), so prefill_runs_as_decode "
        "= {rad} and the step stays decode_graph_eligible = {eligible}, with "
        "uniform_decode_token_count = {u}: the 1 + K shape of every verifying row (the "
        "subtraction is in the excerpt of gather_batch_req_state above).",
        "zh": "为什么它仍是 decode 行：Model Runner V2 先从行的 token 数中减去草稿 token，再判断"
        "是否为“上下文之上的一个新 token”（{q} - {d} = 1），所以 prefill_runs_as_decode = "
        "{rad}，这一步仍然 decode_graph_eligible = {eligible}，uniform_decode_token_count ="
        " {u}：每个验证行都是 1 + K 的形状（减法就在上面 gather_batch_req_state 的摘录里）。",
    },
    "mtp_threshold": {
        "en": "The threshold 1 + K: a builder that supports spec-as-decode (query_len_support "
        "UNIFORM or VARLEN) raises reorder_batch_threshold to max(threshold, 1 + K); a SINGLE_ONLY "
        "one (CPU_MLA, CUTLASS_MLA) keeps 1, and decode context parallelism forces 1 where the "
        "builder lacks supports_dcp_with_varlen (on a NIXL instance, whose interleave DCP sets to "
        "the block size, vLLM refuses MTP altogether). Here {backend}: decode_threshold = {t}, so "
        "the {q}-token row takes {path} → {forward}.",
        "zh": "阈值 1 + K：支持把投机解码的验证行当作 decode 行处理的 builder（query_len_support "
        "为 UNIFORM 或 VARLEN）把 reorder_batch_threshold 提高到 `max(threshold, 1 + K)`；"
        "SINGLE_ONLY 的（CPU_MLA、CUTLASS_MLA）保持 1；解码上下文并行下，没有 "
        "supports_dcp_with_varlen 的 builder 被强制为 1（在 NIXL 实例上，DCP 把交错粒度设为块大小，"
        "vLLM 干脆不允许再开 MTP）。这里是 {backend}：decode_threshold = {t}，所以这个 {q} 个 "
        "token 的行走 {path} → {forward}。",
    },
    "mtp_mqa": {
        "en": "forward_mqa hands mla_decode the row whole: query_start_loc = {qsl}, seq_lens = "
        "{seq}; each of its queries sees the keys up to its own position (bottom-right causal, as "
        "FlashMLA's decode).",
        "zh": "forward_mqa 把整行交给 mla_decode：query_start_loc = {qsl}，seq_lens = {seq}；行内每"
        "个 query 只看到它自己位置及之前的 key（右下对齐的因果掩码，与 FlashMLA 的解码算子相同）。",
    },
    "mtp_single_only": {
        "en": "The {q}-token row is longer than decode_threshold = {t} and takes the prefill path, "
        "as every 1 + K verifying row does under upstream's SINGLE_ONLY builders, not D's row "
        "only: run with --gpu h200 (FLASH_ATTN_MLA, the backend vLLM picks on Hopper) to see it as "
        "a decode.",
        "zh": "这个 {q} 个 token 的行超过了 decode_threshold = {t}，于是走 prefill 路径；在上游 "
        "SINGLE_ONLY 的 builder 下，每个 1 + K 的验证行都如此，不只是 D 的这一行：加上 --gpu h200（"
        "FLASH_ATTN_MLA，vLLM 在 Hopper 上选的后端）再运行，就能看到它作为 decode 行。",
    },
    "mtp_verify": {
        "en": "The placeholders are never accepted: the row starts inside the prefill "
        "(num_computed_tokens {nct} < prefill_len {plen}), so every draft counts as -1: "
        "{drafts}. The target's tokens at the verified positions: {target}; the row "
        "produces {sampled} (the first output token); the rejected positions ({rej}) are "
        "rolled back, so num_computed_tokens becomes {after}.",
        "zh": "占位草稿永远不会被接受：这一行从预填充内部开始（num_computed_tokens {nct} < "
        "prefill_len {plen}），所以每个草稿都按 -1 计：{drafts}。目标模型在各验证位置给出"
        "的 token：{target}；这一行产生 {sampled}（第一个输出 token）；回退 {rej} 个位置，"
        "num_computed_tokens 变为 {after}。",
    },
    "mtp_drafter": {
        "en": "Then the drafter: the MTP layer takes the target's hidden state at the last "
        "accepted position and the token after it. On D's first step that position is the "
        "recomputed N - 1 (N = {n}): h[{hp}] with token {tok} gives the drafts {drafts} for "
        "the next step. So recomputing N - 1 also feeds the drafter: token 1's logits and "
        "the drafter's input come from one forward. (SGLang's P/D instead ships P's draft "
        "state with the first token, since its D verifies P's drafts at once.)",
        "zh": "然后是草稿模型：MTP 层接收目标模型在最后一个被接受位置的隐藏状态，以及它后面的"
        " token。在 D 的第一步，这个位置就是重算的 N - 1（N = {n}）：h[{hp}] 加上 token "
        "{tok}，给出下一步的草稿 {drafts}。所以重算 N - 1 也在喂草稿模型：第一个 token 的 "
        "logits 和草稿模型的输入来自同一次前向。（SGLang 的 P/D 则把 P 的草稿状态随第一个 "
        "token 一起传过来，因为它的 D 一开始就验证 P 的草稿。）",
    },
    "mtp_pcp": {
        "en": "What PCP does to it: under PCP 2 V2 computes no prefill_runs_as_decode ({rad}), "
        "the step is not decode_graph_eligible ({eligible}), and the builder passes "
        "treat_short_extends_as_decodes = False, so the padded row, still prefilling, takes "
        "{path} → {forward}; the PCP manager cuts its {q} tokens, placeholders included, "
        "across the ranks:",
        "zh": "PCP 对它的影响：PCP 2 下 V2 不计算 prefill_runs_as_decode（{rad}），这一步不是 "
        "decode_graph_eligible（{eligible}），builder 传入 treat_short_extends_as_decodes = "
        "False，所以这个仍在预填充的补齐行走 {path} → {forward}；PCP 管理器（`PCPManager`）"
        "把它的 {q} 个 token（连同占位草稿）切分到各个 rank：",
    },
    "mtp_drafter_row": {
        "en": "Behind the connector, three more things (pdlab/engine/core/kv_cache_manager.py and "
        "pdlab/engine/distributed/kv_transfer/pd_connector.py tell why). The drafter's own K/V row "
        "at N - 1: P's MTP layer wrote it from h[{hp}] and P's sampled token {ptok}, and it "
        "crossed with the K/V; the proxy throws P's token away, and D's draft prefill wrote the "
        "row again from h[{dhp}] and D's token {dtok}. The same token here (greedy); with sampling "
        "they may differ, and D's row is the one that counts.",
        "zh": "在 connector 之后，还有三件事（原因见 pdlab/engine/core/kv_cache_manager.py 和 "
        "pdlab/engine/distributed/kv_transfer/pd_connector.py）。草稿模型自己在 N - 1 的 K/V 行：P "
        "的 MTP 层用 h[{hp}] 和 P 采样出的 token {ptok} 写了它，它随 K/V 一起传了过来；代理丢掉 P "
        "的 token，D 的草稿预填充用 h[{dhp}] 和 D 的 token {dtok} 把这一行重写了一遍。这里两个 "
        "token 相同（贪心）；采样时可能不同，算数的是 D 写的那一行。",
    },
    "mtp_backoff": {
        "en": "NIXL's backoff: with K MTP modules (K > 1) P cuts the last K - 1 prompt tokens off "
        "the request, prefills N - (K - 1), and D computes the rest; otherwise a module's K/V "
        "would hold P's unverified drafts, which D never rewrites. Here K = {k} with one MTP "
        "module: P cut {cut} of N = {n} tokens, and D's first step is the N - 1 story.",
        "zh": "NIXL 的回退：有 K 个 MTP 模块（K > 1）时，P 把请求的最后 K - 1 个提示词 token 切掉，"
        "只预填充 N - (K - 1) 个，其余由 D 计算；否则模块的 K/V 里会留下 P 未经验证的草稿，而 D 永"
        "远不会重写它们。这里 K = {k}，只有一个 MTP 模块：P 在 N = {n} 个 token 中切掉了 {cut} 个，"
        "D 的第一步就是 N - 1 的那一套。",
    },
    "mtp_block_drop": {
        "en": "The prompt sent again: D found it in its local prefix cache, but kept {d_hit} "
        "tokens, not floor((N - 1) / {bs}) × {bs} = {full} (N = {n}): with a KV connector "
        "vLLM drops the last block of every local hit (use_eagle_block_drop), because the "
        "drafter's row at a block's last position was built from a token the block does not "
        "hold. P did the same ({p_hit}). Without a connector the block hashes cover the "
        "next token instead, and a resent prompt keeps {full}.",
        "zh": "把这个提示词再发一次：D 在本地前缀缓存里找到了它，但只保留 {d_hit} 个 token，"
        "而不是 floor((N - 1) / {bs}) × {bs} = {full}（N = {n}）：有 KV connector 时，vLLM 丢掉"
        "每次本地命中的最后一块（use_eagle_block_drop），因为草稿模型在一块最后位置的那一行"
        "是用这块之外的 token 算出来的。P 也一样（{p_hit}）。没有 connector 时，块哈希改为把"
        "下一个 token 也算进去，再发一次的提示词保留 {full} 个。",
    },
    # ---- notebooks 05/06, section 8 ---------------------------------------------------
    "nb5_mtp_col_scheduled": {"en": "scheduled", "zh": "调度的 token 数"},
    "nb5_mtp_col_sampled": {"en": "tokens produced", "zh": "产生的 token"},
    "nb5_mtp_col_rolled_back": {"en": "rolled back", "zh": "回退的位置数"},
    "nb5_mtp_col_drafter_input": {"en": "drafter's input", "zh": "草稿模型的输入"},
    "nb5_mtp_col_backoff": {"en": "tokens P cut", "zh": "P 切掉的 token 数"},
    "nb5_mtp_col_p_row": {"en": "P's drafter row", "zh": "P 的草稿模型写的行"},
    "nb5_mtp_col_d_row": {"en": "D's drafter row", "zh": "D 的草稿模型写的行"},
    "nb5_mtp_col_hit_again": {"en": "D's hit, sent again", "zh": "再发一次时 D 的命中"},
    "nb5_mtp_drafter": {
        "en": "K = {k}, PCP {pcp}: the drafter took h[{hp}] and token {tok}, and proposed "
        "{drafts} for D's next step",
        "zh": "K = {k}，PCP {pcp}：草稿模型拿到 h[{hp}] 和 token {tok}，为 D 的下一步提出了 "
        "{drafts}",
    },
}
