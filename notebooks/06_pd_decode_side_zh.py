# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 6. P/D 分离的 decode 侧：D 为什么要把最后一个 prompt token 再算一遍
#
# （本篇是第 5 篇的中文版，内容相同，代码相同。）
#
# vLLM 论坛上有人问过 prefill/decode（P/D）分离的几个问题：
#
# 1. 在 decode 实例（D）上，scheduler 为什么把 `num_computed_tokens` 设成
#    `prompt_len - 1`？也就是当它等于 `request.num_tokens` 时那句
#    `num_computed_tokens -= 1`。
# 2. DeepSeek（MLA）的代码用 `num_computed_tokens < num_prompt_tokens` 判断是不是 prefill。
#    那在 D 上这个条件不就成立了吗？
# 3. 这样一来，D 岂不是要为这一个 token 跑一遍 `_forward_prefill`？
# 4. “最后一个 token 必须重算才能得到 logits，用不了 cache”——为什么？
#
# **你会学到什么。** 我们不靠讲，而是运行 pdlab 的 P/D 对、读它的 trace，把四个问题逐一回答：
#
# - P 传给 D 的是什么：每一层在位置 `0..N-1` 的 K/V；没有传的是什么：位置 `N-1` 在最后
#   一层之后的 hidden state，而第一个输出 token 的 logits 恰恰只取决于它；
# - 因此 D 的第一步是一个“短 extend”：`query_len = 1`，`num_computed_tokens = N-1`，
#   `num_prompt_tokens = N`；
# - 按 `num_computed_tokens < num_prompt_tokens` 规则，这一步会走 `_forward_prefill`；
#   而上游 vLLM 按 query 长度切分 batch（`split_decodes_and_prefills`），它会走
#   `_forward_decode`；
# - 两条路径算出同一个 token，但代价差很多，我们用 DeepSeek-V3 的维度算给你看。
#
# 全部在 CPU 上跑，不到一分钟：模型是 pdlab 的 tiny DeepSeek 结构（2 层、4 个头、
# latent 秩 64、RoPE 16），算子用 pdlab 的 `torch` 后端（Triton 解释器算出的数一样，只是更慢；
# 第 4 篇把两个后端都对过一遍）。

# %%
# Setup: a no-op where pdlab is installed. Elsewhere (Colab, a bare Jupyter) it installs pdlab
# from the checkout this notebook was opened from, or says in one line how to install it.
def ensure_pdlab(start=None):
    import importlib
    import importlib.util
    import os
    import site
    import subprocess
    import sys
    import sysconfig
    from pathlib import Path

    if importlib.util.find_spec("pdlab") is not None:
        return
    here = Path(start or os.getcwd()).resolve()
    roots = [p for p in (here, *here.parents) if (p / "pdlab" / "__init__.py").is_file()]
    root = next((p for p in roots if (p / "pyproject.toml").is_file()), None)
    if root is None or importlib.util.find_spec("pip") is None:
        how = f"pip install -e {root}" if root else "pip install /path/to/pdlab (a clone or wheel)"
        sys.exit(f"pdlab is not installed in {sys.executable}: run `{how}`, then restart.")
    print(f"pdlab is not installed here: installing it from {root} (pip install -e)")
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "-e", str(root)])
    site.addsitedir(sysconfig.get_paths()["purelib"])  # runs the editable install's .pth hook
    importlib.invalidate_caches()


ensure_pdlab()

# %%
# %matplotlib inline
import torch

# tiny 模型的矩阵太小，多线程反而更慢：用一个线程。
torch.set_num_threads(1)

from IPython.display import HTML, display

from pdlab.attention.cost import decode_path_cost, gemm, prefill_path_cost
from pdlab.attention.metadata import is_decode, split_decodes_and_prefills
from pdlab.attention.mla import MLAAttention
from pdlab.config import CacheConfig, ModelConfig, SchedulerConfig
from pdlab.engine import LLMEngine
from pdlab.kernels import gather_cache
from pdlab.pd import PDPair
from pdlab.request import SamplingParams
from pdlab.sched.scheduler import Scheduler
from pdlab.ui.plots import plot_path_costs
from pdlab.ui.widgets import (
    PDExplorer,
    fmt_bytes,
    fmt_flops,
    html_table,
    prompt_of_length,
    route_text,
    run_pd,
    show_source,
    trace_panels,
)

