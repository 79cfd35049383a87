# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] en
# # 5. The decode side of P/D: why D computes the last prompt token again
#
# A user asked about prefill/decode (P/D) disaggregation (vllm-project/vllm#28566):
#
# 1. On the decode instance (D), why does the scheduler set `num_computed_tokens` to
#    `prompt_len - 1` (the `num_computed_tokens -= 1` when it equals `request.num_tokens`)?
# 2. A request counts as still prefilling while `num_computed_tokens < num_prompt_tokens`.
#    Isn't that then true on D?
# 3. So does D run `_forward_prefill` for that one token?
# 4. "The last token must be recomputed to get logits, the cache cannot be used": why?
#
# **What you will learn.** This notebook answers all four by running pdlab's P/D pair and
# reading its trace, next to the source of vLLM 0.33.0:
#
# - what P sends D (each layer's K/V for positions `0..N-1`) and what it does not (the
#   final hidden state of position `N-1`, the only thing the first logits depend on);
# - why that makes D's first step a *short extend*: `query_len = 1`,
#   `num_computed_tokens = N-1`, `num_prompt_tokens = N`;
# - that the expression in question 2 is real: vLLM 0.33.0's default model runner (Model
#   Runner V2) computes `is_prefilling = num_computed_prefill_tokens < prefill_len` for
#   every request, and names D's row itself: one new prompt token over cached context is
#   `prefill_runs_as_decode`, so the step stays a uniform decode batch
#   (`decode_graph_eligible`); that `split_decodes_and_prefills` reads `is_prefilling` only
#   when `treat_short_extends_as_decodes` is False, which the MLA builder sets under prefill
#   context parallelism (PCP). So by default D's step takes `forward_mqa` (older vLLM's
#   `_forward_decode`); with `prefill_context_parallel_size > 1` it takes `forward_mha`
#   (the `_forward_prefill` of the question), and why; and what V1 does;
# - that both give the same token, and what each costs for DeepSeek-V3.
#
# Everything runs on a CPU in well under a minute: the tiny DeepSeek-style model (2 layers,
# 4 heads, latent rank 64, RoPE 16), with the kernels on pdlab's `torch` backend (the
# Triton interpreter computes the same numbers, more slowly; notebook 4 checks both).

# %% [markdown] zh
# # 5. P/D 分离的解码侧：D 为什么要把最后一个提示词 token 再算一遍
#
# （本篇是第 5 篇的中文版：两篇由同一份源文件生成，代码完全相同。）
#
# 有人问过 prefill/decode（P/D）分离的几个问题（vllm-project/vllm#28566）：
#
# 1. 在解码实例（D）上，调度器为什么把 `num_computed_tokens` 设成
#    `prompt_len - 1`？也就是当它等于 `request.num_tokens` 时那句
#    `num_computed_tokens -= 1`。
# 2. 只要 `num_computed_tokens < num_prompt_tokens`，请求就算作仍在预填充。那在 D 上这个
#    条件不就成立了吗？
# 3. 这样一来，D 是否要为这一个 token 跑一遍 `_forward_prefill`？
# 4. “最后一个 token 必须重算才能得到 logits，用不了缓存”——为什么？
#
# **你会学到什么。** 我们运行 pdlab 的 P/D 对、读它的 trace，并对照 vLLM 0.33.0 的源码，
# 把四个问题逐一回答：
#
# - P 传给 D 的是什么：每一层在位置 `0..N-1` 的 K/V；没有传的是什么：位置 `N-1` 在最后
#   一层之后的隐藏状态，而第一个输出 token 的 logits 恰恰只取决于它；
# - 因此 D 的第一步是一个“短 extend”：`query_len = 1`，`num_computed_tokens = N-1`，
#   `num_prompt_tokens = N`；
# - 问题 2 里的表达式确实存在：vLLM 0.33.0 默认的 model runner（Model Runner V2）为每个请求
#   计算 `is_prefilling = num_computed_prefill_tokens < prefill_len`，还专门给 D 的这一行起了名字：
#   在已缓存上下文之上只有一个新的提示词 token，就是 `prefill_runs_as_decode`，于是这一步仍是
#   均匀解码批次（`decode_graph_eligible`）；`split_decodes_and_prefills` 只在
#   `treat_short_extends_as_decodes` 为 False 时才读 `is_prefilling`，而 MLA builder 只在开启
#   预填充上下文并行（PCP）时才这样设置。所以默认情况下 D 的这一步走 `forward_mqa`（旧版
#   vLLM 的 `_forward_decode`）；`prefill_context_parallel_size > 1` 时走 `forward_mha`（即提问
#   里的 `_forward_prefill`），以及为什么；还有 V1 怎么做；
# - 两条路径算出同一个 token，但代价差很多，我们用 DeepSeek-V3 的维度算给你看。
#
# 全部在 CPU 上跑，不到一分钟：模型是 pdlab 的 `tiny` DeepSeek 结构（2 层、4 个头、
# 潜向量秩 64、RoPE 16），算子用 pdlab 的 `torch` 后端（Triton 解释器算出的数一样，只是更慢；
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

# The tiny model's matrices are too small to split across threads; one thread is faster.
torch.set_num_threads(1)

from IPython.display import HTML, display
from rich.console import Console

