"""The text the tiny model is trained on (``pdlab train``, :mod:`pdlab.tools.train`).

Short questions and answers about the prefill/decode path, in English and in Chinese (the
terms of ``docs/glossary.md``), written for pdlab. The prompts the views start with are among
the questions, so their greedy continuations read as answers. vLLM has no counterpart.
"""

from __future__ import annotations

# The tour's default prompt in each language (pdlab/ui/tour.py shows the English one).
DEFAULT_PROMPTS = {"en": "Why run the last token twice?", "zh": "为什么最后一个 token 要算两次？"}

EN: tuple[tuple[str, str], ...] = (
    (
        "Why run the last token twice?",
        "The KV cache holds keys and values, not the hidden state. The first output token "
        "needs lm_head(norm(h[N-1])), so D runs position N-1 through every layer again.",
    ),
    (
        "Why does the decode instance run the last prompt token again?",
        "Because P sends only the KV cache. The logits of the first output token come from "
        "the hidden state of the last prompt position, and no cache holds it.",
    ),
    (
        "The KV cache holds keys and values, not hidden states.",
        "So a cache hit saves the keys and values of a position, but its hidden state must "
        "be computed again when its logits are needed.",
    ),
    (
        "Why does D set num_computed_tokens to N-1?",
        "When every prompt token is already in the cache, the scheduler sets "
        "num_computed_tokens = num_tokens - 1, so one token is left to run and its logits "
        "give the next token.",
    ),
    (
        "What does P send to D?",
        "P sends every layer's latent rows for the prompt's blocks, and returns "
        "kv_transfer_params with its block ids and engine id, so D can read the blocks.",
    ),
    (
        "What does D receive from P?",
        "D receives the latent rows of every prompt position in every layer. It writes them "
        "into its own blocks, then computes the last position again.",
    ),
    (
        "What is a block table?",
        "A block table lists the physical blocks of one request. Position i lives in block "
        "block_table[i // B] at offset i % B, where B is the block size.",
    ),
    (
        "What is a slot mapping?",
        "The slot mapping gives each new token its slot in the cache: block_id * B + offset. "
        "The kernel writes the token's latent row there.",
    ),
    (
        "What is a KV block?",
        "A block holds the cache rows of B consecutive tokens of one request. Blocks come "
        "from a shared pool and return to it when the request finishes.",
    ),
    (
        "What is prefix caching?",
        "Full blocks are hashed in a chain: each hash covers the block's tokens and the hash "
        "before it. A new request reuses every block whose hash is already cached.",
    ),
    (
        "How many tokens does a fully cached prompt reuse?",
        "floor((N-1)/B)*B tokens. At least the last prompt token must run, and hits are whole "
        "blocks, so the block that holds it is computed again.",
    ),
    (
        "What is a short extend?",
        "A step with query_len == 1 while num_computed_tokens < num_prompt_tokens: one new "
        "token, like a decode, but the prompt is not finished, like a prefill.",
    ),
    (
        "Is D's first step a prefill or a decode?",
        "It is a short extend: query_len is 1 and num_computed_tokens is N-1. Which path it "
        "takes depends on treat_short_extends_as_decodes.",
    ),
    (
        "Which path does D's first step take by default?",
        "The decode path. The MLA builder passes treat_short_extends_as_decodes = not "
        "use_pcp, so without context parallelism the step runs forward_mqa.",
    ),
    (
        "When does D's first step take _forward_prefill?",
        "When prefill_context_parallel_size is above 1. Then short extends count as "
        "prefills, and the step gathers and up-projects the whole context for one query.",
    ),
    (
        "What is is_prefilling?",
        "The model runner computes is_prefilling = num_computed_tokens < num_prompt_tokens "
        "for every request in the batch.",
    ),
    (
        "What is reorder_batch_threshold?",
        "Requests with at most this many query tokens are treated as decodes. Triton MLA uses "
        "1, FlashMLA 128 and FlashAttnMLA 512.",
    ),
    (
        "Do both paths give the same token?",
        "Yes. The absorbed decode path and the prefill path compute the same attention; "
        "only their cost differs, by two orders of magnitude at DeepSeek-V3's widths.",
    ),
    (
        "Does P/D give the same tokens as a colocated engine?",
        "Yes, token for token. Both sides load the same weights, and D computes the last "
        "position from the same keys and values.",
    ),
    (
        "What is MLA?",
        "Multi-head Latent Attention caches one latent row per token and layer, shared by "
        "all heads: kv_c_normed and k_pe, 512 + 64 = 576 values in DeepSeek.",
    ),
    (
        "What is the latent row?",
        "The latent row is [kv_c_normed | k_pe]: the compressed keys and values and the "
        "rotary part of the key. The tiny model's row is 64 + 16 = 80 wide.",
    ),
    (
        "What does absorb mean in MLA?",
        "W_UK is folded into the query and W_UV into the output, so attention runs as MQA "
        "over the latent rows and nothing is up-projected.",
    ),
    (
        "What does the naive form of MLA do?",
        "It up-projects every cached latent row through kv_b_proj into per-head keys and "
        "values, then attends as ordinary multi-head attention.",
    ),
    (
        "When is the absorbed form cheaper?",
        "When few query tokens attend to a long context. For DeepSeek-V3 the crossover is "
        "about 171 query tokens; above it the naive form costs fewer FLOPs.",
    ),
    (
        "What does the scheduler do?",
        "Each step it gives every request tokens to compute, within the token budget, and "
        "allocates the blocks they need. num_computed_tokens tracks what is done.",
    ),
    (
        "What is chunked prefill?",
        "A long prompt is computed over several steps, a chunk per step, within "
        "max_num_batched_tokens. A token is sampled only when the prompt is done.",
    ),
    (
        "What is long_prefill_token_threshold?",
        "A cap on one prefill chunk, so a long prompt cannot take the whole budget while "
        "other requests wait.",
    ),
    (
        "What is preemption?",
        "When blocks run out, the scheduler frees a running request's blocks and computes it "
        "again later. The tokens are the same either way.",
    ),
    (
        "What does the proxy do in P/D?",
        "It sends the prompt to P with max_tokens=1 and do_remote_decode, then sends the "
        "original request to D with P's kv_transfer_params.",
    ),
    (
        "What happens to the token P samples?",
        "The proxy discards it. D computes the first output token itself, from the last "
        "prompt position.",
    ),
    (
        "Why does P hold its blocks after the prefill?",
        "D has not read them yet. P frees them when D reports that the transfer is done, or "
        "when the transfer times out.",
    ),
    (
        "What does prefill cost?",
        "Prefill computes many tokens at once, so its matrix products are large and it is "
        "bound by FLOPs.",
    ),
    (
        "What does decode cost?",
        "Decode computes one token per request and reads the whole cache, so it is bound by "
        "memory bandwidth.",
    ),
    (
        "What is the KV cache?",
        "Every layer's keys and values of the tokens computed so far, kept so that each new "
        "token attends to them without computing them again.",
    ),
    (
        "What is a token?",
        "The unit the model reads and writes. pdlab's tokenizer uses bytes: an ASCII letter "
        "is one token, a Chinese character three.",
    ),
    (
        "What is pdlab?",
        "A small, tested reference of the prefill/decode path: a paged KV cache, a scheduler, "
        "MLA kernels and a tiny DeepSeek-style model.",
    ),
)

