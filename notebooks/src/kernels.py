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
# # 4. The kernels: paged cache I/O, varlen flash attention, LSE merge, split-KV decode
#
# **What you will learn.** The five kernels under MLA's two paths, what each computes, and
# how to check one: run it and compare with the plain-PyTorch oracle
# (`pdlab.attention.reference.naive_attention`: fp32, scores materialised, no paging).
#
# - `reshape_and_cache_mla` (both paths): write this step's latent rows into their slots;
#   vLLM's `concat_and_cache_mla` (`vllm/_custom_ops.py`).
# - `gather_cache` (`forward_mha`): read a request's cached rows through its block
#   table into one contiguous tensor; vLLM's `gather_and_maybe_dequant_cache`, same file.
# - `flash_attn_varlen` (`forward_mha`): attention over packed sequences of any
#   length; the `flash_attn_varlen_func` vLLM calls.
# - `merge_attn_states` (`forward_mha`): join attention over the new tokens with
#   attention over the cached context; vLLM's `vllm/v1/attention/ops/merge_attn_states.py`.
# - `mla_decode` (`forward_mqa`): absorbed MQA over the paged latent cache with split
#   KV; vLLM's `vllm/v1/attention/ops/triton_decode_attention.py`, and the idea of FlashMLA.
#
# Every kernel has a Triton implementation and a torch twin of the same signature. Each
# check below runs on every backend available here; on a machine without a GPU Triton runs
# through its CPU interpreter (`TRITON_INTERPRET=1`), which is slow, so the shapes are small:
# the tiny model's 4 heads, latent rank 64 and RoPE 16 (a row of 80, not a power of two,
# like DeepSeek's 576 = 512 + 64).

# %% [markdown] zh
# # 4. 算子：分页缓存读写、变长 FlashAttention、LSE 合并、split-KV 解码
#
# **你会学到什么。** MLA 两条路径底下的五个算子，各自算什么，以及怎样检查一个算子：运行它，
# 再和纯 PyTorch 的参考实现比较（`pdlab.attention.reference.naive_attention`：fp32，显式算出
# 注意力分数，不分页）。
#
# - `reshape_and_cache_mla`（两条路径都用）：把这一步的潜向量行写进它们的槽；即 vLLM 的
#   `concat_and_cache_mla`（`vllm/_custom_ops.py`）。
# - `gather_cache`（`forward_mha`）：经块表把一个请求已缓存的行读进一个连续张量；即 vLLM
#   同一文件中的 `gather_and_maybe_dequant_cache`。
# - `flash_attn_varlen`（`forward_mha`）：对任意长度、首尾相接打包的序列做注意力；即 vLLM
#   调用的 `flash_attn_varlen_func`。
# - `merge_attn_states`（`forward_mha`）：把新 token 上的注意力与已缓存上下文上的注意力合并；
#   即 vLLM 的 `vllm/v1/attention/ops/merge_attn_states.py`。
# - `mla_decode`（`forward_mqa`）：在分页的潜向量缓存上做吸收形式的 MQA，并切分 KV；即 vLLM 的
#   `vllm/v1/attention/ops/triton_decode_attention.py`，也是 FlashMLA 的思路。
#
# 每个算子都有一个 Triton 实现和一个签名相同的 torch 孪生实现。下面每项检查都在这里可用的每个
# 后端上运行；在没有 GPU 的机器上，Triton 通过它的 CPU 解释器（`TRITON_INTERPRET=1`）运行，
# 很慢，所以形状都很小：小模型的 4 个头、潜向量秩 64、RoPE 16（一行 80 个值，不是 2 的幂，
# 和 DeepSeek 的 576 = 512 + 64 一样）。

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
import time

import torch
from IPython.display import HTML, display

from pdlab import kernels
from pdlab.attention.reference import causal_mask, naive_attention
from pdlab.catalog import words
from pdlab.kernels.backend import triton_installed
from pdlab.kernels.decode_attention import mla_decode_torch
from pdlab.kernels.flash_attn import flash_attn_varlen_torch
from pdlab.kernels.merge import merge_attn_states_torch
from pdlab.ui.choices import kernels_line
from pdlab.ui.fmt import html_table, show_source