from pdlab.catalog import words
from pdlab.demo import prompt_of_length
from pdlab.disagg.pair import PDPair
from pdlab.engine.attention.backend import (
    batch_region,
    split_decodes_and_prefills,
)
from pdlab.engine.attention.mla_attention import MLAAttention
from pdlab.engine.attention.mla_builder import MLAMetadataBuilder, build_mla_metadata
from pdlab.engine.config import (
    AttentionConfig,
    CacheConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from pdlab.engine.core.sched.scheduler import Scheduler
from pdlab.engine.llm_engine import LLMEngine
from pdlab.engine.platforms import select_mla_backend
from pdlab.engine.request import SamplingParams
from pdlab.engine.tokenizer import printable
from pdlab.engine.worker.gpu.batch import gather_batch_req_state, pcp_rank_chunks
from pdlab.kernels import gather_cache
from pdlab.sim.kernel_costs import (
    decode_path_cost,
    gemm,
    kernel_event_cost,
    prefill_path_cost,
    shared_weight_bytes,
    traced_cost,
)
from pdlab.tools.measure import published_peak
from pdlab.ui.choices import choice_reason, routing_reason
from pdlab.ui.fmt import flops, html_table, nbytes, show_source
from pdlab.ui.plots import plot_path_costs
from pdlab.ui.plots_designs import plot_cache_grid, plot_timeline
from pdlab.ui.tour_route import RENAMES, pcp_layout
from pdlab.ui.tour_then import then_and_now, then_and_now_section
from pdlab.ui.widgets import PDExplorer, route_text, trace_panels

LANG = "en"  # the language of the widgets' labels
BACKEND = "torch"  # pdlab.kernels backend for every engine below
TINY = ModelConfig.tiny()
PCP2 = ParallelConfig(prefill_context_parallel_size=2)
t = words(LANG)  # the words of every printed line and table, in LANG
print(
    t(
        "nb5_setup",
        b=repr(BACKEND),
        m=TINY.name,
        layers=TINY.num_hidden_layers,
        heads=TINY.num_attention_heads,
        L=TINY.kv_lora_rank,
        R=TINY.qk_rope_head_dim,
        W=TINY.kv_cache_dim,
        w=repr(TINY.weights),
    )
)

# %% [markdown] en
# ## 1. One request through P and D
#
# `PDPair` drives two engines the way vLLM's P/D proxy drives two servers: the prompt goes
# to P with `max_tokens=1` and `do_remote_decode`; P prefills, samples one token (which the
# proxy throws away), keeps its blocks and returns `kv_transfer_params`; then the original
# request goes to D with those params. Both engines write into one trace, with `instance`
# `"P"` or `"D"`. Read the two columns top to bottom. The pair follows the MLA backend
# vLLM 0.33.0's platform picks for this machine (upstream's default depends on the GPU:
# `FLASH_ATTN_MLA` on an H100/H200, `CPU_MLA` on a CPU; `PDLAB_GPU=h200` follows an H200
# here), without prefill context parallelism; the line under the panels says which.

# %% [markdown] zh
# ## 1. 一个请求走一遍 P 和 D
#
# `PDPair` 驱动两个引擎的方式，和 vLLM 的 P/D 代理驱动两台服务器一样：提示词先发给 P，
# 带 `max_tokens=1` 和 `do_remote_decode`；P 做完预填充，采样一个 token（代理会丢掉它），
# 保留自己的块，返回 `kv_transfer_params`；然后原始请求带着这些参数发给 D。两个引擎写同一个
# trace，`instance` 分别是 `"P"` 和 `"D"`。左右两栏从上往下看。这对引擎按 vLLM 0.33.0 的平台
# 在本机会选的 MLA 后端运行（上游的默认值取决于 GPU：H100/H200 上是 `FLASH_ATTN_MLA`，CPU 上
# 是 `CPU_MLA`；设 `PDLAB_GPU=h200` 就按 H200 走），不开预填充上下文并行；面板下面一行写明了
# 用的是哪个。

# %%
N = 11  # prompt length in tokens (the byte tokenizer: one ASCII character, one token)
prompt = prompt_of_length(N)
pair = PDPair(TINY, CacheConfig(block_size=4), SchedulerConfig(), backend=BACKEND)
out = pair.generate(prompt, SamplingParams(max_tokens=4))[0]
print(t("nb5_generated", p=repr(prompt), n=N, ids=out.output_token_ids), end=" ")
print(printable(out.output_token_ids))
trace_panels(pair.tracer, lang=LANG)
print(routing_reason(pair.tracer.meta["routing"]["D"], LANG))

# %% [markdown] en
# P computed all `N` tokens in one step. D allocated blocks, waited for P's K/V
# (`waiting_for_remote_kvs`, then `kv_transfer`), and when they had landed
# (`remote_kv_ready`) it set `num_computed_tokens` to `N - 1`, not `N`:

# %% [markdown] zh
# P 一步就把 `N` 个 token 全算完了。D 先分配块，等 P 的 K/V 到达（`waiting_for_remote_kvs`，
# 然后是 `kv_transfer`）；数据到齐后（`remote_kv_ready`），它把 `num_computed_tokens` 设成了
# `N - 1`，而不是 `N`：

# %%
ready = pair.tracer.first("remote_kv_ready", "D")
print(
    f"num_computed_tokens_before_adjust = {ready['num_computed_tokens_before_adjust']}, "
    f"num_computed_tokens = {ready['num_computed_tokens']}, N = {N}"
)
assert ready["num_computed_tokens_before_adjust"] == N
assert ready["num_computed_tokens"] == N - 1

# %% [markdown] en
# This is pdlab's copy of `Scheduler._update_waiting_for_remote_kv` in
# `vllm/v1/core/sched/scheduler.py` (pdlab's is in `pdlab/engine/core/sched/scheduler.py` too, in
# the section of the scheduler's KV-transfer methods); the `- 1` is at the end (vLLM 0.33.0
# writes it as `num_computed_tokens = num_tokens - 1`). It applies only when every token
# landed (`num_computed_tokens == num_tokens`). A failed load fails the request under the
# default `kv_load_failure_policy="fail"`; under `"recompute"`
# (`_update_requests_with_invalid_blocks`) D recomputes from the last valid block, as pdlab
# does too. A model with DeepSeek V4.1's sliding-window layers replays a window tail of the
# hit when the load left the window out (`_mark_prefix_replay`); NIXL loads every group
# and, for such bounded-replay models, stops P one token short instead (`_prefill_backoff`;
# pdlab's model has no such layers):

# %% [markdown] zh
# 这是 pdlab 对 `vllm/v1/core/sched/scheduler.py` 里 `Scheduler._update_waiting_for_remote_kv`
# 的复刻（pdlab 的也在 `pdlab/engine/core/sched/scheduler.py` 里，
# 在调度器与 KV 传输相关的方法那一节），
# `- 1` 在末尾（vLLM 0.33.0 写作 `num_computed_tokens = num_tokens - 1`）。它只在所有 token
# 都到齐时才生效（`num_computed_tokens == num_tokens`）。加载失败时，默认的
# `kv_load_failure_policy="fail"` 让请求失败；设为 `"recompute"` 时
# （`_update_requests_with_invalid_blocks`）D 从最后一个有效的块开始重算，pdlab 也如此。带
# DeepSeek V4.1 滑动窗口层的模型，若加载没有带上窗口，会重放命中部分的窗口末尾
# （`_mark_prefix_replay`）；NIXL 会加载所有 KV 缓存组，对这类有界重放的模型改为让 P 少算一个
# token（`_prefill_backoff`；pdlab 的模型没有这种层）：

# %%
show_source(Scheduler._update_waiting_for_remote_kv)

# %% [markdown] en
# ## 2. What crossed the wire, and what did not
#
# Step the pair by hand and stop right after D received P's blocks, before D has computed
# anything. D's paged cache (one tensor per layer, `[num_blocks, block_size, 80]`, unused
# slots hold NaN) now holds a latent row `[kv_c_normed | k_pe]` for every prompt position
# in every layer. Read them through D's block table with the same `gather_cache` kernel
# `forward_mha` uses.

# %% [markdown] zh
# ## 2. 传过去了什么，没传什么
#
# 手动一步步推进这对引擎，在 D 刚收到 P 的块、还没做任何计算时停下。此时 D 的分页 KV 缓存
# （每层一个张量，形状 `[num_blocks, block_size, 80]`，没用到的槽是 NaN）里，每一层、
# 每个提示词位置都已经有一行潜向量 `[kv_c_normed | k_pe]`。我们用 `forward_mha` 里
# 同一个 `gather_cache` 算子，按 D 的块表把它们读出来。

# %%
BS = 4
pair = PDPair(TINY, CacheConfig(block_size=BS), SchedulerConfig(), backend=BACKEND)
pair.decode.runner.keep_logits = True
pair.add_request(prompt, SamplingParams(max_tokens=4))
while not pair.tracer.filter("kv_transfer", "D"):
    pair.step()
xfer = pair.tracer.first("kv_transfer", "D")


def cached_rows(kv_cache, block_ids, n):
    """Rows of positions 0..n-1 of one request, read through its block table."""
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
headers = [t("nb5_col_layer"), t("nb5_col_d_rows"), t("nb5_col_finite"), t("nb5_col_eq_p")]
display(HTML(html_table(headers, rows)))
print(
    t(
        "nb5_bytes",
        nb=xfer["nbytes"],
        blocks=len(xfer["local_block_ids"]),
        bs=BS,
        W=TINY.kv_cache_dim,
        layers=TINY.num_hidden_layers,
    )
)

# %% [markdown] en
# So the cache has *everything* about position `N-1` that attention will ever need: its
# latent K/V in every layer. What it does not have is the thing the first output token is
# computed from. The logits are `lm_head(norm(h_last[N-1]))`, where `h_last` is the output
# of the **last** layer (its attention, then its MLP; the final `norm` is applied on the way
# to the logits). A cache row of layer
# `l` is computed from the *input* of layer `l`'s attention, before that layer's attention
# and MLP run, and it is a projection down to 80 values (576 for DeepSeek), not the
# 128-wide (7168) hidden state. No row of any layer is, or can be turned back into,
# `h_last[N-1]`.

# %% [markdown] zh
# 可见，关于位置 `N-1`，注意力将来需要的东西缓存里**全都有**：它在每一层的潜向量 K/V。
# 缺的是第一个输出 token 真正依赖的那样东西。logits 是 `lm_head(norm(h_last[N-1]))`，
# 其中 `h_last` 是**最后一层**的输出（先注意力，再 MLP；最终的 `norm` 在求 logits
# 时才做）。第 `l` 层的
# 缓存行是由第 `l` 层注意力的*输入*算出来的，那时这一层的注意力和 MLP 都还没跑；
# 而且它是降维到 80 个值（DeepSeek 是 576）的投影，不是 128 维（DeepSeek 是 7168 维）的
# 隐藏状态。任何一层的任何一行都不是 `h_last[N-1]`，也还原不出它。

# %%
model = pair.decode.model
ids = torch.tensor(pair.prefill.tokenizer.encode(prompt))
with torch.no_grad():
    h_last = model(ids, torch.arange(N))  # final hidden states, no cache at all
    logits_ref = model.compute_logits(h_last[-1])  # what the first output token comes from
print(t("nb5_cache_row", W=TINY.kv_cache_dim, L=TINY.kv_lora_rank, R=TINY.qk_rope_head_dim))
shape, ls = tuple(h_last[-1].shape), tuple(logits_ref.shape)
print(t("nb5_h_last", shape=shape, l=TINY.num_hidden_layers - 1, ls=ls))
V3 = ModelConfig.deepseek_v3()
print(
    t(
        "nb5_v3_row",
        name=V3.name,
        W=V3.kv_cache_dim,
        layers=V3.num_hidden_layers,
        H=V3.hidden_size,
    )
)

# %% [markdown] en
# vLLM V0 once shipped hidden states along with the cache; 0.33.0's P/D connectors
# (`NixlConnector` and the others) move KV blocks. Two others carry more, and neither feeds
# D's first token: `ExampleHiddenStatesConnector` writes hidden states to disk for the
# `extract_hidden_states` speculative method, and the aux-output connector
# (`vllm/distributed/aux_output_connector/`) moves outputs such as the routed experts. So D
# must produce `h_last[N-1]` itself, and the only way is to run position `N-1` through
# every layer. Its attention
# reads the K/V of positions `0..N-2` from the transferred cache, and its own K/V are
# written again on the way (equal to what P wrote, up to rounding). That is the `- 1`: it leaves
# exactly one token to compute. The same rule caps a *local* prefix-cache hit at
# `num_tokens - 1` (`KVCacheManager.get_computed_blocks`, notebook 1).
#
# Let D take that step now. First, keep the rows of position `N-1` as P wrote them:

# %% [markdown] zh
# vLLM V0 曾经把隐藏状态跟缓存一起传过；0.33.0 做 P/D 的 connector（`NixlConnector` 等）
# 传的是 KV 块。另有两个 connector 传得更多，但都不给 D 的第一个 token 用：
# `ExampleHiddenStatesConnector` 为投机解码的 `extract_hidden_states` 方法把隐藏状态写到磁盘，
# 辅助输出 connector（`vllm/distributed/aux_output_connector/`）传路由到的专家之类的输出。所以
# `h_last[N-1]`
# 只能由 D 自己算，而唯一的办法就是让位置 `N-1` 再过一遍所有层。
# 它的注意力从传过来的缓存里读位置 `0..N-2` 的 K/V，顺带把自己的 K/V 重新写一遍
# （与 P 写的值相同，至多差舍入误差）。这就是那个 `- 1`：恰好留下一个 token 要算。
# 本地前缀缓存命中也遵守同一条规则，最多命中 `num_tokens - 1` 个 token
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
print(t("nb5_rewritten", p=last, d=f"{diff:.1e}"))
assert diff < 1e-5

first = pair.tracer.first("route", "D")
d_logits = pair.decode.runner.logits[first["req_id"]][0]
print(t("nb5_logits_diff", d=f"{float((d_logits - logits_ref).abs().max()):.1e}"))
assert torch.allclose(d_logits, logits_ref, atol=1e-4)
assert (
    int(d_logits.argmax()) == int(logits_ref.argmax()) == pair.tracer.first("sample", "D")["token"]
)

# %% [markdown] en
# ## 3. The one-token step, and what routes it
#
# D's first computing step therefore looks like this in the trace. vLLM 0.33.0 runs Model
# Runner V2 by default (`vllm/v1/worker/gpu/model_runner.py`; `VLLM_USE_V2_MODEL_RUNNER=0`
# selects V1), and so does pdlab. Alongside the three counts, the runner recorded V2's
# view of the row: `prefill_len` (every token it was given with the request: the prompt,
# plus the outputs so far after a preemption), `is_prefilling = num_computed_prefill_tokens
# < prefill_len`, `prefill_runs_as_decode` and the step's `decode_graph_eligible`:

# %% [markdown] zh
# ## 3. 这一个 token 的一步，以及决定它走哪条路的是什么
#
# 于是 D 第一次真正计算的那一步，在 trace 里是这样的。vLLM 0.33.0 默认运行 Model Runner V2
# （`vllm/v1/worker/gpu/model_runner.py`；`VLLM_USE_V2_MODEL_RUNNER=0` 才选 V1），pdlab 也一样。
# 除了三个计数，model runner 还记下了 V2 对这一行的看法：`prefill_len`（随请求交给它的全部 token：
# 提示词，被抢占后再加上已有的输出）、`is_prefilling = num_computed_prefill_tokens <
# prefill_len`、`prefill_runs_as_decode`，以及这一步的 `decode_graph_eligible`：

# %%
print(route_text(first, LANG))
print(
    f"query_len = {first['query_len']}, num_computed_tokens = {first['num_computed_tokens']}"
    f" (N-1), num_prompt_tokens = {first['num_prompt_tokens']} (N), "
    f"is_prefilling = {first['is_prefilling']}, region = {first['region']}"
)
print(
    f"model_runner = {first['model_runner']}, prefill_len = {first['prefill_len']}, "
    f"prefill_runs_as_decode = {first['prefill_runs_as_decode']}, "
    f"decode_graph_eligible = {first['decode_graph_eligible']}"
)
assert (first["query_len"], first["num_computed_tokens"], first["num_prompt_tokens"]) == (
    1,
    N - 1,
    N,
)
assert first["is_prefilling"] and first["region"] == "short_extend"
assert first["model_runner"] == "v2" and first["prefill_runs_as_decode"]
assert first["decode_graph_eligible"] and first["forward"] == "forward_mqa"

# %% [markdown] en
# V2 names this row in its own code. Its comment says that one new prompt token over
# existing context runs as a decode, and the step then stays `decode_graph_eligible`: a
# uniform decode batch, the one a full decode CUDA graph replays
# (`get_uniform_decode_token_count`). pdlab's copy of the rule (upstream:
# `GPUModelRunner.gather_batch_req_state`; pdlab records the flag but captures no graphs):

# %% [markdown] zh
# V2 在自己的代码里点名了这一行。它的注释说：在已有上下文之上只有一个新的提示词 token，
# 就按 decode 行运行；于是这一步仍是 `decode_graph_eligible`：一个均匀解码批次，也就是完整的
# decode CUDA graph 能重放的那种（`get_uniform_decode_token_count`）。pdlab 里对应的规则
# （上游：`GPUModelRunner.gather_batch_req_state`；pdlab 记录这个标志，但不捕获 CUDA graph）：

# %%
show_source(gather_batch_req_state, 'if model_runner == "v2" and has_prefill', "eligible = all(")

# %% [markdown] en
# One new token, like a decode; the prompt not finished, like a prefill: upstream calls it
# a *short extend*. V2 orders the batch with the one-token rows first, then by query
# length (`sort_batch_req_ids`; V1 sorts into four regions, decode → short_extend →
# long_extend → prefill), and the MLA builder then calls
# `split_decodes_and_prefills` to find where the decodes end. pdlab's version of that
# function, with upstream's arguments:

# %% [markdown] zh
# 只有一个新 token，像 decode 行；提示词还没算完，又像 prefill 行：上游把它叫作*短 extend*。
# V2 把只有一个 token 的行排在最前，其余按 query 长度排序（`sort_batch_req_ids`；V1 则排成
# 四个区：`decode` → `short_extend` → `long_extend` → `prefill`），MLA builder 再调用
# `split_decodes_and_prefills` 找出 decode 行到哪里为止。pdlab 对这个函数的实现，参数和上游一样：

# %%
show_source(split_decodes_and_prefills)

# %% [markdown] en
# `is_prefilling` is read only when `treat_short_extends_as_decodes` is False. Who decides
# that? The MLA builder (`vllm/model_executor/layers/attention/mla_attention.py`) passes
# `treat_short_extends_as_decodes = not use_pcp`, where `use_pcp` means
# `prefill_context_parallel_size > 1`, and `decode_threshold` = its backend's
# `reorder_batch_threshold`. pdlab's builder makes the same two choices:

# %% [markdown] zh
# 只有 `treat_short_extends_as_decodes` 为 False 时才会读 `is_prefilling`。这由谁决定？
# MLA builder（`vllm/model_executor/layers/attention/mla_attention.py`）传入
# `treat_short_extends_as_decodes = not use_pcp`，其中 `use_pcp` 即
# `prefill_context_parallel_size > 1`；`decode_threshold` 取后端的 `reorder_batch_threshold`。
# pdlab 的 builder 做同样的两个选择：

# %%
show_source(MLAMetadataBuilder.__init__, "profile = attn.profile", "self.use_pcp")
show_source(MLAMetadataBuilder.build, "split_decodes_and_prefills(", ")")

# %% [markdown] en
# So the answer to question 3 depends on one setting. Build the metadata of D's step both
# ways (pdlab does not implement context parallelism; it reproduces only this routing
# consequence of `prefill_context_parallel_size`):

# %% [markdown] zh
# 所以第 3 个问题的答案取决于一个设置。把 D 这一步的元数据按两种设置各建一次（pdlab 并不
# 实现上下文并行，只复现 `prefill_context_parallel_size` 对路由的这一影响）：

# %%
for parallel in (ParallelConfig(), PCP2):
    meta = build_mla_metadata(
        [1],
        [N - 1],
        [N],
        torch.zeros(1, 4, dtype=torch.int32),
        torch.zeros(1).long(),
        BS,
        parallel_config=parallel,
    )
    print(
        f"prefill_context_parallel_size = {parallel.prefill_context_parallel_size}: "
        f"treat_short_extends_as_decodes = {meta.treat_short_extends_as_decodes} -> "
        f"num_decodes = {meta.num_decodes}, num_prefills = {meta.num_prefills} -> "
        f"{'forward_mqa' if meta.num_decodes else 'forward_mha'}"
    )

# %% [markdown] en
# Why does PCP flip it? Upstream's PCP manager (`vllm/v1/worker/gpu/pcp_manager.py`) cuts
# every row that is still prefilling into `2 x PCP` chunks spread over the ranks, and keeps
# every other row whole (`replicated = ~is_prefilling`; with PCP alone each whole row goes
# to one rank in turn). D's one-token row is not cut: its chunk size is 1, so all of it
# lies on rank 0 (`_iter_rank_chunks`). What routes it to `forward_mha` is the builder's
# `not use_pcp` with the rank-local `is_prefilling`. Upstream gives the reason in code, not
# in words: V2's comment beside `prefill_runs_as_decode` says "PCP partitions prefill rows",
# the PCP manager orders each rank's rows decodes first by `is_prefilling`
# (`_reorder_segments`), and under PCP with DCP the K/V write gathers only the tokens past
# `num_decode_tokens` (`vllm/v1/attention/ops/pcp.py`): the attention's split has to agree
# with PCP's partition. Under PCP V2 also computes no `prefill_runs_as_decode`, and the step
# loses the decode graph (`decode_graph_eligible = not has_prefill`). Decode context
# parallelism (DCP) is a different setting: opt-in (default 1, reusing TP ranks), on either
# role. It leaves `use_pcp` False, so the short extend stays a decode, and drops the
# threshold to 1 for a builder without `supports_dcp_with_varlen`; on a NIXL instance it
# makes the K/V interleave the block size, so FLASH_ATTN_MLA drops to 1 as well and vLLM
# refuses MTP there (`pdlab sim --routing dcp` shows the routing).
# D's first step beside two running decodes, laid out for PCP 2 (pdlab computes every row
# on one device; this only shows the layout):

# %% [markdown] zh
# 为什么 PCP 会翻转它？上游的 `PCPManager`（`vllm/v1/worker/gpu/pcp_manager.py`）把每个仍在
# 预填充的行切成 `2 x PCP` 块分给各个 rank，其他行保持完整（`replicated = ~is_prefilling`；
# 只开 PCP 时，每个完整的行轮流交给一个 rank）。D 这一行只有一个 token，并没有被切开：它的分块
# 大小为 1，整行都落在 rank 0 上（`_iter_rank_chunks`）。把它送进 `forward_mha` 的，是
# builder 的 `not use_pcp` 加上 rank 本地的 `is_prefilling`。上游没有用文字说明理由，理由写在
# 代码里：V2 在 `prefill_runs_as_decode` 旁的注释写着“PCP partitions prefill rows”；PCPManager 按
# `is_prefilling` 把每个 rank 上的行排成 decode 行在前（`_reorder_segments`）；PCP 与 DCP 同开时，
# K/V 写入只收集 `num_decode_tokens` 之后的 token（`vllm/v1/attention/ops/pcp.py`）。注意力的
# 划分必须与 PCP 的切分一致。开启 PCP 时 V2 也不计算 `prefill_runs_as_decode`，这一步就失去了
# decode CUDA graph（`decode_graph_eligible = not has_prefill`）。解码上下文并行（DCP）是另一项
# 设置：需显式开启（默认 1，复用 TP 的 rank），P、D 都能用。它让 `use_pcp` 保持为 False，所以短
# extend 仍是 decode 行；对不支持 `supports_dcp_with_varlen` 的 builder，它把阈值降到 1；在 NIXL
# 实例上它把 K/V 的交错粒度设为块大小，FLASH_ATTN_MLA 的阈值也降到 1，vLLM 也不再允许开 MTP
# （`pdlab sim --routing dcp` 可以看到路由）。下面是 D 的第一步和两个正在解码的请求一起、按
# PCP 2 排布的样子（pdlab 在一个设备上计算每一行，这里只展示排布）：

# %%
show_source(pcp_rank_chunks)
d_batch = [("dec-a", 1, False), ("dec-b", 1, False), (first["req_id"], 1, True)]
layout = pcp_layout(d_batch, 2)  # pdlab/ui/tour_route.py, over pcp_rank_chunks
rows = [[f"rank {r}", cells] for r, cells in enumerate(layout)]
display(HTML(html_table([t("nb5_col_rank"), t("nb5_col_rank_rows")], rows)))
assert layout == [f"dec-a[0:1], {first['req_id']}[0:1]*", "dec-b[0:1]"]

# %% [markdown] en
# With prefill context parallelism the answer to question 3 is yes: D runs
# `forward_mha` (the question's `_forward_prefill`) for that one token. Here is the path,
# as pdlab's `MLAAttention` (after vLLM's `MLACommonImpl`) writes it:

# %% [markdown] zh
# 开启预填充上下文并行时，第 3 个问题的答案是“是的”：D 会为这一个 token 跑
# `forward_mha`（即提问里的 `_forward_prefill`）。下面是 pdlab 的 `MLAAttention`（对应 vLLM 的
# `MLACommonImpl`）里这条路径的写法：

# %%
show_source(MLAAttention.forward_mha)

# %% [markdown] en
# For one query token over `N-1` cached tokens that means: up-project the new token
# (`kv_b_proj`), attend to itself, then `_compute_prefill_context`: gather all `N-1`
# latent rows from the paged cache, up-project every one of them through `kv_b_proj` into
# per-head keys and values, attend without a mask, and merge the two partial results by
# their log-sum-exp. Run the pair under V2, V2 with PCP 2, and V1, and compare D's first
# step, kernel by kernel (layer 0; the other layers call the same):

# %% [markdown] zh
# 对“一个 query token、`N-1` 个已缓存 token”来说，这意味着：先把新 token 经 `kv_b_proj`
# 上投影，对自己做注意力；再进 `_compute_prefill_context`：用 `gather_cache` 从分页 KV 缓存里取出
# 全部
# `N-1` 行潜向量，把每一行都经 `kv_b_proj` 上投影成逐头的 K 和 V，做不带掩码的注意力，
# 最后按 log-sum-exp 把两部分结果合并。下面把 P/D 分别在 V2、V2 + PCP 2 和 V1 下各跑一遍，
# 逐个算子对比 D 的第一步（第 0 层；其他层调用的算子相同）：

# %%
SETUPS = {  # label: (model_runner, parallel_config)
    t("nb5_setup_v2"): ("v2", ParallelConfig()),
    t("nb5_setup_pcp2"): ("v2", PCP2),
    t("nb5_setup_v1"): ("v1", ParallelConfig()),
}
V2_RUN, PCP_RUN, V1_RUN = SETUPS
runs = {}
for label, (runner, parallel) in SETUPS.items():
    p = PDPair(
        TINY,
        CacheConfig(block_size=BS),
        SchedulerConfig(),
        backend=BACKEND,
        parallel_config=parallel,
        model_runner=runner,
    )
    o = p.generate(prompt, SamplingParams(max_tokens=4))[0]
    runs[label] = (p.tracer, o.output_token_ids)
    step = p.tracer.first("route", "D")["step"]
    krows = [
        [
            e["name"],
            e["shapes"].get("part", ""),
            ", ".join(f"{k}={v}" for k, v in e["shapes"].items() if k not in ("part", "kv_cache")),
            flops(kernel_event_cost(e)[0]),
            nbytes(kernel_event_cost(e)[1]),
        ]
        for e in p.tracer.filter("kernel", "D", step=step, layer=0)
    ]
    display(
        HTML(
            f"<b>{label}: {p.tracer.first('route', 'D')['forward']}</b>"
            + html_table(
                [
                    t("nb5_col_kernel"),
                    t("nb5_col_part"),
                    t("nb5_col_shapes"),
                    t("nb5_col_flops_model"),
                    t("nb5_col_bytes_model"),
                ],
                krows,
            )
        )
    )
routes = {label: tr.first("route", "D") for label, (tr, _) in runs.items()}
assert routes[V2_RUN]["forward"] == routes[V1_RUN]["forward"] == "forward_mqa"
assert routes[PCP_RUN]["forward"] == "forward_mha"
assert routes[PCP_RUN]["prefill_runs_as_decode"] is None
assert not routes[PCP_RUN]["decode_graph_eligible"]
assert routes[V1_RUN]["prefill_runs_as_decode"] is None  # V1 has no such flag

# %% [markdown] en
# Two pictures drawn from these three traces (notebook 7 draws them for four designs of
# D's first token): what D's cache holds when its first step starts against what token 1
# needs (every layer's K/V of positions `0..N-1`, and the final hidden state of `N-1`, the
# top row), and each run as a timeline, D's steps shaded by `decode_graph_eligible`: under
# V2 and V1 D's first step keeps the decode graph, under PCP it loses it.

# %% [markdown] zh
# 下面两张图都由这三次运行的 trace 画出（第 7 篇会为 D 的第一个 token 的四种设计各画一遍）：D 的
# 第一步开始时缓存里有什么，对比第 1 个 token 需要什么（每一层位置 `0..N-1` 的 K/V，以及最上面一行
# `N-1` 的最终隐藏状态）；以及每次运行的时间线，D 的各步按 `decode_graph_eligible` 着色：V2 和 V1
# 下 D 的第一步保住了 decode CUDA graph，PCP 下则失去了它。

# %%
rid = routes[V2_RUN]["req_id"]
display(plot_cache_grid({label: tr for label, (tr, _) in runs.items()}, rid, LANG))
display(plot_timeline(runs[PCP_RUN][0], rid, LANG))
assert not routes[PCP_RUN]["decode_graph_eligible"]

# %% [markdown] en
# The names in the question are older vLLM's. Where they live in 0.33.0 (files under
# `vllm/`; the tour prints the same table, from `pdlab/ui/tour_route.py`):

# %% [markdown] zh
# 提问里的名字来自旧版 vLLM。它们在 0.33.0 中的位置（文件都在 `vllm/` 下；导览打印的是同一张表，
# 来自 `pdlab/ui/tour_route.py`）：

# %%
renames = [list(r) for r in RENAMES]
display(HTML(html_table([t("nb5_col_old"), "vLLM 0.33.0", t("nb5_col_file")], renames)))

# %% [markdown] en
# ### Then and now
#
# The question was asked in November 2025, about code in which DeepSeek takes the prefill
# path when `num_computed_tokens < num_prompt_tokens`. This notebook answers for vLLM 0.33.0.
# That month's release, 0.11.1, split MLA batches by query length alone (its
# `split_decodes_and_prefills` had no `is_prefilling`), so D's row was a decode there too.
# The rule as quoted is 0.33.0's `is_prefilling`, read by the split only under PCP, and the
# rule of vllm-ascend's MLA builder under context parallelism (vllm-ascend runs vLLM on
# Ascend NPUs; its #10973, "Fix PD recompute decode classification for MTP", exempts D's
# first step on a decode instance with `recompute_scheduler_enable`). Each release and
# setting below names the source line that decides D's row, and runs that rule through
# pdlab's `split_query_lens` (`pdlab/ui/tour_then.py`; the tour's chapter 4 ends with the
# same):

# %% [markdown] zh
# ### 从提问时到现在
#
# 这个问题提于 2025 年 11 月，针对的代码里，DeepSeek 在 `num_computed_tokens <
# num_prompt_tokens` 时走 prefill 路径。本篇回答的是 vLLM 0.33.0。当月的版本 0.11.1 只按 query
# 长度划分 MLA 批次（它的 `split_decodes_and_prefills` 还没有 `is_prefilling`），所以 D 的这一行
# 在那里也是 decode 行。提问里的规则，是 0.33.0 的 `is_prefilling`，划分只在开启 PCP 时才读它；
# 它也是 vllm-ascend 的 MLA builder 在上下文并行时的规则（vllm-ascend 让 vLLM 跑在昇腾 NPU 上；
# 它的 #10973“Fix PD recompute decode classification for MTP”为开启
# `recompute_scheduler_enable` 的解码实例上 D 的第一步开了例外）。下面
# 每个版本和设置都给出决定 D 这一行的源码行，并用 pdlab 的 `split_query_lens` 把这条规则跑一遍
# （`pdlab/ui/tour_then.py`；导览第 4 章末尾打印的是同样的内容）：

# %%
tn_attn = AttentionConfig("flash_attn_mla", "h200")
then_and_now_section(Console(width=100), LANG, N, BS, tn_attn)
tn = {r.rule.key: r for r in then_and_now(N, BS, tn_attn)}
assert [k for k, r in tn.items() if r.premise_holds] == ["pcp", "ascend_cp"]
assert tn["v0111"].path == tn["default"].path == tn["ascend_fix"].path == "decode"

# %% [markdown] en
# ## 4. Four kinds of request, three backends
#
# The same split on a batch with one request of each region: an ordinary decode, D's
# short extend, a later chunk of a long prompt (a long extend), and a fresh prompt, in
# V2's order. The backend matters too: its `reorder_batch_threshold` is the
# `decode_threshold` (1 for `TRITON_MLA`, `FLASHINFER_MLA`, `CUTLASS_MLA` and the common
# builder `CPU_MLA` uses, 128 for `FLASHMLA`, 512 for `FLASH_ATTN_MLA`, whose comment says
# it processes small prefills with the decode pathway), and `require_uniform` is set unless
# the backend takes variable-length queries. Which backend runs is the platform's choice
# (`vllm/platforms/cuda.py`): `FLASH_ATTN_MLA` on an H100/H200 with an auto/bf16 KV cache
# (it refuses an fp8 cache, and the list then falls to `FLASHMLA`), `FLASHINFER_MLA` on a
# B200, `TRITON_MLA` on sm_120 GPUs (`pdlab.engine.platforms.select_mla_backend`):

# %% [markdown] zh
# ## 4. 四类请求，三种后端
#
# 在一个每个区各有一个请求的批次上（按 V2 的顺序）做同样的切分：一个普通的 decode 行、D 的短
# extend、一个长提示词的后续分块（长 extend），以及一个新提示词。后端也有影响：它的
# `reorder_batch_threshold` 就是 `decode_threshold`（`TRITON_MLA`、`FLASHINFER_MLA`、
# `CUTLASS_MLA` 以及 `CPU_MLA` 所用的通用 builder 为 1，`FLASHMLA` 为 128，`FLASH_ATTN_MLA`
# 为 512，注释是 `process small prefills with decode pathway`）；除非后端支持变长 query，否则还会
# 设置
# `require_uniform`。实际跑哪个后端由平台决定（`vllm/platforms/cuda.py`）：KV 缓存为 auto/bf16
# 时 H100/H200 上是 `FLASH_ATTN_MLA`（它不接受 fp8 缓存，这时列表落到 `FLASHMLA`），B200 上是
# `FLASHINFER_MLA`，sm_120 的 GPU 上是 `TRITON_MLA`
# （`pdlab.engine.platforms.select_mla_backend`）：

# %%
batch = {  # name: (query_len, num_computed_tokens before the step, num_prompt_tokens)
    t("nb5_req_fresh"): (100, 0, 100),
    t("nb5_req_decode"): (1, 20, 12),
    t("nb5_req_long"): (200, 300, 900),
    t("nb5_req_short"): (1, N - 1, N),
}
SHORT = t("nb5_req_short")
names = list(batch)
q, c, p = (list(x) for x in zip(*batch.values()))
settings = [
    ("triton_mla", 1),
    ("triton_mla", 2),
    ("flashmla", 1),
    ("flash_attn_mla", 1),
]
table = {name: [*batch[name]] for name in names}
for gpu in ("h200", "b200", "cpu"):
    print(f"{gpu}: {choice_reason(select_mla_backend(gpu), LANG)}")
for backend, size in settings:
    threshold = AttentionConfig(backend).profile.reorder_batch_threshold
    state = gather_batch_req_state(
        dict(zip(names, q)), dict(zip(names, c)), dict(zip(names, p)), use_pcp=size > 1
    )
    order = [names.index(r) for r in state.req_ids]  # V2's order (decodes first under PCP)
    meta = build_mla_metadata(
        [q[i] for i in order],
        [c[i] for i in order],
        [p[i] for i in order],
        torch.zeros(4, 1, dtype=torch.int32),
        torch.zeros(sum(q)).long(),
        BS,
        attention_config=AttentionConfig(backend),
        parallel_config=ParallelConfig(size),
    )
    for slot, i in enumerate(order):
        region = batch_region(q[i], c[i], p[i], threshold)
        path = "decode" if slot < meta.num_decodes else "prefill"
        table[names[i]].append(f"{slot}: {region} -> {path}")
display(
    HTML(
        html_table(
            [t("nb5_col_request"), "query_len", "num_computed_tokens", "num_prompt_tokens"]
            + [f"{b}, PCP {s}" for b, s in settings],
            [[name, *row] for name, row in table.items()],
        )
    )
)
assert table[SHORT][3].endswith("decode")
assert table[SHORT][4].endswith("prefill")

# %% [markdown] en
# Read the columns: the short extend is a decode everywhere except under PCP; the fresh
# 100-token prompt is a prefill under `TRITON_MLA`; under `FLASHMLA` it is a prefill too
# here, because `require_uniform` wants every decode to have the first decode's query
# length (a 100-token prompt alone in its batch would be a decode); under
# `FLASH_ATTN_MLA` (variable lengths, threshold 512) it takes the decode path, and so does
# the 200-token long extend. That saves no FLOPs: for a fresh prompt the absorbed form
# always costs more (notebook 3, where absorbing wins only for a few queries over a long
# cached context). Upstream gives no reason for the 128 and 512 beyond that comment;
# pdlab's inference is what section 6 shows: the decode path reads far fewer bytes and
# launches fewer kernels, in a kernel tuned for it.
#
# Upstream uses the same switch elsewhere: the sparse MLA builder and the MLA indexer pass
# `not use_pcp` as well. The Mamba and GDN builders pass
# `treat_short_extends_as_decodes=False`, but first rewrite `is_prefilling`: Mamba turns a
# one-token prefill with prior state into a decode row (its comment names NIXL
# disaggregation's `h(N-1) -> N` recompute path), and GDN counts as prefills only rows with
# no prior state. So D's first step is a decode there too.

# %% [markdown] zh
# 按列读：短 extend 在除 PCP 以外的设置下都是 decode 行；100 个 token 的新提示词在
# `TRITON_MLA` 下是 prefill 行；在 `FLASHMLA` 下这里也是 prefill 行，因为 `require_uniform`
# 要求所有 decode 行的 query 长度都和第一个 decode 行相同（如果这个 100 token 的提示词独占一个
# 批次，它就会是 decode 行）；在 `FLASH_ATTN_MLA`（变长，阈值 512）下它走 decode 路径，200 个
# token 的长 extend
# 也一样。这并不省 FLOPs：对新提示词，吸收形式的 FLOPs 总是更多（见第 3 篇：只有少量 query
# 面对很长的已缓存上下文时，吸收才更省）。对 128 和 512，上游除了那句注释没有给出理由；
# pdlab 的推断就是第 6 节展示的：decode 路径读的字节少得多、启动的算子更少，算子也专为它调过。
#
# 上游在别处也用同一个开关：稀疏 MLA builder 和 MLA indexer 同样传 `not use_pcp`。Mamba 和 GDN
# 的 builder 传 `treat_short_extends_as_decodes=False`，但会先改写 `is_prefilling`：Mamba 把带有
# 先前状态的单 token prefill 行改成 decode 行（它的注释点名了 NIXL 分离部署中 `h(N-1) -> N` 的
# 重算路径），GDN 只把没有先前状态的行算作 prefill 行。所以在那里 D 的第一步同样是 decode 行。

# %% [markdown] en
# ## 5. Both paths give the same token
#
# MLA's two forms are algebraically equal (notebook 3), so the setting changes the cost,
# not the answer. Compare both P/D runs with a colocated engine and with the model's own
# slow oracle (a full forward from scratch for every token):

# %% [markdown] zh
# ## 5. 两条路径，同一个 token
#
# MLA 的两种形式在代数上相等（第 3 篇），所以这个设置只改变代价，不改变结果。把两次 P/D 运行
# 和非分离引擎、以及模型自带的慢速参考实现（每个 token 都从头完整前向一次）放在一起比：

# %%
colocated = LLMEngine(TINY, CacheConfig(block_size=BS), SchedulerConfig(), backend=BACKEND)
col_tokens = colocated.generate(prompt, SamplingParams(max_tokens=4))[0].output_token_ids
oracle = model.greedy_generate(ids.tolist(), 4)
for label, (_, toks) in runs.items():
    print(t("nb5_tokens_pd", label=label, toks=toks))
print(t("nb5_tokens_colocated", toks=col_tokens))
print(t("nb5_tokens_oracle", toks=oracle))
assert all(toks == col_tokens == oracle for _, toks in runs.values())

# %% [markdown] en
# ## 6. What each costs
#
# Each kernel in the trace carries modelled FLOPs and bytes (matrix products at `2MNK`
# FLOPs; each operand read once, each result written once, at the tensors' own dtype:
# fp32 for the tiny model here). Summed over D's first step:

# %% [markdown] zh
# ## 6. 各自的代价
#
# trace 里的每个算子都带着模型估算的 FLOPs 和字节数（矩阵乘按 `2MNK` FLOPs 计；每个操作数读
# 一次、每个结果写一次，按张量自己的精度计：这里的 tiny 模型是 fp32）。把 D 第一步的所有算子
# 加起来：

# %%
summary = []
for label, (tracer, _) in runs.items():
    step = tracer.first("route", "D")["step"]
    ks = tracer.filter("kernel", "D", step=step)
    summary.append(
        [
            label,
            tracer.first("route", "D")["forward"],
            len(ks),
            flops(traced_cost(ks).flops),
            nbytes(traced_cost(ks).bytes),
        ]
    )
headers = [t("nb5_col_setup"), t("nb5_col_path"), t("nb5_col_kernels"), "FLOPs", t("nb5_col_bytes")]
display(HTML(html_table(headers, summary)))

# %% [markdown] en
# The tiny model hides the scale. The same cost model with DeepSeek-V3's dimensions
# (128 heads, `kv_lora_rank` 512, nope/rope/v 128/64/128, 61 layers), in bf16, for D's one
# token at a few context lengths. The prefill path up-projects every context token through
# `kv_b_proj`: that is `2 x 1 x (128 x 256) x 512` FLOPs, about 33.6 MFLOP, per context
# token per layer. The absorbed decode path instead reads each context token's 576 latent
# values once, for all heads. The last two columns turn the numbers into a lower bound on
# time for the attention of all 61 layers on an H800 (the same 989 TFLOP/s dense bf16 and
# 3.35 TB/s HBM3 as an H100 SXM, per NVIDIA's datasheets): `max(FLOPs / peak, bytes /
# bandwidth)`. Only attention is counted: the projections, norms and MoE layers are the
# same on both paths.

# %% [markdown] zh
# tiny 模型看不出量级。换成 DeepSeek-V3 的维度（128 个头，`kv_lora_rank` 512，nope/rope/v
# 为 128/64/128，61 层），按 bf16，用同一个代价模型，看 D 这一个 token 在几种上下文长度下的代价。
# prefill 路径要把每个上下文 token 经 `kv_b_proj` 上投影：`2 × 1 × (128 × 256) × 512` FLOPs，
# 也就是每个上下文 token、每层约 33.6 MFLOP。吸收形式的 decode 路径则只把每个上下文 token
# 的 576 个潜向量值读一次，所有头共用。最后两列换算成 61 层注意力在 H800 上的时间下界
# `max(FLOPs / 峰值, 字节 / 带宽)`（H800 与 H100 SXM 一样是 989 TFLOP/s 稠密 bf16、
# 3.35 TB/s HBM3，数据来自 NVIDIA 的产品手册）。只计注意力：各投影、归一化和 MoE 层在两条
# 路径上相同。

# %%
per_ctx_token = gemm(
    1, V3.num_attention_heads * (V3.qk_nope_head_dim + V3.v_head_dim), V3.kv_lora_rank
)[0]
print(t("nb5_upproj", mf=f"{per_ctx_token / 1e6:.1f}"))
assert abs(per_ctx_token / 1e6 - 33.6) < 0.05

PEAK_FLOPS, PEAK_BW = published_peak("H800")  # dense bf16 and HBM3 (NVIDIA's datasheets)


def roofline_us(c, layers):
    return layers * max(c.flops / PEAK_FLOPS, c.bytes / PEAK_BW) * 1e6


cost_rows = []
for ctx in (1024, 4096, 16384, 65536):
    pre, dec = prefill_path_cost(V3, ctx), decode_path_cost(V3, ctx)
    # What one more request adds in a batch: the weights are read once for all of them.
    marginal = (pre.bytes - shared_weight_bytes(V3, "prefill", ctx)) / (
        dec.bytes - shared_weight_bytes(V3, "decode", ctx)
    )
    cost_rows.append(
        [
            ctx,
            flops(pre.flops),
            flops(dec.flops),
            f"{pre.flops / dec.flops:.0f}x",
            nbytes(pre.bytes),
            nbytes(dec.bytes),
            f"{pre.bytes / dec.bytes:.1f}x",
            f"{marginal:.0f}x",
            f"{roofline_us(pre, V3.num_hidden_layers):.0f} us",
            f"{roofline_us(dec, V3.num_hidden_layers):.0f} us",
        ]
    )
    assert pre.flops > 100 * dec.flops and pre.bytes > 5 * dec.bytes
display(
    HTML(
        html_table(
            [
                t("nb5_col_context"),
                "FLOPs forward_mha",
                "FLOPs forward_mqa",
                t("nb5_col_ratio"),
                t("nb5_col_pf_bytes"),
                t("nb5_col_dc_bytes"),
                t("nb5_col_ratio"),
                t("nb5_col_batch_ratio"),
                t("nb5_col_pf_bound"),
                t("nb5_col_dc_bound"),
            ],
            cost_rows,
        )
    )
)

# %%
plot_path_costs(V3, [2**k for k in range(8, 18)])

# %% [markdown] en
# For one token, the prefill path does more than 100 times the FLOPs of the decode path.
# Its bytes ratio grows with the context, but for a lone request it counts the weights both
# paths read (`kv_b_proj` on one side; the absorbed `W_UK` and `W_UV`, about 34 MB at V3
# widths, on the other) against that one request. In a batch the weights are read once for
# all requests, so the column "per request in a batch" compares what one more request adds
# (`shared_weight_bytes` in `pdlab/sim/kernel_costs.py`): its latent rows on the decode path,
# against the gathered, up-projected and reassembled context on the prefill path. Either
# way the prefill path computes the right token the expensive way, and under prefill
# context parallelism *every* request on D starts with this step.
#
# ## 7. Explore
#
# The explorer reruns a small P/D pair (tiny model, torch backend) and a colocated engine
# whenever you change the prompt length, the block size, `prefill_context_parallel_size`
# or the MLA backend profile; the preset only changes the cost model. Things to try:
#
# - set `prefill_context_parallel_size` to 2 and back, and watch the path and the kernels;
# - change the prompt length: `num_computed_tokens` follows `N - 1`;
# - change the block size: D still starts at `N - 1`, because P sends every block the
#   prompt touches, including a partial last block;
# - pick `flashmla`: D's one-token step does not change, but P's fresh prompt (shorter than
#   128 tokens) now takes the decode path on P;
# - switch the preset to see the cost at `N - 1` for real dimensions; the tokens stay equal.

# %% [markdown] zh
# 对这一个 token，prefill 路径的 FLOPs 是 decode 路径的 100 倍以上。字节数之比随上下文增长，
# 但对单个请求而言，它把两条路径读的权重（一边是 `kv_b_proj`；另一边是吸收后的 `W_UK` 和
# `W_UV`，V3 维度下约 34 MB）都算在了这一个请求头上。批处理时权重对所有请求只读一次，所以
# “批中每个请求”那一列比较的是每多一个请求多出的字节（`pdlab/sim/kernel_costs.py` 中的
# `shared_weight_bytes`）：decode 路径只是它的潜向量行，prefill 路径则是取出、上投影并重新
# 拼装的整个上下文。无论如何，prefill 路径都是用昂贵的方式算出正确的 token；而开启预填充
# 上下文并行时，D 上*每个*请求都从这一步开始。
#
# ## 7. 动手试试
#
# 每当你改变提示词长度、块大小、`prefill_context_parallel_size` 或 MLA 后端配置时，
# 下面的探索器都会重新跑一对小的 P/D 引擎（`tiny` 模型，torch 后端）和一个非分离引擎；
# 预设只影响代价模型。可以试试：
#
# - 把 `prefill_context_parallel_size` 设成 2 再改回来，看路径和算子怎么变；
# - 改提示词长度：`num_computed_tokens` 始终是 `N - 1`；
# - 改块大小：D 仍从 `N - 1` 开始，因为 P 会把提示词涉及的每个块（包括最后一个
#   不满的块）都传过来；
# - 选 `flashmla`：D 的这一步不变，但 P 上那个新提示词（短于 128 个 token）在 P 上走了
#   decode 路径；
# - 切换预设，看真实维度下 `N - 1` 处的代价；token 始终一致。

# %%
explorer = PDExplorer(prompt_len=N, block_size=BS, pcp=1, preset="deepseek-v3", lang=LANG)
explorer

# %% [markdown] en
# ## 8. D's first step under speculative decoding (MTP)
#
# DeepSeek-V3/R1 is served with its multi-token-prediction (MTP) layer as the drafter:
# after each step it proposes K draft tokens, and the next step verifies them in a row of
# `1 + K` tokens. vLLM 0.33.0 then schedules D's first step differently: the scheduler pads
# the one new token over `N - 1` cached to `1 + K` tokens with K `-1` placeholder drafts
# (`schedule`'s waiting loop, "Pad new decode requests to uniform spec decoding size to
# preserve full cudagraph for this step"), Model Runner V2 subtracts the drafts before it
# asks whether the row is one new token over context (so it is still
# `prefill_runs_as_decode`), a builder that supports spec-as-decode raises its threshold
# to `1 + K` (`_init_reorder_batch_threshold` in `vllm/v1/attention/backend.py`), the
# placeholders are rejected (`gather_draft_sampled`), and the MTP drafter is fed the
# target's hidden state at the recomputed position, `h[N-1]`. Below: the same prompt under
# FLASH_ATTN_MLA (the backend vLLM picks on an H200), K = 1 and K = 2, with and without
# PCP. The MTP layer is the one pdlab ships, trained beside the model (`pdlab train`);
# whatever the drafts, the tokens equal greedy decoding without speculative decoding.

# %% [markdown] zh
# ## 8. 投机解码（MTP）下 D 的第一步
#
# DeepSeek-V3/R1 部署时用它的多 token 预测（MTP）层作草稿模型：每一步之后它提出 K 个草稿
# token，下一步用一行 `1 + K` 个 token 来验证。vLLM 0.33.0 于是以不同的方式调度 D 的第一步：
# 调度器把 `N - 1` 个已缓存 token 之上的那一个新 token 补齐到 `1 + K` 个，补上 K 个 `-1`
# 占位草稿（`schedule` 中处理等待队列的循环，“Pad new decode requests to uniform spec decoding
# size to preserve full cudagraph for this step”）；Model Runner V2 先减去草稿 token，再判断
# 这一行是否为上下文之上的一个新 token（所以它仍是 `prefill_runs_as_decode`）；支持把投机
# 解码的验证行当作 decode 行处理的 builder 把阈值提高到 `1 + K`（`vllm/v1/attention/backend.py` 中的
# `_init_reorder_batch_threshold`）；占位草稿被拒绝（`gather_draft_sampled`）；MTP 草稿模型
# 拿到的是目标模型在重算位置的隐藏状态 `h[N-1]`。下面用同一个提示词、FLASH_ATTN_MLA（vLLM
# 在 H200 上选的后端），K = 1 和 K = 2，开与不开 PCP。这里的 MTP 层是 pdlab 随附的、与模型
# 一起训练的那一层（`pdlab train`）；无论草稿如何，输出的 token 都与不用投机解码的贪心解码
# 完全相同。

# %%
from pdlab.engine.config import SpeculativeConfig
from pdlab.engine.worker.gpu.spec_decode.mtp import MTPProposer
from pdlab.engine.worker.gpu.spec_decode.rejection_sampler import gather_draft_sampled

MTP = ModelConfig.tiny()  # the shipped checkpoint: the target and its MTP layer
H200 = AttentionConfig(gpu="h200")
spec_rows, spec_traces = [], {}
for k, pcp in ((1, 1), (2, 1), (2, 2)):
    sp_pair = PDPair(
        MTP,
        CacheConfig(block_size=4),
        SchedulerConfig(),
        backend=BACKEND,
        attention_config=H200,
        parallel_config=ParallelConfig(prefill_context_parallel_size=pcp),
        speculative_config=SpeculativeConfig(num_speculative_tokens=k),
    )
    sp_out = sp_pair.generate(prompt, SamplingParams(max_tokens=6))[0]
    tr, rid = sp_pair.tracer, sp_out.request_id
    _, row = tr.steps("D", rid)[0]
    rt = tr.route_of("D", rid)
    ver, dr = tr.first("verify", "D", req_id=rid), tr.first("draft", "D", req_id=rid)
    assert sp_out.output_token_ids == sp_pair.decode.model.greedy_generate(list(prompt.encode()), 6)
    assert row["spec_token_ids"] == [-1] * k and row["num_computed_tokens_before"] == N - 1
    spec_traces[(k, pcp)] = tr
    spec_rows.append(
        [
            k,
            pcp,
            row["num_computed_tokens_before"],
            row["num_scheduled_tokens"],
            str(row["spec_token_ids"]),
            rt["prefill_runs_as_decode"],
            rt["decode_graph_eligible"],
            rt["uniform_decode_token_count"],
            rt["decode_threshold"],
            rt["forward"],
            str(ver["sampled_token_ids"]),
            ver["num_rejected"],
            f"h[{dr['hidden_position']}]",
        ]
    )
display(
    HTML(
        html_table(
            [
                "K",
                "PCP",
                "num_computed_tokens",
                t("nb5_mtp_col_scheduled"),
                "scheduled_spec_decode_tokens",
                "prefill_runs_as_decode",
                "decode_graph_eligible",
                "uniform_decode_token_count",
                "decode_threshold",
                "forward",
                t("nb5_mtp_col_sampled"),
                t("nb5_mtp_col_rolled_back"),
                t("nb5_mtp_col_drafter_input"),
            ],
            spec_rows,
        )
    )
)

# %% [markdown] en
# The padding, pdlab's copy of upstream's waiting-loop block (in
# `pdlab/engine/core/sched/scheduler.py`, the section of the scheduler's speculative-decoding
# methods):

# %% [markdown] zh
# 补齐的规则，pdlab 对上游处理等待队列的循环中那段代码的复刻
# （在 `pdlab/engine/core/sched/scheduler.py`
# 里调度器与投机解码相关的方法那一节）：

# %%
show_source(Scheduler._pad_spec_decode)

# %% [markdown] en
# Why the padded row is still a decode: the subtraction in `gather_batch_req_state` (the
# excerpt in section 3 shows it: `new = [qi - di ...]`), and the threshold, raised to
# `1 + K` for builders that are not SINGLE_ONLY (FLASH_ATTN_MLA's 512 is already above it;
# TRITON_MLA's 1 becomes `1 + K`; CPU_MLA and CUTLASS_MLA stay at 1, so there every `1 + K`
# verifying row takes `forward_mha`, the padded one among them):

# %% [markdown] zh
# 补齐后的行为什么仍是 decode 行：`gather_batch_req_state` 里的减法（第 3 节的摘录里就有：
# `new = [qi - di ...]`），以及阈值：不是 SINGLE_ONLY 的 builder 会把它提高到 `1 + K`
# （FLASH_ATTN_MLA 的 512 本来就更大；TRITON_MLA 的 1 变成 `1 + K`；CPU_MLA 和 CUTLASS_MLA
# 保持 1，所以在那里每个 `1 + K` 的验证行都走 `forward_mha`，补齐的这一行也不例外）：

# %%
show_source(type(H200.profile).effective_threshold)
for name in ("triton_mla", "flashmla", "flash_attn_mla", "cpu_mla"):
    prof = AttentionConfig(backend=name).profile
    print(f"{prof.name}: {prof.reorder_batch_threshold} -> K=1: {prof.effective_threshold(1)}, "
          f"K=2: {prof.effective_threshold(2)}")  # fmt: skip

# %% [markdown] en
# The placeholders can never be accepted: the row's step starts inside the prefill
# (`num_computed_tokens < prefill_len`), so every draft counts as `-1`, upstream's rule in
# `vllm/v1/worker/gpu/spec_decode/rejection_sampler.py`. The row produces one token, the
# first output, and `num_computed_tokens` is rolled back over the K rejected positions.
# Then the drafter: its first input is the target's hidden state at the last accepted
# position, on D's first step the recomputed `N - 1`, and the token just sampled there. So
# the recompute that gives the first logits also feeds the drafter (SGLang's P/D instead
# ships P's draft state with the first token, because its D verifies P's drafts at once):

# %% [markdown] zh
# 占位草稿永远不可能被接受：这一行的这一步从预填充内部开始（`num_computed_tokens <
# prefill_len`），所以每个草稿都按 `-1` 计，这是上游
# `vllm/v1/worker/gpu/spec_decode/rejection_sampler.py` 的规则。这一行只产生一个 token，即第一个
# 输出 token，`num_computed_tokens` 回退 K 个被拒绝的位置。然后是草稿模型：它的第一个输入是
# 目标模型在最后一个被接受位置的隐藏状态（D 的第一步就是重算的 `N - 1`）和刚在那里采样出的
# token。所以给出第一个 logits 的那次重算同时也在喂草稿模型（SGLang 的 P/D 则把 P 的草稿
# 状态随第一个 token 一起传过来，因为它的 D 一开始就验证 P 的草稿）：

# %%
show_source(gather_draft_sampled)
show_source(MTPProposer.propose, "ids = input_ids.clone()", "out = self.mtp(")
for (k, pcp), tr in spec_traces.items():
    dr = tr.first("draft", "D")
    assert dr["hidden_position"] == N - 1
    print(t("nb5_mtp_drafter", k=k, pcp=pcp, hp=dr["hidden_position"], tok=dr["next_token"],
            drafts=dr["draft_token_ids"]))  # fmt: skip

# %% [markdown] en
# Under PCP the padded row is still prefilling, V2 computes no `prefill_runs_as_decode`,
# the builder passes `treat_short_extends_as_decodes = False`, and the row takes
# `forward_mha`; the PCP manager cuts its `1 + K` tokens, placeholders included, across the
# ranks (with two running decodes beside it, drawn for the picture):

# %% [markdown] zh
# 开启 PCP 时，补齐的行仍在预填充，V2 不计算 `prefill_runs_as_decode`，builder 传入
# `treat_short_extends_as_decodes = False`，这一行走 `forward_mha`；PCP 管理器（`PCPManager`）把它的
# `1 + K` 个 token（连同占位草稿）切分到各个 rank（旁边画了两个正在解码的请求作示意）：

# %%
pcp_route = spec_traces[(2, 2)].filter("route", "D")[0]  # D's first step under PCP 2
assert pcp_route["forward"] == "forward_mha" and pcp_route["prefill_runs_as_decode"] is None
layout_rows = [("dec-a", 1, False), ("dec-b", 1, False), ("D", pcp_route["query_len"], True)]
for r, cells in enumerate(pcp_layout(layout_rows, 2)):
    print(f"rank {r}: {cells}")

# %% [markdown] en
# Behind the connector, three more things change under MTP (why: the docstrings of
# `pdlab/engine/core/kv_cache_manager.py` and
# `pdlab/engine/distributed/kv_transfer/pd_connector.py`). The drafter's own K/V row at `N - 1`:
# P's MTP layer wrote it from P's sampled token, which the proxy throws away, and D's draft
# prefill writes it again from D's. NIXL's backoff: with more than one MTP module P prefills only
# `N - (K - 1)` tokens and D computes the last `K - 1`. And the prefix cache: with a KV connector
# vLLM drops the last block of every local hit, on P and on D, so the same prompt sent again
# reuses one block less than `floor((N-1)/B)*B`. Below, the pair sends the prompt twice with K =
# 2, with one MTP module and as with two (`num_nextn_predict_layers=2`: the scheduler, the
# connector and the prefix cache act as vLLM 0.33.0 does with two modules; pdlab's model has one,
# and runs it twice). With two modules P stops at `N - 2`, so its last drafter row is there, and
# D's first is at `N - 1`.

# %% [markdown] zh
# 在 connector 之后，MTP 还改变了三件事（原因见 `pdlab/engine/core/kv_cache_manager.py` 和
# `pdlab/engine/distributed/kv_transfer/pd_connector.py` 的文档字符串）。
# 草稿模型自己在 `N - 1` 的 K/V 行：P 的
# MTP 层用 P 采样出的 token 写了它，代理丢掉这个 token，D 的草稿预填充再用 D 的 token 把它
# 写一遍。NIXL 的回退：MTP 模块多于一个时，P 只预填充 `N - (K - 1)` 个 token，最后 `K - 1`
# 个由 D 计算。还有前缀缓存：有 KV connector 时，vLLM 在 P 和 D 上都丢掉每次本地命中的最后
# 一块，所以同一个提示词再发一次，复用的比 `floor((N-1)/B)*B` 少一块。下面这对实例在
# K = 2 下把提示词发两次，先是一个 MTP 模块，再按两个模块（`num_nextn_predict_layers=2`：
# 调度器、connector 和前缀缓存按 vLLM 0.33.0 有两个模块时那样做；pdlab 的模型只有一个
# 模块，运行两次）。两个模块时 P 停在 `N - 2`，所以它最后写的草稿模型行在那里，D 写的
# 第一行在 `N - 1`。

# %%
connector_rows = []
for modules in (1, 2):
    two = SpeculativeConfig(num_speculative_tokens=2, num_nextn_predict_layers=modules)
    c_pair = PDPair(MTP, CacheConfig(block_size=4), SchedulerConfig(), backend=BACKEND,
                    speculative_config=two)  # fmt: skip
    first, again = (c_pair.generate(prompt, SamplingParams(max_tokens=3))[0] for _ in range(2))
    tr, rid = c_pair.tracer, first.request_id
    cut = tr.filter("kv_prefill_backoff", "P", req_id=rid)
    _, d_row = tr.steps("D", rid)[0]
    p_dr, d_dr = tr.first("draft", "P", req_id=rid), tr.first("draft", "D", req_id=rid)
    hit = tr.first("prefix_hit", "D", req_id=again.request_id)["num_hit_tokens"]
    assert hit == ((N - 1) // 4 - 1) * 4 and d_row["num_computed_tokens_before"] == N - 1
    connector_rows.append(
        [
            modules,
            cut[0]["num_tokens"] if cut else 0,
            d_row["num_computed_tokens_before"],
            d_row["num_scheduled_tokens"],
            f"h[{p_dr['hidden_position']}], {p_dr['next_token']}",
            f"h[{d_dr['hidden_position']}], {d_dr['next_token']}",
            hit,
            (N - 1) // 4 * 4,
        ]
    )
display(
    HTML(
        html_table(
            [
                "num_nextn_predict_layers",
                t("nb5_mtp_col_backoff"),
                "num_computed_tokens",
                t("nb5_mtp_col_scheduled"),
                t("nb5_mtp_col_p_row"),
                t("nb5_mtp_col_d_row"),
                t("nb5_mtp_col_hit_again"),
                "floor((N-1)/B)*B",
            ],
            connector_rows,
        )
    )
)

# %% [markdown] en
# ## Check yourself
#
# Write your predictions in the cell below, then run it: a 37-token prompt, block size 16,
# `prefill_context_parallel_size = 2`. (a) What is D's `num_computed_tokens` when it first
# computes? (b) Which forward runs? (c) How many latent rows does that step gather per
# layer? (d) If instead the same prompt were fully in a *local* prefix cache, how many of
# its tokens would be reused? (e) Under the `flashmla` profile without PCP, which forward
# does P's first step take?

# %% [markdown] zh
# ## 自测
#
# 在下面的单元格里写下你的预测，再运行：37 个 token 的提示词，块大小
# 16，`prefill_context_parallel_size = 2`。(a) D 第一次计算时 `num_computed_tokens`
# 是多少？(b) 跑的是哪个前向（`forward_mqa` 还是 `forward_mha`）？(c) 这一步每层用
# `gather_cache` 取出多少行潜向量？(d) 如果这个提示词完整
# 地在*本地*前缀缓存里，会复用多少个 token？(e) 在 `flashmla` 配置、不开 PCP 时，P 的第一步
# 走哪个前向？

# %%
from pdlab.exercises.notebook_checks import notebook_check

# Your predictions: replace each None, then run this cell. pdlab computes the answers
# and grades yours; they stay hidden until every one is filled in (solution=True
# shows them).
predictions = {
    "a_num_computed_tokens": None,
    "b_forward": None,
    "c_rows_gathered": None,
    "d_local_reuse": None,
    "e_p_forward_flashmla": None,
}
notebook_check("05", predictions, lang=LANG)