BACKEND = "torch"  # 下面所有引擎的 pdlab.kernels 后端
TINY = ModelConfig.tiny()
print(
    f"算子后端 {BACKEND!r}；模型 {TINY.name}：{TINY.num_hidden_layers} 层，"
    f"{TINY.num_attention_heads} 个头，latent 行宽 {TINY.kv_lora_rank} + "
    f"{TINY.qk_rope_head_dim} = {TINY.kv_cache_dim}"
)

# %% [markdown]
# ## 1. 一个请求走一遍 P 和 D
#
# `PDPair` 驱动两个引擎的方式，和 vLLM 的 P/D proxy 驱动两台服务器一样：prompt 先发给 P，
# 带 `max_tokens=1` 和 `do_remote_decode`；P 做完 prefill，采样一个 token（proxy 会丢掉它），
# 保留自己的 block，返回 `kv_transfer_params`；然后原始请求带着这些参数发给 D。两个引擎写同一个
# trace，`instance` 分别是 `"P"` 和 `"D"`。左右两栏从上往下看。

# %%
N = 11  # prompt 长度（字节级 tokenizer：一个 ASCII 字符就是一个 token）
prompt = prompt_of_length(N)
pair = PDPair(TINY, CacheConfig(block_size=4), SchedulerConfig(rule="prompt"), backend=BACKEND)
out = pair.generate(prompt, SamplingParams(max_tokens=4))[0]
print(f"prompt {prompt!r}（{N} 个 token）-> 输出 token {out.output_token_ids}")
trace_panels(pair.tracer, lang="zh")

# %% [markdown]
# P 一步就把 `N` 个 token 全算完了。D 先分配 block，等 P 的 K/V 到达（`waiting_for_remote_kvs`，
# 然后是 `kv_transfer`）；数据到齐后（`remote_kv_ready`），它把 `num_computed_tokens` 设成了
# `N - 1`，而不是 `N`：

# %%
ready = pair.tracer.first("remote_kv_ready", "D")
print(
    f"收到了 {ready['num_computed_tokens_before_adjust']} 个 token 的 K/V；"
    f"num_computed_tokens 被设为 {ready['num_computed_tokens']}（N = {N}）"
)
assert ready["num_computed_tokens_before_adjust"] == N
assert ready["num_computed_tokens"] == N - 1

# %% [markdown]
# 这是 pdlab 对 `vllm/v1/core/sched/scheduler.py` 里 `Scheduler._update_waiting_for_remote_kv`
# 的复刻，`-= 1` 在接近末尾的地方：

# %%
show_source(Scheduler._update_waiting_for_remote_kv)

# %% [markdown]
# ## 2. 传过去了什么，没传什么
#
# 手动一步步推进这对引擎，在 D 刚收到 P 的 block、还没做任何计算时停下。此时 D 的 paged cache
# （每层一个张量，形状 `[num_blocks, block_size, 80]`，没用到的 slot 是 NaN）里，每一层、
# 每个 prompt 位置都已经有一行 latent `[kv_c_normed | k_pe]`。我们用 `_forward_prefill` 里
# 同一个 `gather_cache` 算子，按 D 的 block table 把它们读出来。

# %%
BS = 4
pair = PDPair(TINY, CacheConfig(block_size=BS), SchedulerConfig(rule="prompt"), backend=BACKEND)
pair.decode.runner.keep_logits = True
pair.add_request(prompt, SamplingParams(max_tokens=4))
while not pair.tracer.filter("kv_transfer", "D"):
    pair.step()
xfer = pair.tracer.first("kv_transfer", "D")


def cached_rows(kv_cache, block_ids, n):
    """按 block table 读出一个请求在位置 0..n-1 的 cache 行。"""
    table = torch.tensor([block_ids], dtype=torch.int32)
    cu = torch.tensor([0, n], dtype=torch.int32)
    return gather_cache(kv_cache, table, cu, backend=BACKEND)


rows = []
for layer in range(TINY.num_hidden_layers):
    d_rows = cached_rows(pair.decode.runner.kv_caches[layer], xfer["local_block_ids"], N)
    p_rows = cached_rows(pair.prefill.runner.kv_caches[layer], xfer["remote_block_ids"], N)
    rows.append(
        [
            layer,
            tuple(d_rows.shape),
            bool(torch.isfinite(d_rows).all()),
            bool(torch.equal(d_rows, p_rows)),
        ]
    )
    assert torch.isfinite(d_rows).all() and torch.equal(d_rows, p_rows)