LANG = "en"  # the language of the printed words
t = words(LANG)
torch.set_num_threads(1)  # small shapes: one thread avoids thread-pool overhead
BACKENDS = ["triton", "torch"] if triton_installed() else ["torch"]
print(t("nb4_default", backend=kernels_line(LANG)))
print(t("nb4_checked", backends=BACKENDS))
H, L, R = 4, 64, 16  # heads, kv_lora_rank, qk_rope_head_dim (the tiny model)
D_QK, D_V = 48, 32  # un-absorbed head widths: nope 32 + rope 16, value 32
SCALE = D_QK**-0.5
timings = []


def timed(fn, *args, backend, label="", **kwargs):
    """Call a kernel on one backend and note how long it took."""
    t = time.perf_counter()
    result = fn(*args, backend=backend, **kwargs)
    timings.append([fn.__name__ + label, backend, f"{(time.perf_counter() - t) * 1e3:.1f} ms"])
    return result


# %% [markdown] en
# ## 1. `reshape_and_cache_mla` and `gather_cache`: the paged cache
#
# Write 10 tokens' rows `[kv_c | k_pe]` into a cache of 8 blocks of 4 slots through a
# scattered block table, then read them back in order. A negative slot means "skip this
# token" (vLLM uses it for padding).

# %% [markdown] zh
# ## 1. `reshape_and_cache_mla` 与 `gather_cache`：分页缓存
#
# 把 10 个 token 的行 `[kv_c | k_pe]` 经一个打散的块表写进 8 个块、每块 4 个槽的缓存，再按
# 顺序读回来。槽为负数表示“跳过这个 token”（vLLM 用它表示填充）。