ZH: tuple[tuple[str, str], ...] = (
    (
        "为什么最后一个 token 要算两次？",
        "KV 缓存里存的是键和值，不是隐藏状态。第一个输出 token 需要最后位置的隐藏状态，"
        "所以解码实例要把位置 N-1 在每一层再算一遍。",
    ),
    (
        "为什么解码实例要重算最后一个提示词 token？",
        "因为预填充实例只发送 KV 缓存。第一个输出 token 的 logits 来自最后位置的隐藏状态，"
        "而没有任何缓存保存它。",
    ),
    (
        "为什么 D 把 num_computed_tokens 设为 N-1？",
        "提示词的每个 token 都已在缓存中时，调度器令 num_computed_tokens = num_tokens - 1，"
        "留下一个 token 来算，它的 logits 给出下一个 token。",
    ),
    (
        "P 发给 D 什么？",
        "P 发送提示词所在块里每一层的潜向量行，并返回 kv_transfer_params，其中有它的块号和"
        "引擎号，D 据此读取这些块。",
    ),
    (
        "D 从 P 收到什么？",
        "D 收到每一层、每个提示词位置的潜向量行，写入自己的块，然后把最后一个位置再算一遍。",
    ),
    (
        "什么是块表？",
        "块表列出一个请求的物理块。位置 i 在第 i // B 项所指的块里，偏移是 i % B，B 是块大小。",
    ),
    (
        "什么是槽映射？",
        "槽映射给每个新 token 一个缓存里的槽：块号 * B + 偏移。算子把这个 token 的潜向量行"
        "写到那里。",
    ),
    (
        "什么是块？",
        "一个块保存一个请求中连续 B 个 token 的缓存行。块来自共享的池，请求结束后归还。",
    ),
    (
        "什么是前缀缓存？",
        "满的块按链计算块哈希：每个哈希覆盖本块的 token 和前一个哈希。新请求复用哈希已在"
        "缓存中的每一个块。",
    ),
    (
        "完全命中缓存的提示词能复用多少 token？",
        "floor((N-1)/B)*B 个。至少最后一个提示词 token 必须计算，而命中以整块为单位，"
        "所以它所在的块要重算。",
    ),
    (
        "什么是短 extend？",
        "query_len == 1 而 num_computed_tokens < num_prompt_tokens 的一步：只有一个新 "
        "token，像解码；提示词还没算完，又像预填充。",
    ),
    (
        "D 的第一步是预填充还是解码？",
        "是短 extend：query_len 为 1，num_computed_tokens 为 N-1。走哪条路径取决于 "
        "treat_short_extends_as_decodes。",
    ),
    (
        "D 的第一步默认走哪条路径？",
        "decode 路径。MLA 的构建器传入 treat_short_extends_as_decodes = not use_pcp，"
        "没有上下文并行时这一步运行 forward_mqa。",
    ),
    (
        "D 的第一步什么时候走 _forward_prefill？",
        "prefill_context_parallel_size 大于 1 时。这时短 extend 算作预填充，"
        "这一步为一个 query 收集并上投影整个上下文。",
    ),
    (
        "什么是 is_prefilling？",
        "模型运行器为批次中的每个请求计算 is_prefilling = num_computed_tokens < "
        "num_prompt_tokens。",
    ),
    (
        "什么是 reorder_batch_threshold？",
        "query token 不超过这个数的请求按解码处理。Triton MLA 是 1，FlashMLA 是 128，"
        "FlashAttnMLA 是 512。",
    ),
    (
        "两条路径给出同一个 token 吗？",
        "是的。吸收后的 decode 路径和 prefill 路径算的是同一个注意力，只是代价不同，"
        "在 DeepSeek-V3 的宽度下相差两个数量级。",
    ),
    (
        "P/D 分离和非分离引擎给出的 token 一样吗？",
        "一样，逐个 token 相同。两边加载同样的权重，D 用同样的键和值算出最后一个位置。",
    ),
    (
        "什么是 MLA？",
        "多头潜在注意力为每个 token、每一层缓存一行潜向量，所有头共享：kv_c_normed 和 "
        "k_pe，在 DeepSeek 中是 512 + 64 = 576 个值。",
    ),
    (
        "潜向量行是什么？",
        "潜向量行是 [kv_c_normed | k_pe]：压缩后的键和值，加上键的旋转位置部分。"
        "小模型的一行宽 64 + 16 = 80。",
    ),
    (
        "MLA 里的吸收是什么意思？",
        "把 W_UK 并入 query，把 W_UV 并入输出，注意力就在潜向量行上以 MQA 的形式运行，"
        "什么都不用上投影。",
    ),
    (
        "MLA 的朴素形式做什么？",
        "它用 kv_b_proj 把每一行缓存的潜向量上投影成每个头的键和值，再做普通的多头注意力。",
    ),
    (
        "吸收形式什么时候更便宜？",
        "少量 query token 关注很长的上下文时。DeepSeek-V3 的临界点大约是 171 个 query "
        "token，超过它朴素形式的 FLOPs 更少。",
    ),
    (
        "调度器做什么？",
        "每一步它在 token 预算内给每个请求分配要算的 token，并分配所需的块。"
        "num_computed_tokens 记录已经算完的部分。",
    ),
    (
        "什么是分块预填充？",
        "长提示词分几步计算，每步一块，不超过 max_num_batched_tokens。提示词算完后才采样 token。",
    ),
    (
        "什么是 long_prefill_token_threshold？",
        "单个预填充块的上限，这样长提示词不会在其他请求等待时占满整个预算。",
    ),
    (
        "什么是抢占？",
        "块用完时，调度器释放一个运行中请求的块，稍后重新计算它。两种情况下 token 都一样。",
    ),
    (
        "P/D 分离中代理做什么？",
        "它把提示词发给 P，带上 max_tokens=1 和 do_remote_decode，再把原请求连同 P 的 "
        "kv_transfer_params 发给 D。",
    ),
    ("P 采样出的 token 怎么处理？", "代理丢弃它。D 从最后一个提示词位置自己算出第一个输出 token。"),
    (
        "预填充之后 P 为什么还占着块？",
        "D 还没有读取它们。D 报告传输完成，或者传输超时后，P 才释放这些块。",
    ),
    ("预填充的代价是什么？", "预填充一次计算很多 token，矩阵乘法很大，受限于 FLOPs。"),
    ("解码的代价是什么？", "解码每个请求只算一个 token，却要读整个缓存，受限于内存带宽。"),
    (
        "什么是 KV 缓存？",
        "每一层已算 token 的键和值。保存它们，每个新 token 就能关注它们而不必重算。",
    ),
    (
        "什么是 token？",
        "模型读写的单位。pdlab 的分词器按字节切分：一个 ASCII 字母是一个 token，一个汉字是三个。",
    ),
    (
        "pdlab 是什么？",
        "预填充和解码路径的一个小而经过测试的参考实现：分页 KV 缓存、调度器、MLA 算子和一个"
        "小型 DeepSeek 风格模型。",
    ),
)


def entries() -> list[str]:
    """Every question with its answer, one line each: English, then Chinese."""
    en = [f"{q} {a}" for q, a in EN]
    zh = [f"{q}{a}" for q, a in ZH]
    return en + zh