display(
    HTML(html_table(["层", "D 上位置 0..N-1 的行", "全部就位（无 NaN）", "与 P 的逐位相同"], rows))
)
print(
    f"传输了 {xfer['nbytes']} 字节 = {len(xfer['local_block_ids'])} 个 block × {BS} 个 slot × "
    f"{TINY.kv_cache_dim} 个值 × 4 字节（fp32）× {TINY.num_hidden_layers} 层"
)

# %% [markdown]
# 可见，关于位置 `N-1`，attention 将来需要的东西 cache 里**全都有**：它在每一层的 latent K/V。
# 缺的是第一个输出 token 真正依赖的那样东西。logits 是 `lm_head(norm(h_last[N-1]))`，
# 其中 `h_last` 是**最后一层**的输出（先 attention，再 MLP，再最终的 norm）。第 `l` 层的
# cache 行是由第 `l` 层 attention 的*输入*算出来的，那时这一层的 attention 和 MLP 都还没跑；
# 而且它是降维到 80 个值（DeepSeek 是 576）的投影，不是 128 维（DeepSeek 是 7168 维）的
# hidden state。任何一层的任何一行都不是 `h_last[N-1]`，也还原不出它。

# %%
model = pair.decode.model
ids = torch.tensor(pair.prefill.tokenizer.encode(prompt))
with torch.no_grad():
    h_last = model(ids, torch.arange(N))  # 不用任何 cache，完整前向得到最终 hidden state
    logits_ref = model.compute_logits(h_last[-1])  # 第一个输出 token 就从这里来
print(
    f"每个 token 每层的 cache 行：{TINY.kv_cache_dim} 个值"
    f"（kv_lora_rank {TINY.kv_lora_rank} + qk_rope_head_dim {TINY.qk_rope_head_dim}）"
)
print(
    f"h_last[N-1]：{tuple(h_last[-1].shape)}，是第 {TINY.num_hidden_layers - 1} 层"
    f"（最后一层）的输出；logits {tuple(logits_ref.shape)}"
)
V3 = ModelConfig.deepseek_v3()
print(
    f"{V3.name}：每个 token 每层 cache {V3.kv_cache_dim} 个值（共 {V3.num_hidden_layers} 层）；"
    f"h_last {V3.hidden_size} 个值"
)

# %% [markdown]
# vLLM V0 曾经把 hidden state 跟 cache 一起传过；v1 的 KV connector（`NixlConnector` 等）只传
# KV block。所以 `h_last[N-1]` 只能由 D 自己算，而唯一的办法就是让位置 `N-1` 再过一遍所有层。
# 它的 attention 从传过来的 cache 里读位置 `0..N-2` 的 K/V，顺带把自己的 K/V 重新写一遍
# （值和 P 写的一样）。这就是那句 `-= 1`：恰好留下一个 token 要算。本地 prefix cache 命中
# 也遵守同一条规则，最多命中 `num_tokens - 1` 个 token
# （`KVCacheManager.get_computed_blocks`，见第 1 篇）。
#
# 现在让 D 走这一步。先把 P 写下的位置 `N-1` 那一行存起来：