# %%
g = torch.Generator().manual_seed(0)
block_table = torch.tensor([[5, 2, 7]], dtype=torch.int32)
n = 10
kv_c, k_pe = torch.randn(n + 1, L, generator=g), torch.randn(n + 1, R, generator=g)
slots = [int(block_table[0, p // 4]) * 4 + p % 4 for p in range(n)] + [-1]
print("slot_mapping:", slots)
for backend in BACKENDS:
    cache = torch.full((8, 4, L + R), float("nan"))
    timed(kernels.reshape_and_cache_mla, kv_c, k_pe, cache, torch.tensor(slots), backend=backend)
    rows = timed(
        kernels.gather_cache,
        cache,
        block_table,
        torch.tensor([0, n], dtype=torch.int32),
        backend=backend,
    )
    assert torch.equal(rows, torch.cat([kv_c, k_pe], dim=-1)[:n])
    assert int(torch.isfinite(cache[:, :, 0]).sum()) == n  # the -1 slot wrote nothing
    print(t("nb4_rows", backend=backend, n=n))

# %% [markdown] en
# ## 2. `flash_attn_varlen`: attention over packed sequences
#
# Sequences of different lengths are packed end to end and described by cumulative
# offsets `cu_seqlens_q`/`cu_seqlens_k`, so one launch serves a whole batch. With
# `causal=True` the mask is aligned *bottom-right*, as in FlashAttention: query `i` of a
# sequence with `q_len` queries and `k_len` keys sees keys `< k_len - q_len + i + 1`. That
# is what lets the new tokens of a chunk attend to the context before them. Here is the
# mask for 3 new tokens after 3 cached ones:

# %% [markdown] zh
# ## 2. `flash_attn_varlen`：打包序列上的注意力
#
# 不同长度的序列首尾相接打包在一起，由累计偏移 `cu_seqlens_q`/`cu_seqlens_k` 描述，一次启动
# 就能处理整个批次。`causal=True` 时，掩码按*右下角*对齐，和 FlashAttention 一样：一个有
# `q_len` 个 query、`k_len` 个 key 的序列中，第 `i` 个 query 能看到 `< k_len - q_len + i + 1`
# 的 key。正因如此，一个分块里的新 token 才能看到它之前的上下文。下面是 3 个已缓存 token 之后
# 3 个新 token 的掩码：

# %%
print(causal_mask(3, 6).int())

# %% [markdown] en
# The torch twin is the algorithm in plain code: walk the keys one tile at a time and fold
# each tile in with the log-sum-exp merge (the online softmax):

# %% [markdown] zh
# torch 孪生实现就是用朴素代码写出的算法：每次取一块 key，用 log-sum-exp 合并（在线 softmax）
# 把它并入结果：

# %%
show_source(flash_attn_varlen_torch)

# %%
q_lens, k_lens = [5, 1, 9], [5, 12, 9]  # a prompt, one token over context, a prompt
cu_q = torch.tensor([0, 5, 6, 15], dtype=torch.int32)
cu_k = torch.tensor([0, 5, 17, 26], dtype=torch.int32)
q = torch.randn(sum(q_lens), H, D_QK, generator=g)
k = torch.randn(sum(k_lens), H, D_QK, generator=g)
v = torch.randn(sum(k_lens), H, D_V, generator=g)
rows = []
for causal in (True, False):
    ref = [
        naive_attention(
            q[cu_q[i] : cu_q[i + 1]],
            k[cu_k[i] : cu_k[i + 1]],
            v[cu_k[i] : cu_k[i + 1]],
            SCALE,
            causal,
        )
        for i in range(3)
    ]
    ref_out, ref_lse = torch.cat([o for o, _ in ref]), torch.cat([s for _, s in ref])
    for backend in BACKENDS:
        out, lse = timed(
            kernels.flash_attn_varlen,
            q,
            k,
            v,
            cu_q,
            cu_k,
            max(q_lens),
            max(k_lens),
            SCALE,
            causal,
            backend=backend,
            label=f" (causal={causal})",
        )
        torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(lse, ref_lse, rtol=1e-4, atol=1e-4)
        rows.append(
            [
                backend,
                causal,
                f"{float((out - ref_out).abs().max()):.1e}",
                f"{float((lse - ref_lse).abs().max()):.1e}",
            ]
        )
headers = [t("nb_backend"), "causal", "max |out - naive|", "max |lse - naive|"]
display(HTML(html_table(headers, rows)))

# %% [markdown] en
# ## 3. `merge_attn_states`: attention in parts
#
# Attention over keys `A ∪ B` can be computed over `A` and over `B` separately and merged
# exactly, if each part also returns its log-sum-exp: with `m = max(lse_a, lse_b)`,
# `w_a = exp(lse_a - m)`, `w_b = exp(lse_b - m)`,
# `out = (w_a out_a + w_b out_b) / (w_a + w_b)` and `lse = m + log(w_a + w_b)`. That is how
# `forward_mha` joins attention over the new tokens with attention over the cached
# context (gathered chunk by chunk), and how `mla_decode` joins its KV splits.

# %% [markdown] zh
# ## 3. `merge_attn_states`：分段计算注意力
#
# 对 key 集合 `A ∪ B` 的注意力，可以分别对 `A` 和 `B` 计算后精确合并，只要每部分同时返回它的
# log-sum-exp：取 `m = max(lse_a, lse_b)`、`w_a = exp(lse_a - m)`、`w_b = exp(lse_b - m)`，
# 则 `out = (w_a out_a + w_b out_b) / (w_a + w_b)`，`lse = m + log(w_a + w_b)`。
# `forward_mha` 就是这样把新 token 上的注意力与已缓存上下文（逐块取出）上的注意力合并的，
# `mla_decode` 也这样合并它的各个 KV 切分。

# %%
show_source(merge_attn_states_torch)

# %%
qm = torch.randn(3, H, D_QK, generator=g)
km, vm = torch.randn(20, H, D_QK, generator=g), torch.randn(20, H, D_V, generator=g)
full_out, full_lse = naive_attention(qm, km, vm, SCALE, causal=False)
out_a, lse_a = naive_attention(qm, km[:7], vm[:7], SCALE, causal=False)
out_b, lse_b = naive_attention(qm, km[7:], vm[7:], SCALE, causal=False)
for backend in BACKENDS:
    out, lse = timed(kernels.merge_attn_states, out_a, lse_a, out_b, lse_b, backend=backend)
    torch.testing.assert_close(out, full_out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse, full_lse, rtol=1e-5, atol=1e-5)
    print(t("nb4_merged", backend=backend, d=f"{float((out - full_out).abs().max()):.1e}"))

# %% [markdown] en
# ## 4. `mla_decode`: absorbed MQA with split KV
#
# The decode path folds `W_UK` into the query, so each head's query is a row of
# `L + R = 80` values (576 for DeepSeek) and every head attends over the *same* cached
# latent rows: multi-query attention, with the first `L` columns of each row as the value.
# A decode step has one query token per request, too little work to fill a GPU on a long
# context, so stage 1 also splits each request's KV range into `num_kv_splits` parts that
# run in parallel, each writing a partial `(out, lse)`; stage 2 merges them by LSE.

# %% [markdown] zh
# ## 4. `mla_decode`：切分 KV 的吸收形式 MQA
#
# decode 路径把 `W_UK` 吸收进 query，所以每个头的 query 是一行 `L + R = 80` 个值（DeepSeek 为
# 576），每个头都在*同一批*已缓存的潜向量行上做注意力：这是多查询注意力（MQA），每行的前 `L`
# 列同时充当 value。一步解码每个请求只有一个 query token，在长上下文上不足以填满一块 GPU，所以
# 第一阶段还把每个请求的 KV 区间切成 `num_kv_splits` 份并行计算，每份写出一个部分结果
# `(out, lse)`；第二阶段再按 LSE 合并它们。

# %%
show_source(mla_decode_torch)

# %%
num_blocks, bs = 16, 4
cache = torch.randn(num_blocks, bs, L + R, generator=g)
seq_lens = torch.tensor([3, 13, 9], dtype=torch.int32)  # tokens in the cache per request
tables = torch.tensor([[9, 0, 0, 0], [4, 11, 1, 14], [7, 2, 12, 0]], dtype=torch.int32)
qd = torch.randn(3, H, L + R, generator=g)

refs = []
for b, s in enumerate(seq_lens.tolist()):
    pos = torch.arange(s)
    latent = cache[tables[b, pos // bs].long(), pos % bs]  # [s, L + R]
    refs.append(
        naive_attention(qd[b][None], latent[:, None, :], latent[:, None, :L], SCALE, causal=False)
    )
ref_out = torch.cat([o for o, _ in refs])
ref_lse = torch.cat([s for _, s in refs])
rows = []
for backend in BACKENDS:
    for splits in (1, 2, 4, 8):
        out, lse = timed(
            kernels.mla_decode,
            qd,
            cache,
            tables,
            seq_lens,
            SCALE,
            num_kv_splits=splits,
            backend=backend,
            label=f" (splits={splits})",
        )
        torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(lse, ref_lse, rtol=1e-4, atol=1e-4)
        rows.append([backend, splits, f"{float((out - ref_out).abs().max()):.1e}"])
display(HTML(html_table([t("nb_backend"), "num_kv_splits", "max |out - naive MQA|"], rows)))

# %% [markdown] en
# With 8 splits, the 3-token request has empty splits: they return `lse = -inf` and weigh
# nothing in the merge. The number of splits changes how the work is spread, never the
# result.
#
# ## 5. How long each call took here
#
# Not a benchmark: the first Triton call of each kernel includes its setup, and the
# interpreter runs kernels in Python. Compiled on a GPU the same kernels are measured by
# `pdlab bench kernels` (`make bench`).

# %% [markdown] zh
# 切成 8 份时，那个 3 个 token 的请求会有空的切分：它们返回 `lse = -inf`，在合并中权重为零。
# 切分数只改变工作怎样分摊，从不改变结果。
#
# ## 5. 每次调用在这里花了多久
#
# 这不是基准测试：每个算子第一次调用 Triton 时包含准备开销，而解释器是在 Python 里运行算子的。
# 同样的算子在 GPU 上编译后由 `pdlab bench kernels`（`make bench`）测量。

# %%
display(HTML(html_table([t("nb4_kernel"), t("nb_backend"), t("nb4_wall")], timings)))

# %% [markdown] en
# ## Check yourself
#
# Write your predictions in the cell below, then run it: (a) merging a result with an
# *empty* part (`lse = -inf`) returns what? (b) does the order of the parts matter? (c)
# `mla_decode` with more splits than tokens (16 splits over 3 tokens): same result as 1
# split?

# %% [markdown] zh
# ## 自测
#
# 在下面的单元格里写下你的预测，再运行：(a) 把一个结果和一个*空*部分（`lse = -inf`）合并，得
# 到什么？(b) 各部分的顺序有影响吗？(c) 切分数多于 token 数的 `mla_decode`（3 个 token 切 16
# 份）：结果和切 1 份相同吗？

# %%
from pdlab.exercises.notebook_checks import notebook_check

# Your predictions: replace each None, then run this cell. pdlab computes the answers
# and grades yours; they stay hidden until every one is filled in (solution=True
# shows them).
predictions = {
    "empty_part_returns_the_other": None,
    "order_matters": None,
    "more_splits_than_tokens_same": None,
}
notebook_check("04", predictions, lang=LANG)
