"""The words of the first-token designs and of ``pdlab sim``, in English and Simplified
Chinese.

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
    "dz_mode": {"en": "design", "zh": "设计"},
    "dz_same": {"en": "= colocated", "zh": "与非分离一致"},
    "dz_kv": {"en": "K/V bytes", "zh": "K/V 字节"},
    "dz_payload": {"en": "+ with them", "zh": "另附字节"},
    "dz_flops": {"en": "D FLOPs for token 1", "zh": "D 为 token 1 的 FLOPs"},
    "dz_known": {"en": "token 1 known", "zh": "token 1 何时已知"},
    "dz_first": {"en": "D's first step", "zh": "D 的第一步"},
    "dz_latency": {"en": "latency after P ({gpu})", "zh": "P 完成之后的延迟（{gpu}）"},
    "dz_link_source": {
        "en": "one 400 Gb/s InfiniBand port per GPU, an assumption",
        "zh": "每块 GPU 一个 400 Gb/s InfiniBand 端口，属假设",
    },
    "dz_v3": {
        "en": "DeepSeek-V3 as pdlab sim deploys it, N = {n}: bytes / D FLOPs / latency",
        "zh": "DeepSeek-V3 按 pdlab sim 的部署，N = {n}：字节 / D FLOPs / 延迟",
    },
    "dz_yes": {"en": "yes", "zh": "是"},
    "dz_no": {"en": "NO", "zh": "否"},
    "dz_prefilling": {"en": "prefilling", "zh": "仍在预填充"},
    "dz_decode": {"en": "decode", "zh": "解码"},
    "dz_note": {
        "en": "Bytes, steps and routing are the trace's; FLOPs and latency are modelled "
        "(pdlab/sim/kernel_costs.py, {gpu} roofline, link {link} GB/s: {link_source}) for an idle "
        "D: hidden_state's lm_head runs in the step its K/V land, so token 1 is known a step "
        "before recompute's (pdlab sim adds the batch). The payload is the bytes the design needs; "
        "SGLang's metadata buffer pads the token id to 64 B (16 int32, the RDMA minimum) and, with "
        "EAGLE or MTP, also carries top-k probabilities and indices and the draft model's hidden "
        "state (python/sglang/srt/disaggregation/utils.py, MetadataBuffers), so that D can verify "
        "P's drafts at once; TensorRT-LLM's DisaggregatedParams carries draft tokens too. vLLM "
        "ships neither: D's recompute of position N-1 gives its MTP drafter h[N-1].",
        "zh": "字节、步号与路由取自 trace；FLOPs 与延迟为模型估算（pdlab/sim/kernel_costs.py，"
        "{gpu} roofline 模型，链路 {link} GB/s：{link_source}），按空闲的 D 计：hidden_state 的 "
        "lm_head 在它的 K/V 到达的那一步里计算，所以 token 1 比 recompute 早一步已知（批次的影响由 "
        "pdlab sim 加上）。另附字节是设计本身需要的字节；SGLang 的元数据缓存区把 token id 补齐到 "
        "64 B（16 个 int32，RDMA 的最小长度），开启 EAGLE 或 MTP 时还要带上草稿模型的 top-k 概率、"
        "下标和隐藏状态（python/sglang/srt/disaggregation/utils.py 的 MetadataBuffers），让 D 能立"
        "即验证 P 的草稿；TensorRT-LLM 的 DisaggregatedParams 也带草稿 token。vLLM 两者都不传：D 重"
        "算位置 N-1，由此把 h[N-1] 交给它的 MTP 草稿模型。",
    },
    "sim_title": {
        "en": "D's decode batch as requests arrive ({gpu} profile)",
        "zh": "请求陆续到达时 D 的解码批次（{gpu} 配置）",
    },
    "sim_routing": {"en": "routing", "zh": "路由"},
    "sim_design": {"en": "design", "zh": "设计"},
    "sim_tpot": {"en": "TPOT ms p50 / {tail}", "zh": "TPOT ms p50 / {tail}"},
    "sim_tokens": {"en": "tokens / step", "zh": "每步 token"},
    "sim_ttft": {"en": "D's TTFT ms", "zh": "D 的 TTFT ms"},
    "sim_t2t": {"en": "D to token 2 ms", "zh": "D 到第 2 个 token ms"},
    "sim_mixed": {"en": "graph lost", "zh": "无 CUDA graph"},
    "sim_r_dcp": {"en": "V2 + DCP", "zh": "V2 + DCP"},
    "sim_r_v2": {"en": "V2", "zh": "V2"},
    "sim_r_pcp": {"en": "V2 + PCP", "zh": "V2 + PCP"},
    "sim_r_v1": {"en": "V1", "zh": "V1"},
    "sim_caption": {
        "en": "Modelled: roofline per kernel group (pdlab/sim/kernel_costs.py) on {source}; MLA "
        "backend {backend}. TTFT on D is from arrival at D (K/V landed) to token 1 known; 0 where "
        "P's token is the answer. TPOT is a step's time over the tokens a running row emits in it; "
        "a tail over fewer than 100 samples is the max. 'graph lost': steps that are not a uniform "
        "decode batch, so the full decode CUDA graph cannot replay them. V2 + PCP is D run with "
        "prefill context parallelism; DCP is D with decode context parallelism 2 on a NIXL "
        "instance (opt-in on either role), routing only, its costs one device's.",
        "zh": "模型估算：每组算子按 roofline 模型计（pdlab/sim/kernel_costs.py），设备数据："
        "{source}；MLA 后端 {backend}。D 的 TTFT 从请求到达 D（K/V 已到）算到 token 1 已知；P 的 "
        "token 即答案时为 0。TPOT 是一步的时间除以运行中的每行在这一步产出的 token 数；样本少于 "
        "100 个时尾部取最大值（表头写作 max）。“无 CUDA graph”：不是均匀解码批次、完整的 decode "
        "CUDA graph 无法重放的步。V2 + PCP 是开启预填充上下文并行的 D；DCP 是在 NIXL 实例上开启解码"
        "上下文并行 2 的 D（两种角色都可以选择开启），只模拟路由，代价按单个设备计。",
    },
    "sim_caption_moe": {
        "en": " The model as deployed, in DeepSeek's decode layout (DeepSeek-V3/R1 Inference "
        "System Overview: EP144, DP144; --num-gpus sets the size): {gpus} GPUs; attention, the "
        "shared expert and the {dense} dense layers data parallel, the batch above one GPU's (the "
        "other GPUs assumed to run as many tokens); the {experts} routed experts (each token picks "
        "{k}) expert parallel on the other {moe} layers, {per} a GPU ({redundant} redundant "
        "copies). Weights {dtype}, {gb} GB a GPU (block scales not counted; lm_head, the router "
        "and kv_b_proj bf16). A step reads the experts its tokens touch under uniform routing (an "
        "assumption). The all-to-all (dispatch fp8, combine bf16) crosses the {link} GB/s "
        "link{overlap}. Math at the dense bf16 peak, {peak} TFLOP/s.",
        "zh": "模型按实际部署计，采用 DeepSeek 的解码布局（“DeepSeek-V3/R1 Inference System "
        "Overview”：EP144、DP144；规模由 --num-gpus 设定）：{gpus} 块 GPU；注意力、共享专家和前 "
        "{dense} 个稠密层按数据并行，上表的批次是一块 GPU 的（假设其余 GPU 跑同样多的 token）；其"
        "余 {moe} 层的 {experts} 个路由专家（每个 token 选 {k} 个）按专家并行，每块 GPU {per} 个（"
        "{redundant} 个冗余副本）。权重 {dtype}，每块 GPU {gb} GB（不计分块缩放因子；lm_head、路由"
        "器与 kv_b_proj 为 bf16）。一步读取它的 token 触及的专家，按均匀路由计（这是假设）。专家的"
        "全对全通信（分发用 fp8，合并用 bf16）走 {link} GB/s 的链路，{overlap}。计算按稠密 bf16 峰"
        "值 {peak} TFLOP/s 计。",
    },
    "sim_caption_overlap_on": {
        "en": ", overlapped with compute as in DeepSeek's decode: each step runs as two "
        "micro-batches, one's all-to-all crossing while the other computes, so a step "
        "takes the larger of the two (an assumption: hidden fully, the pipeline's fill "
        "and drain not counted), and every weight is read once per micro-batch",
        "zh": "并按 DeepSeek 解码的做法与计算重叠：每一步拆成两个微批次，一个在做全对全"
        "通信时另一个在计算，所以一步的时间取两者中较大的一个（这是假设：通信完全被掩盖，"
        "不计流水线的填充与排空），每个权重每个微批次读一次",
    },
    "sim_caption_overlap_off": {
        "en": ", added to the step, not overlapped (overlap_all_to_all=False): an upper bound",
        "zh": "加到每一步上、不与计算重叠（overlap_all_to_all=False）：这是上限",
    },
    "sim_caption_mtp": {
        "en": " MTP: K = {k} speculative tokens, acceptance rate {a} per draft (the default is "
        "DeepSeek-V3's own figure, Technical Report arXiv:2412.19437, section 5.4.3: 85-90% for "
        "the second token; pdlab takes 85% for every draft, an assumption past the first).",
        "zh": " MTP：K = {k} 个草稿 token，每个草稿的接受率 {a}（默认值取自 DeepSeek-V3 自己的数字"
        "，技术报告 arXiv:2412.19437 第 5.4.3 节：第二个 token 的接受率为 85-90%；pdlab 对每个草稿"
        "都取 85%，第一个之后属假设）。",
    },
    "sim_caption_mtp_weights": {
        "en": " Each GPU's weights include the MTP module's own (its decoder layer and "
        "eh_proj; its embedding and lm_head are the target's, shared).",
        "zh": "每块 GPU 的权重包括 MTP 模块自己的权重（它的解码层与 eh_proj；嵌入层和 "
        "lm_head 与目标模型共用）。",
    },
    "sim_source_H100": {
        "en": "NVIDIA H100 Tensor Core GPU datasheet (SXM): 989 TFLOP/s dense bf16 (1,979 "
        "with sparsity), 3.35 TB/s HBM3",
        "zh": "NVIDIA H100 Tensor Core GPU 数据手册（SXM）：bf16 稠密 989 TFLOP/s（稀疏 "
        "1,979），HBM3 3.35 TB/s",
    },
    "sim_source_H800": {
        "en": "NVIDIA H800 SXM product brief: H100's tensor cores (989 TFLOP/s dense bf16, "
        "1,979 with sparsity), 3.35 TB/s HBM3; NVLink cut to 400 GB/s",
        "zh": "NVIDIA H800 SXM 产品简介：与 H100 相同的 Tensor Core（bf16 稠密 989 TFLOP/s，"
        "稀疏 1,979），HBM3 3.35 TB/s；NVLink 降到 400 GB/s",
    },
    "sim_source_H200": {
        "en": "NVIDIA H200 Tensor Core GPU datasheet (SXM): 989 TFLOP/s dense bf16 (1,979 "
        "with sparsity), 4.8 TB/s HBM3e",
        "zh": "NVIDIA H200 Tensor Core GPU 数据手册（SXM）：bf16 稠密 989 TFLOP/s（稀疏 "
        "1,979），HBM3e 4.8 TB/s",
    },
    "sim_source_B200": {
        "en": "NVIDIA HGX B200 specifications (1,000 W): 2,250 TFLOP/s dense bf16 (4.5 "
        "PFLOPS with sparsity), 8 TB/s HBM3e",
        "zh": "NVIDIA HGX B200 规格（1,000 W）：bf16 稠密 2,250 TFLOP/s（稀疏 4.5 PFLOPS），"
        "HBM3e 8 TB/s",
    },
    "sim_source_here": {
        "en": "measured now on this {on}: {shape} matmul, tensor copy",
        "zh": "本机实测（{on} 上的 {shape} 矩阵乘法与张量拷贝）",
    },
    "ch7": {
        "en": "Chapter 7 · Could D skip it, and does it matter?",
        "zh": "第 7 章 · D 能省掉这一步吗？这一步要紧吗？",
    },
    "ch7_intro": {
        "en": "D recomputes position N-1 because the K/V do not carry its final hidden state "
        "(chapter 3). Other engines send more instead: P's sampled token (SGLang, TensorRT-LLM), "
        "that token appended to D's prompt, or hidden states (vLLM V0's SimpleConnector sent those "
        "of every prompt position). First the four designs on this prompt, traced; then D's whole "
        "decode batch, simulated for DeepSeek-V3 as deployed (fp8 weights, experts spread over "
        "DeepSeek's 144-GPU decode instance) as requests arrive, without speculative decoding and "
        "with MTP. The first-token question has an open upstream thread: vllm-project/vllm#25373 "
        "asks to reuse P's tokenization and first token on D.",
        "zh": "D 要重算位置 N-1，是因为 K/V 里没有它最后一层的隐藏状态（见第 3 章）。别的引擎改为多"
        "传一点：P 采样出的 token（SGLang、TensorRT-LLM），把这个 token 追加到 D 的提示词里，或者传"
        "隐藏状态（vLLM V0 的 SimpleConnector 传了每个提示词位置的隐藏状态）。先看这四种设计在本提"
        "示词上的实测 trace，再看请求陆续到达时，按 DeepSeek-V3 的实际部署（fp8 权重，专家分布在 "
        "DeepSeek 144 块 GPU 的解码实例上）模拟的 D 的整个解码批次，分别不开投机解码和开启 MTP。第"
        "一个 token 的问题在上游有一个公开的讨论：vllm-project/vllm#25373 请求在 D 上复用 P 的分词"
        "结果和第一个 token。",
    },
    "ch7_answer": {
        "en": "The answer. For DeepSeek-V3 as deployed ({dtype} weights, {gpus} GPUs of the {gpu} "
        "profile, routed experts expert parallel, attention data parallel; the table's caption "
        "states every assumption), on one GPU ({batch} running decodes over {ctx} tokens, {rate} "
        "arrivals/s of {plen}-token prompts, {steps} steps): under Model Runner V2's default, D's "
        "short extend is a prefill_runs_as_decode row, every step stays a uniform decode batch and "
        "TPOT is {v2_p50} p50 / {v2_p99} {v2_tail} for recompute as for first_token. The recompute "
        "costs the arriving request one batch step, not the batch: D's TTFT is {rc_ttft} against "
        "{hs_ttft} for hidden_state, whose lm_head runs in the step its K/V land (0 where P's "
        "token is the answer), and token 2 comes {rc_t2t} after the K/V land, against {ft_t2t} "
        "with first_token. Under prefill context parallelism, recompute and append_prompt make "
        "each arrival's step a forward_mha row: {pcp_mixed} of the steps lose the full decode "
        "graph, TPOT {pcp_tail} rises to {pcp_p99} ({pcp_x} the default's) and D's TTFT to "
        "{pcp_ttft}, while first_token ({ft_pcp_p99}) and hidden_state ({hs_pcp_p99}), whose first "
        "row is a decode, keep the default's. Decode context parallelism (opt-in, default 1, for "
        "either role) leaves use_pcp False: the short extend stays a decode; on a NIXL instance it "
        "sets the K/V interleave to the block size, so {dcp_backend}'s threshold becomes {dcp_t}, "
        "and vLLM then refuses MTP at start-up. With MTP (K = {k}, {acc} acceptance) every row "
        "verifies 1 + K tokens: the step takes {mtp_step}, a row emits {mtp_tokens} tokens per "
        "step, and TPOT is {mtp_p50} with MTP against {v2_p50} without: every verified token "
        "crosses the experts' all-to-all, which outlasts the compute in {mtp_link} of these steps "
        "({link} without MTP; DeepSeek report about 1.8x the tokens per second with MTP; try a "
        "smaller --batch-size or a faster --link-gbps). D's first row, padded with K placeholder "
        "drafts, is still prefill_runs_as_decode (D's TTFT {mtp_ttft}); under PCP it is a "
        "forward_mha row ({mtp_pcp_mixed} of the steps lose the graph). So the short extend "
        "matters where something counts it as a prefill (PCP) and the contexts are long; under "
        "V2's default it costs one step of latency for the request that arrives, and nothing for "
        "the rest.",
        "zh": "结论。按 DeepSeek-V3 的实际部署（{dtype} 权重，{gpu} 配置的 {gpus} 块 GPU，路由专家"
        "按专家并行，注意力按数据并行；每条假设见表格的说明），一块 GPU 上（{batch} 个运行中的解码"
        "请求，上下文 {ctx} token，每秒到达 {rate} 个 {plen} token 的提示词，共 {steps} 步）：在 "
        "Model Runner V2 的默认设置下，D 的短 extend 是一行 prefill_runs_as_decode，每一步都仍是均"
        "匀解码批次，recompute 与 first_token 的 TPOT 同为 p50 {v2_p50} / {v2_tail} {v2_p99}。重算"
        "的代价落在到达的那个请求身上，而不是整个批次：D 的 TTFT 为 {rc_ttft}，hidden_state 为 "
        "{hs_ttft}（它的 lm_head 在 K/V 到达的那一步里计算；P 的 token 即答案时为 0），第 2 个 "
        "token 在 K/V 到达后 {rc_t2t} 出现，first_token 则是 {ft_t2t}。开启预填充上下文并行（PCP）"
        "时，recompute 与 append_prompt 让每个到达请求的第一步成为 forward_mha 行：{pcp_mixed} 的步"
        "失去完整的 decode CUDA graph，TPOT {pcp_tail} 升到 {pcp_p99}（默认的 {pcp_x}），D 的 TTFT "
        "升到 {pcp_ttft}；而第一行本就是 decode 行的 first_token（{ft_pcp_p99}）与 hidden_state（"
        "{hs_pcp_p99}）保持默认的水平。解码上下文并行（DCP：需显式开启，默认 1，两种角色都能用）让 "
        "use_pcp 保持为 False：短 extend 仍是 decode 行；在 NIXL 实例上它把 K/V 的交错粒度设为块大"
        "小，{dcp_backend} 的阈值于是变为 {dcp_t}，vLLM 也就在启动时拒绝 MTP。开启 MTP（K = {k}，接"
        "受率 {acc}）时每行验证 1 + K 个 token：一步用时 {mtp_step}，每行每步产出 {mtp_tokens} 个 "
        "token，TPOT 为 {mtp_p50}，不开 MTP 时为 {v2_p50}：每个被验证的 token 都要走一遍专家的全对"
        "全通信，在这些步中有 {mtp_link} 比计算还长（不开 MTP 时为 {link}；DeepSeek 报告开启 MTP 后"
        "每秒 token 数约为 1.8 倍；可以试试更小的 --batch-size 或更快的 --link-gbps）。D 的第一行补"
        "上 K 个占位草稿后仍是 prefill_runs_as_decode（D 的 TTFT {mtp_ttft}），PCP 下则是 "
        "forward_mha 行（{mtp_pcp_mixed} 的步失去 CUDA graph）。所以，只有当某个规则把短 extend 算"
        "作 prefill 行（PCP）且上下文很长时，它才要紧；在 V2 默认设置下，它只让到达的那个请求多等一"
        "步，对其余请求没有影响。",
    },
    # ---- the simulator's widget (pdlab/ui/sim_widget.py) -------------------------------
    "w_sim_context": {"en": "context log2 (tokens)", "zh": "上下文 log2（token）"},
    "w_sim_batch": {"en": "running decodes", "zh": "运行中的解码数"},
    "w_sim_rate": {"en": "arrivals/s", "zh": "每秒到达数"},
    "w_sim_k": {"en": "MTP K", "zh": "MTP K"},
    "w_sim_note": {
        "en": "{steps} steps, {n} arrivals, DeepSeek-V3 as deployed ({dtype} weights, "
        "{gpus} GPUs, one GPU's batch), {gpu} profile; prompts as long as the context.",
        "zh": "共 {steps} 步、{n} 个到达请求，DeepSeek-V3 按实际部署（{dtype} 权重，{gpus} 块 "
        "GPU，批次为一块 GPU 的），{gpu} 配置；提示词与上下文等长。",
    },
    "v_arrived_first": {
        "en": "D {req}: K/V for {n} tokens arrived; num_computed_tokens = {nct} (nothing "
        "subtracted: the first token came with them, N = {N})",
        "zh": "D {req}：{n} 个 token 的 K/V 已到达；num_computed_tokens = {nct}（不减一："
        "第一个 token 随 K/V 一起到达，N = {N}）",
    },
}