# %%
last = N - 1
slot = (xfer["local_block_ids"][last // BS], last % BS)
before = [kv[slot].clone() for kv in pair.decode.runner.kv_caches]
while pair.has_unfinished_requests():
    pair.step()
after = [kv[slot] for kv in pair.decode.runner.kv_caches]
diff = max(float((a - b).abs().max()) for a, b in zip(after, before))
print(f"位置 N-1 = {last} 被 D 重写，各层新旧值的最大差 = {diff:.1e}")
assert diff < 1e-5

first = pair.tracer.first("route", "D")
d_logits = pair.decode.runner.logits[first["req_id"]][0]
print(
    f"D 的第一组 logits 与不用 cache 算出的 lm_head(norm(h_last[N-1])) 相比，"
    f"最大差 = {float((d_logits - logits_ref).abs().max()):.1e}"
)
assert torch.allclose(d_logits, logits_ref, atol=1e-4)
assert (
    int(d_logits.argmax()) == int(logits_ref.argmax()) == pair.tracer.first("sample", "D")["token"]
)

# %% [markdown]
# ## 3. 这一个 token 的一步，和决定它走哪条路的规则
#
# 于是 D 第一次真正计算的那一步，在 trace 里是这样的：

# %%
print(route_text(first, lang="zh"))
print(
    f"query_len = {first['query_len']}，num_computed_tokens = {first['num_computed_tokens']}"
    f"（N-1），num_prompt_tokens = {first['num_prompt_tokens']}（N）"
)
assert (first["query_len"], first["num_computed_tokens"], first["num_prompt_tokens"]) == (
    1,
    N - 1,
    N,
)

# %% [markdown]
# 只有一个新 token，像 decode；可 prompt 还没算完，又像 prefill。它走哪条路，完全取决于规则。
# pdlab 把两种规则写在同一个函数里：

# %%
show_source(is_decode)

# %%
for rule in ("prompt", "query_len"):
    d = is_decode(
        first["query_len"], first["num_computed_tokens"], first["num_prompt_tokens"], rule=rule
    )
    print(f"rule={rule!r:12} -> {'_forward_decode' if d else '_forward_prefill'}")
assert not is_decode(1, N - 1, N, rule="prompt") and is_decode(1, N - 1, N, rule="query_len")

# %% [markdown]
# 在 `rule="prompt"`（即 `num_computed_tokens < num_prompt_tokens`）下，第 3 个问题的答案是
# “是的”：D 会为这一个 token 跑 `_forward_prefill`。下面是 pdlab 的 `MLAAttention`
# （对应 vLLM 的 `MLACommonImpl`）里这条路径的写法：

# %%
show_source(MLAAttention._forward_prefill)

# %% [markdown]
# 对“一个 query token、`N-1` 个已缓存 token”来说，这意味着：先把新 token 经 `kv_b_proj`
# 升维，对自己做 attention；再进 `_compute_prefill_context`：从 paged cache 里 gather 全部
# `N-1` 行 latent，把每一行都经 `kv_b_proj` 升维成逐头的 K 和 V，做不带 mask 的 attention，
# 最后按 log-sum-exp 把两部分结果合并。下面把两种规则各跑一遍，逐个算子对比 D 的第一步
# （第 0 层；其他层调用的算子相同）：

# %%
runs = {}
for rule in ("prompt", "query_len"):
    p = PDPair(TINY, CacheConfig(block_size=BS), SchedulerConfig(rule=rule), backend=BACKEND)
    o = p.generate(prompt, SamplingParams(max_tokens=4))[0]
    runs[rule] = (p.tracer, o.output_token_ids)
    step = p.tracer.first("route", "D")["step"]
    krows = [
        [
            e["name"],
            e["shapes"].get("part", ""),
            ", ".join(f"{k}={v}" for k, v in e["shapes"].items() if k not in ("part", "kv_cache")),
            fmt_flops(e["flops"]),
            fmt_bytes(e["bytes"]),
        ]
        for e in p.tracer.filter("kernel", "D", step=step, layer=0)
    ]
    display(
        HTML(
            f"<b>rule={rule!r}：{p.tracer.first('route', 'D')['forward']}</b>"
            + html_table(["算子", "部分", "形状", "FLOPs（模型）", "字节（模型）"], krows)
        )
    )

# %% [markdown]
# ## 4. 上游 vLLM 的做法
#
# 上游 vLLM 的 MLA 后端根本不看 prompt。它的 metadata builder 按 query 长度切分 batch
# （`vllm/v1/attention/backends/utils.py` 里的 `split_decodes_and_prefills`），默认
# `decode_threshold = reorder_batch_threshold = 1`，前提是 model runner 已经把 batch 重排成
# decode 在前。D 这样的短 extend `query_len = 1`，于是算作 decode，走 weight-absorbed 的 MQA
# 路径 `_forward_decode`。pdlab 的实现：

# %%
show_source(split_decodes_and_prefills)

# %% [markdown]
# 同一个函数在两种规则下，对一个混合 batch 的判断：D 的短 extend、一个普通 decode、一个正在
# 分块 prefill 的 prompt：

# %%
batch = {  # 名称: (query_len, 本步之前的 num_computed_tokens, num_prompt_tokens)
    "D 的第一步": (1, N - 1, N),
    "普通 decode": (1, 20, 12),
    "prefill 分块": (8, 0, 30),
}
table = []
for name, (q, c, p) in batch.items():
    table.append(
        [name, q, c, p]
        + [
            "_forward_decode" if is_decode(q, c, p, rule=r) else "_forward_prefill"
            for r in ("query_len", "prompt")
        ]
    )
display(
    HTML(
        html_table(
            [
                "请求",
                "query_len",
                "num_computed_tokens",
                "num_prompt_tokens",
                "rule='query_len'（上游）",
                "rule='prompt'",
            ],
            table,
        )
    )
)

# %% [markdown]
# 那 `num_computed_tokens < num_prompt_tokens` 这条规则是哪来的？上游只在 Mamba 层上用它；
# 在 MLA 上用它的是 vllm-ascend 的 context-parallel MLA metadata builder 和一些厂商分支。
# 论坛里问的正是这些代码路径，也正因为这个问题，vllm-ascend 后来在 D 节点上强制把这类请求
# 归为 decode。
#
# ## 5. 两条路径，同一个 token
#
# MLA 的两种形式在代数上相等（第 3 篇），所以规则只改变代价，不改变结果。把两次 P/D 运行
# 和单机引擎、以及模型自带的慢速 oracle（每个 token 都从头完整前向一次）放在一起比：

# %%
colocated = LLMEngine(TINY, CacheConfig(block_size=BS), SchedulerConfig(), backend=BACKEND)
col_tokens = colocated.generate(prompt, SamplingParams(max_tokens=4))[0].output_token_ids
oracle = model.greedy_generate(ids.tolist(), 4)
print(f"P/D，rule='prompt'   ：{runs['prompt'][1]}")
print(f"P/D，rule='query_len'：{runs['query_len'][1]}")
print(f"单机引擎             ：{col_tokens}")
print(f"oracle（不用 cache） ：{oracle}")
assert runs["prompt"][1] == runs["query_len"][1] == col_tokens == oracle

# %% [markdown]
# ## 6. 各自的代价
#
# trace 里的每个算子都带着模型估算的 FLOPs 和字节数（矩阵乘按 `2MNK` FLOPs 计；每个操作数读
# 一次、每个结果写一次；GPU 上按 bf16 计）。把 D 第一步的所有算子加起来，tiny 模型下：

# %%
summary = []
for rule, (tracer, _) in runs.items():
    step = tracer.first("route", "D")["step"]
    ks = tracer.filter("kernel", "D", step=step)
    summary.append(
        [
            rule,
            tracer.first("route", "D")["forward"],
            len(ks),
            fmt_flops(sum(e["flops"] for e in ks)),
            fmt_bytes(sum(e["bytes"] for e in ks)),
        ]
    )
display(HTML(html_table(["规则", "路径", "算子调用次数", "FLOPs", "字节"], summary)))

# %% [markdown]
# tiny 模型看不出量级。换成 DeepSeek-V3 的维度（128 个头，`kv_lora_rank` 512，nope/rope/v
# 为 128/64/128，61 层），用同一个成本模型，看 D 这一个 token 在几种上下文长度下的代价。
# prefill 路径要把每个上下文 token 经 `kv_b_proj` 升维：`2 × 1 × (128 × 256) × 512` FLOPs，
# 也就是每个上下文 token、每层约 33.5 MFLOP。absorbed 的 decode 路径则只把每个上下文 token
# 的 576 个 latent 值读一次，所有头共用。最后两列换算成 61 层在 H800 上的时间下界
# `max(FLOPs / 峰值, 字节 / 带宽)`（H800 与 H100 SXM 一样是 989 TFLOP/s 稠密 bf16、
# 3.35 TB/s HBM3，数据来自 NVIDIA 的产品手册）。

# %%
per_ctx_token = gemm(
    1, V3.num_attention_heads * (V3.qk_nope_head_dim + V3.v_head_dim), V3.kv_lora_rank
)[0]
print(f"kv_b_proj 升维：每个上下文 token、每层 {per_ctx_token / 1e6:.2f} MFLOP")
assert abs(per_ctx_token / 1e6 - 33.5) < 0.1

PEAK_FLOPS, PEAK_BW = 989e12, 3.35e12  # H800 / H100 SXM：稠密 bf16 与 HBM3（产品手册）


def roofline_us(c, layers):
    return layers * max(c.flops / PEAK_FLOPS, c.bytes / PEAK_BW) * 1e6


cost_rows = []
for ctx in (1024, 4096, 16384, 65536):
    pre, dec = prefill_path_cost(V3, ctx), decode_path_cost(V3, ctx)
    cost_rows.append(
        [
            ctx,
            fmt_flops(pre.flops),
            fmt_flops(dec.flops),
            f"{pre.flops / dec.flops:.0f}x",
            fmt_bytes(pre.bytes),
            fmt_bytes(dec.bytes),
            f"{pre.bytes / dec.bytes:.1f}x",
            f"{roofline_us(pre, V3.num_hidden_layers):.0f} us",
            f"{roofline_us(dec, V3.num_hidden_layers):.0f} us",
        ]
    )
    assert pre.flops > 100 * dec.flops and pre.bytes > 5 * dec.bytes
display(
    HTML(
        html_table(
            [
                "上下文 N-1",
                "FLOPs _forward_prefill",
                "FLOPs _forward_decode",
                "倍数",
                "字节 _forward_prefill",
                "字节 _forward_decode",
                "倍数",
                "H800 下界，prefill 路径",
                "H800 下界，decode 路径",
            ],
            cost_rows,
        )
    )
)

# %%
plot_path_costs(V3, [2**k for k in range(8, 18)])

# %% [markdown]
# 对一个 token 而言，prefill 路径的 FLOPs 是 decode 路径的 100 倍以上；访存字节随上下文增长，
# 从约 6 倍涨到约 90 倍：它要为每个上下文 token 写出再读回逐头的 K 和 V（128 × 320 个值，
# 而不是 576 个）。它算出的 token 没错，但用它来算一个 token 太贵了；而在 D 上，*每一个*
# 请求都从这一步开始。所以在 D 上，规则选哪条很要紧。
#
# ## 7. 动手试试
#
# 下面的交互面板在你改动 prompt 长度、块大小或路由规则时，重新跑一个小的 P/D 对和一个单机引擎
# （tiny 模型，torch 后端）；预设模型只影响成本模型那一栏。可以试试：
#
# - 在 `prompt` 和 `query_len` 之间切换规则，看路径和算子怎么变；
# - 改 prompt 长度：`num_computed_tokens` 始终跟着 `N - 1` 走；
# - 改块大小：D 仍然从 `N - 1` 开始，因为 P 会把 prompt 占到的所有 block（包括最后那个没填满的）
#   都发过去；
# - 切换预设模型，看真实维度下上下文 `N - 1` 的代价；生成的 token 始终一致。

# %%
explorer = PDExplorer(prompt_len=N, block_size=BS, rule="prompt", preset="deepseek-v3", lang="zh")
explorer

# %% [markdown]
# ## 自测
#
# 先预测，再运行：37 个 token 的 prompt，块大小 16，`rule="prompt"`。
# (a) D 第一次计算时的 `num_computed_tokens` 是多少？(b) 走哪个 forward？
# (c) 这一步每层 gather 多少行 latent？(d) 如果同一个 prompt 已经完整地在*本地* prefix cache
# 里，能复用其中多少个 token？

# %%
N2, B2 = 37, 16
check = run_pd(N2, block_size=B2, rule="prompt")
step = check.d_first_step
gathered = [
    e["shapes"]["rows"]
    for e in check.tracer.filter("kernel", "D", step=step["step"], layer=0)
    if e["name"] == "gather_cache"
]
local = LLMEngine(TINY, CacheConfig(block_size=B2), SchedulerConfig(), backend=BACKEND)
local.generate([prompt_of_length(N2)] * 2, SamplingParams(max_tokens=1))
reused = [e["num_cached_tokens"] for e in local.tracer.filter("admit")]
print(
    f"(a) {step['num_computed_tokens']}  (b) {step['forward']}  (c) {sum(gathered)}  "
    f"(d) {reused[1]}"
)
assert step["num_computed_tokens"] == N2 - 1
assert step["forward"] == "_forward_prefill"
assert sum(gathered) == N2 - 1
assert reused == [0, (N2 - 1) // B2 * B2]
assert check.tokens_equal
