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
# # 3. MLA's two forms: naive and absorbed
#
# **What you will learn.** DeepSeek's Multi-head Latent Attention (MLA) caches one
# 576-value latent row per token and layer instead of per-head keys and values. Attention
# over that cache can be computed in two algebraically equal ways:
#
# - **naive** (un-absorbed): up-project every cached row through `kv_b_proj` into per-head
#   keys (192 wide) and values (128 wide), then attend as ordinary multi-head attention;
# - **absorbed**: fold `W_UK` into the query and `W_UV` into the output, and attend
#   directly over the latent rows, as multi-query attention (MQA) with 576-wide keys.
#
# You will check the equality numerically, compare cache sizes, count FLOPs against bytes
# as a function of the query length *and* of the cached context (absorbing wins only for a
# few queries over a long cached context, about 171 query tokens for DeepSeek-V3; for a
# fresh prompt it never saves FLOPs), and place both on a roofline with published GPU
# numbers and this machine's measured ones. That is why vLLM's `forward_mqa` absorbs and
# `forward_mha` does not.

# %% [markdown] zh
# # 3. MLA 的两种形式：朴素形式与吸收形式
#
# **你会学到什么。** DeepSeek 的多头潜在注意力（MLA）为每个 token、每一层缓存一行 576 个值的
# 潜向量，而不是逐头的 key 和 value。在这样的缓存上，注意力可以用两种代数上相等的方式计算：
#
# - **朴素形式**：把每一行缓存经 `kv_b_proj` 上投影成逐头的 key（宽 192）和 value
#   （宽 128），再当作普通的多头注意力来算；
# - **吸收形式**：把 `W_UK` 吸收进 query、`W_UV` 吸收进输出，直接在潜向量行上做注意力，即 key
#   宽 576 的多查询注意力（MQA）。
#
# 你将在数值上验证两者相等，比较缓存大小，按 query 长度*和*已缓存上下文长度对比 FLOPs 与
# 字节数（只有少量 query 面对很长的已缓存上下文时吸收形式才胜出，DeepSeek-V3 约为 171 个
# query token；对新提示词它从不省 FLOPs），并把两者放到一个 roofline 模型上，用公布的 GPU
# 数据和本机实测的数据。这就是 vLLM 的 `forward_mqa` 用吸收形式、`forward_mha` 不用的原因。

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
from IPython.display import HTML, display
from matplotlib.figure import Figure

from pdlab.attention.reference import mla_absorbed, mla_naive
from pdlab.catalog import words
from pdlab.engine.config import ModelConfig
from pdlab.sim.kernel_costs import (
    absorb_crossover_query_len,
    absorb_flops_per_key,
    decode_path_cost,
    mla_decode_cost,
    mla_forms_flops,
    prefill_path_cost,
)
from pdlab.tools.measure import measure_ceilings, published_peak
from pdlab.ui.fmt import flops, html_table, nbytes, show_source
from pdlab.ui.plots import lang_fonts

LANG = "en"  # the language of the printed words and the plots
t = words(LANG)
PRESETS = [
    ModelConfig.tiny(),
    ModelConfig.deepseek_v2_lite(),
    ModelConfig.deepseek_v2(),
    ModelConfig.deepseek_v3(),
]
V3 = PRESETS[-1]

# %% [markdown] en
# ## 1. The two forms, side by side
#
# pdlab's oracle writes MLA twice, after DeepSeek-V3's `inference/model.py`
# (`attn_impl="naive"` and `"absorb"`). Both take the same inputs: the query with RoPE
# applied, the cached latent `kv_c` and `k_pe`, and `kv_b_proj`'s weight.

# %% [markdown] zh
# ## 1. 两种形式，并排来看
#
# pdlab 的参考实现把 MLA 写了两遍，仿照 DeepSeek-V3 的 `inference/model.py`
# （`attn_impl="naive"` 和 `"absorb"`）。两者的输入相同：已加 RoPE 的 query、缓存的潜向量
# `kv_c` 与 `k_pe`，以及 `kv_b_proj` 的权重。

# %%
show_source(mla_naive)

# %%
show_source(mla_absorbed)

# %% [markdown] en
# ## 2. Equal, numerically
#
# Random inputs with the tiny model's dimensions and with DeepSeek-V3's (128 heads,
# `kv_lora_rank` 512, nope/rope/v 128/64/128), a few queries over a cached context, causal.
# The scale is `qk_head_dim ** -0.5 * mscale ** 2` in both forms (192, not 576: absorbing
# changes how a score is computed, not its value).


# %% [markdown] zh
# ## 2. 数值上相等
#
# 随机输入，分别用小模型的维度和 DeepSeek-V3 的维度（128 个头，`kv_lora_rank` 512，
# nope/rope/v 为 128/64/128），几个 query 作用在一段已缓存的上下文上，带因果掩码。两种形式的
# 缩放都是 `qk_head_dim ** -0.5 * mscale ** 2`（是 192，不是 576：吸收改变的是分数的算法，
# 不是它的值）。


# %%
def random_inputs(cfg, q_len, ctx_len, seed=0):
    g = torch.Generator().manual_seed(seed)
    h, L = cfg.num_attention_heads, cfg.kv_lora_rank
    q = torch.randn(q_len, h, cfg.qk_head_dim, generator=g)
    kv_c = torch.randn(ctx_len, L, generator=g)
    k_pe = torch.randn(ctx_len, cfg.qk_rope_head_dim, generator=g)
    w_kv_b = torch.randn(h * (cfg.qk_nope_head_dim + cfg.v_head_dim), L, generator=g) * L**-0.5
    return q, kv_c, k_pe, w_kv_b


rows = []
for cfg in (PRESETS[0], V3):
    args = random_inputs(cfg, q_len=4, ctx_len=64)
    dims = (cfg.qk_nope_head_dim, cfg.v_head_dim, cfg.softmax_scale)
    out_n, lse_n = mla_naive(*args, *dims, causal=True)
    out_a, lse_a = mla_absorbed(*args, *dims, causal=True)
    err = float((out_n - out_a).abs().max() / out_n.abs().max())
    rows.append(
        [cfg.name, tuple(out_n.shape), f"{err:.1e}", f"{float((lse_n - lse_a).abs().max()):.1e}"]
    )
    assert torch.allclose(out_n, out_a, rtol=1e-4, atol=1e-4)
    assert torch.allclose(lse_n, lse_a, rtol=1e-4, atol=1e-4)
display(
    HTML(
        html_table(
            [
                t("nb3_dims"),
                t("nb3_shape"),
                "max |naive - absorbed| / max |out|",
                t("nb3_lse_diff"),
            ],
            rows,
        )
    )
)

# %% [markdown] en
# ## 3. What the cache holds per token
#
# MLA caches `kv_lora_rank + qk_rope_head_dim` values per token and layer, shared by all
# heads. Caching the up-projected keys and values instead would take
# `heads x (qk_head_dim + v_head_dim)` values: for DeepSeek-V3, 576 against
# 128 x (192 + 128) = 40,960, about 71 times more.

# %% [markdown] zh
# ## 3. 每个 token 缓存了什么
#
# MLA 为每个 token、每一层缓存 `kv_lora_rank + qk_rope_head_dim` 个值，由所有头共享。若改为
# 缓存上投影后的 key 和 value，则要 `heads x (qk_head_dim + v_head_dim)` 个值：对 DeepSeek-V3，
# 是 576 对 128 x (192 + 128) = 40,960，约多 71 倍。

# %%
rows = []
for cfg in PRESETS:
    mha = cfg.num_attention_heads * (cfg.qk_head_dim + cfg.v_head_dim)
    rows.append(
        [
            cfg.name,
            cfg.num_attention_heads,
            cfg.kv_cache_dim,
            mha,
            f"{mha / cfg.kv_cache_dim:.0f}x",
            nbytes(cfg.kv_cache_bytes_per_token),
            nbytes(mha * cfg.num_hidden_layers * 2),
        ]
    )
display(
    HTML(
        html_table(
            [
                t("nb_model"),
                t("nb3_heads"),
                t("nb3_mla_values"),
                t("nb3_mha_values"),
                t("nb3_ratio"),
                t("nb3_mla_bytes"),
                t("nb3_mha_bytes"),
            ],
            rows,
        )
    )
)
assert V3.kv_cache_dim == 576
assert V3.num_attention_heads * (V3.qk_head_dim + V3.v_head_dim) == 40960

# %% [markdown] en
# ## 4. FLOPs against bytes
#
# Count the work of `q` query tokens of one request attending over `S` cached tokens, per
# layer (`H` heads, `L` = `kv_lora_rank`, `R` = rope width, `n`/`v` = nope/value widths):
#
# - naive: `S * 2LH(n+v)` FLOPs to up-project every key once, plus
#   `q*S * 2H((n+R) + v)` for the attention itself; reads `S*(L+R)` cached values, then
#   `S*H(n+R+v)` materialised keys and values;
# - absorbed: `q*S * 2H((L+R) + L)` FLOPs (plus two small per-query projections); reads
#   `S*(L+R)` cached values, once for all heads.
#
# Per (query, key) pair absorbed attention costs more (576 + 512 against 192 + 128 per
# head), but it never up-projects the keys. Up-projection costs `2LH(n+v)` per key
# whatever `q` is, so over a context much longer than the query absorbing wins when `q` is
# small: `q < L(n+v) / ((2L+R) - (n+R+v))`. (Below, the whole count, new tokens included,
# shows where that limit holds and where it does not.)

# %% [markdown] zh
# ## 4. FLOPs 与字节数
#
# 统计一个请求的 `q` 个 query token 在 `S` 个已缓存 token 上做注意力的工作量，按单层计（`H` 个头，
# `L` = `kv_lora_rank`，`R` = RoPE 部分的宽度，`n`/`v` = nope/value 宽度）：
#
# - 朴素形式：把每个 key 上投影一次要 `S * 2LH(n+v)` FLOPs，注意力本身再要
#   `q*S * 2H((n+R) + v)`；读取 `S*(L+R)` 个缓存值，再读写 `S*H(n+R+v)` 个显式生成的 key 和 value；
# - 吸收形式：`q*S * 2H((L+R) + L)` FLOPs（外加两个很小的逐 query 投影）；读取 `S*(L+R)` 个
#   缓存值，所有头只读一次。
#
# 对每个 (query, key) 对，吸收形式的注意力更贵（每个头 576 + 512，对比 192 + 128），但它从不
# 上投影 key。上投影无论 `q` 多大，每个 key 都要 `2LH(n+v)`，所以当上下文远长于 query 时，
# `q` 小则吸收形式胜出：`q < L(n+v) / ((2L+R) - (n+R+v))`。（下面把新 token 也算进去的完整
# 计数会显示这个极限在哪里成立、在哪里不成立。）

# %%
show_source(absorb_crossover_query_len)

# %%
rows = []
for cfg in PRESETS:
    x = absorb_crossover_query_len(cfg)
    L, n, v, R = cfg.kv_lora_rank, cfg.qk_nope_head_dim, cfg.v_head_dim, cfg.qk_rope_head_dim
    assert abs(x - L * (n + v) / ((2 * L + R) - (n + R + v))) < 1e-9
    rows.append([cfg.name, f"{x:.1f}"])
display(HTML(html_table([t("nb_model"), t("nb3_wins_below")], rows)))
x_v3 = absorb_crossover_query_len(V3)
assert 165 < x_v3 < 175


# %%
flops_per_key = absorb_flops_per_key  # pdlab/sim/kernel_costs.py


qs = [2**k for k in range(0, 14)]
with lang_fonts(LANG) as plot_lang:  # Chinese where a font has the glyphs, else English
    tp = words(plot_lang)
    fig = Figure(figsize=(6.5, 4))
    ax = fig.subplots()
    ax.loglog(qs, [flops_per_key(V3, q)[0] for q in qs], "o-", label=tp("nb3_naive_line"))
    ax.loglog(qs, [flops_per_key(V3, q)[1] for q in qs], "s-", label=tp("nb3_absorbed_line"))
    ax.axvline(x_v3, color="grey", ls="--", label=tp("nb3_crossover", x=f"{x_v3:.0f}"))
    ax.set_xlabel(tp("nb3_q_axis"))
    ax.set_ylabel(tp("nb3_flops_axis"))
    ax.set_title(tp("nb3_flops_title"))
    ax.legend(fontsize=8)
    fig.tight_layout()
fig

# %% [markdown] en
# Per cached key, a decode step (`q = 1`, or a few with speculative decoding) does about
# 120 times fewer FLOPs absorbed. But the count above leaves two things out: the absorbed
# form also pays `W_UK` and `W_UV` *per query* (exactly what `kv_b_proj` costs per key),
# and the new tokens attend to each other. Counting everything for `q` new tokens of one
# request over `S` cached ones (`mla_forms_flops`):
#
# - naive: `(S + q) * 2LH(n+v)` to up-project every key, plus `P * 2H((n+R) + v)`;
# - absorbed: `q * 2LH(n+v)` for `W_UK`/`W_UV`, plus `P * 2H((L+R) + L)`,
#
# with `P = q*S + q(q+1)/2` (query, key) pairs. With no cached context (`S = 0`) the
# projections cost the same and every pair costs more absorbed: **a fresh prompt is never
# cheaper absorbed**. Absorbing wins only when `S * L(n+v)` outweighs the pairs' extra cost,
# that is for few queries over a long context; as `S` grows the boundary tends to the 171
# query tokens above.

# %% [markdown] zh
# 按每个已缓存 key 计，一步解码（`q = 1`，投机解码时为几个）用吸收形式的 FLOPs 约少 120 倍。
# 但上面的计数漏了两样：吸收形式还要*为每个 query* 付 `W_UK` 和 `W_UV`（恰好等于 `kv_b_proj`
# 对每个 key 的开销），而且新 token 之间也要互相做注意力。把一个请求的 `q` 个新 token 在 `S`
# 个已缓存 token 上的全部工作都算上（`mla_forms_flops`）：
#
# - 朴素形式：上投影每个 key 要 `(S + q) * 2LH(n+v)`，再加 `P * 2H((n+R) + v)`；
# - 吸收形式：`W_UK`/`W_UV` 要 `q * 2LH(n+v)`，再加 `P * 2H((L+R) + L)`，
#
# 其中 `P = q*S + q(q+1)/2` 是 (query, key) 对的个数。没有已缓存上下文（`S = 0`）时两边的投影
# 一样多，而每个对在吸收形式下都更贵：**新提示词用吸收形式从不更省**。只有当 `S * L(n+v)`
# 超过这些对多出的开销，也就是少量 query 面对很长的上下文时，吸收形式才胜出；`S` 越大，分界
# 越接近上面的 171 个 query token。

# %%
show_source(mla_forms_flops)

# %%
qs = [2**k for k in range(0, 14)]  # query tokens of one request in the step
ss = [0] + [2**k for k in range(6, 18)]  # cached context, 0 to 128K
grid = [[mla_forms_flops(V3, q, s)[1] / mla_forms_flops(V3, q, s)[0] for q in qs] for s in ss]
with lang_fonts(LANG) as plot_lang:  # Chinese where a font has the glyphs, else English
    tp = words(plot_lang)
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="RdBu_r", vmin=0, vmax=2)
    ax.contour(grid, levels=[1.0], colors="black")
    ax.set_xticks(range(len(qs)), [str(q) for q in qs], fontsize=7, rotation=45)
    ax.set_yticks(range(len(ss)), [str(s) for s in ss], fontsize=7)
    ax.set_xlabel(tp("nb3_q_axis"))
    ax.set_ylabel(tp("nb3_context_axis"))
    ax.set_title(tp("nb3_heat_title"), fontsize=10)
    fig.colorbar(im, ax=ax, label=tp("nb3_ratio_bar"))
    fig.tight_layout()
fig

# %% [markdown] en
# The bottom row is a fresh prompt: never below 1 (just above it for a few tokens, where
# the projections dominate, and growing with the prompt). D's first step after a KV
# transfer is the other corner, `q = 1` over `S = N - 1`: deep blue. In between, absorbing
# wins for a few queries over a long context. vLLM 0.33.0's FLASHMLA sends prompts of up
# to 128 tokens down the absorbed path and FLASH_ATTN_MLA (the backend vLLM picks on
# H100/H200 with an auto/bf16 KV cache; it refuses an fp8 cache, and vLLM then picks
# FLASHMLA) up to 512, and the table below costs such fresh prompts both ways: absorbing
# them costs *more* FLOPs. Upstream gives no reason for those thresholds (the comment beside
# them says only "process small prefills with decode pathway"); whatever the reason, it is
# not this count. pdlab's inference, not upstream's word: the decode path reads far fewer
# bytes and launches fewer kernels (section 5's roofline, notebook 5's table), in a kernel
# tuned for it. Notebook 5 runs them.

# %% [markdown] zh
# 最下面一行是新提示词：从不低于 1（token 很少时投影占主导，只略高于 1，提示词越长越高）。KV
# 传输之后 D 的第一步在另一个角上：`S = N - 1` 之上的 `q = 1`，深蓝色。两者之间，少量 query
# 面对长上下文时吸收形式胜出。vLLM 0.33.0 的 FLASHMLA 会把不超过 128 个 token 的提示词送进
# 吸收形式的路径，FLASH_ATTN_MLA（KV 缓存为 auto/bf16 时 vLLM 在 H100/H200 上选择的后端；它不
# 接受 fp8 缓存，这时 vLLM 选 FLASHMLA）则是不超过 512 个；下表按两种方式给这样的新提示词算账：
# 吸收形式的 FLOPs 反而*更多*。对这两个阈值，上游没有给出理由（旁边的注释只有一句
# `process small prefills with decode pathway`）；无论原因是什么，都不是这笔账。pdlab 的推断
# （不是上游的说法）：decode 路径读的字节少得多、启动的算子更少（见第 5 节的 roofline 模型和
# 第 5 篇的表），算子也专为它调过。第 5 篇会实际运行它们。

# %%
rows = []
for q in (29, 128, 512):
    naive, absorbed = mla_forms_flops(V3, q, 0)
    rows.append([q, flops(naive), flops(absorbed), f"{absorbed / naive:.2f}x"])
headers = [t("nb3_fresh_tokens"), t("nb3_naive"), t("nb3_absorbed"), t("nb3_ratio_bar")]
display(HTML(html_table(headers, rows)))
assert all(mla_forms_flops(V3, q, 0)[1] > mla_forms_flops(V3, q, 0)[0] for q in range(1, 4097))
assert mla_forms_flops(V3, 1, 32768)[1] * 50 < mla_forms_flops(V3, 1, 32768)[0]

# %%
rows = []
for q in (1, 16, 170, 1024, 8192):
    nv, ab = flops_per_key(V3, q)
    rows.append([q, flops(nv), flops(ab), t("nb3_absorbed") if ab < nv else t("nb3_naive")])
headers = ["q", t("nb3_naive_per_key"), t("nb3_absorbed_per_key"), t("nb3_cheaper")]
display(HTML(html_table(headers, rows)))
assert flops_per_key(V3, 1)[1] * 100 < flops_per_key(V3, 1)[0]
assert flops_per_key(V3, 8192)[0] < flops_per_key(V3, 8192)[1]

# %% [markdown] en
# ## 5. A roofline
#
# A kernel doing `F` FLOPs while moving `B` bytes cannot run faster than
# `max(F / peak FLOP/s, B / bandwidth)`: its attainable throughput is
# `min(peak, bandwidth x F/B)`. The published peaks, dense bf16 and HBM:
#
# - **H100 SXM and H800 SXM**: 989 TFLOP/s, 3.35 TB/s (NVIDIA's H100 and H800 datasheets;
#   the H800 differs in NVLink, not in these);
# - **H200 SXM**: the same 989 TFLOP/s, 4.8 TB/s (NVIDIA's H200 datasheet): more bandwidth,
#   so a lower ridge;
# - **FlashMLA on H800**, as DeepSeek reports it: up to 3000 GB/s memory-bound and
#   660 TFLOP/s compute-bound for its MLA decode kernel;
# - **this machine**, measured just now: an fp32 matrix product and a large copy.


# %% [markdown] zh
# ## 5. roofline 模型
#
# 一个做 `F` 次 FLOP、搬运 `B` 字节的算子，不可能快于 `max(F / 峰值 FLOP/s, B / 带宽)`：它可达
# 的吞吐是 `min(峰值, 带宽 x F/B)`。公布的峰值（bf16 稠密计算与 HBM）：
#
# - **H100 SXM 和 H800 SXM**：989 TFLOP/s、3.35 TB/s（NVIDIA 的 H100 和 H800 数据手册；H800 的
#   区别在 NVLink，不在这两项）；
# - **H200 SXM**：同样的 989 TFLOP/s、4.8 TB/s（NVIDIA 的 H200 数据手册）：带宽更高，脊点更低；
# - **H800 上的 FlashMLA**，据 DeepSeek 报告：它的 MLA 解码算子在访存受限时可达 3000 GB/s，
#   计算受限时可达 660 TFLOP/s；
# - **本机**，刚刚实测：一次 fp32 矩阵乘和一次大块拷贝。


# %%
ceil = measure_ceilings(torch.device("cpu"), torch.float32)  # pdlab/tools/measure.py
cpu_flops, cpu_bw = ceil["matmul_tflops"] * 1e12, ceil["copy_gbps"] * 1e9
THREADS = torch.get_num_threads()
DEVICES = {  # the device's name (a key of pdlab/catalog/notebooks.py): (peak FLOP/s, bytes/s)
    "nb3_dev_h800": published_peak("H800"),
    "nb3_dev_h200": published_peak("H200"),
    "nb3_dev_flashmla": (660e12, 3.0e12),
    "nb3_dev_cpu": (cpu_flops, cpu_bw),
}
for key, (f, bw) in DEVICES.items():
    name = t(key, threads=THREADS)
    print(t("nb3_device", name=name, tf=f / 1e12, gb=bw / 1e9, ridge=f / bw))

# %% [markdown] en
# Where D's one-token step lands, per layer, for DeepSeek-V3 at a 32k context (the cost
# model of `pdlab.sim.kernel_costs`, bf16), and the absorbed decode attention alone for 1, 2
# and 4 query tokens per request (speculative decoding raises the FLOPs per byte read):

# %% [markdown] zh
# D 那一个 token 的一步落在哪里：DeepSeek-V3、上下文 32k、单层（`pdlab.sim.kernel_costs` 的代价
# 模型，bf16），以及单独的吸收形式解码注意力在每个请求 1、2、4 个 query token 时的位置
# （投机解码提高了每读一字节的 FLOPs）：

# %%
ctx = 32768
points = {  # (name, query tokens): cost
    ("nb3_decode_point", 1): decode_path_cost(V3, ctx),
    ("nb3_prefill_point", 1): prefill_path_cost(V3, ctx),
}
intensity = {name: c.intensity for name, c in points.items()}
for q in (1, 2, 4):
    f, _ = mla_decode_cost([ctx] * q, V3.num_attention_heads, V3.kv_cache_dim, V3.kv_lora_rank)
    # q query tokens of one request share the rows they read: count the rows once (bf16)
    b = 2.0 * (
        ctx * V3.kv_cache_dim + q * V3.num_attention_heads * (V3.kv_cache_dim + V3.kv_lora_rank)
    )
    intensity[("nb3_kernel_point", q)] = f / b

xs = [10 ** (k / 10) for k in range(-10, 41)]
peak_f, peak_bw = DEVICES["nb3_dev_h800"]
with lang_fonts(LANG) as plot_lang:
    tp = words(plot_lang)
    fig = Figure(figsize=(8, 5))
    ax = fig.subplots()
    for key, (f, bw) in DEVICES.items():
        ax.loglog(xs, [min(f, bw * x) for x in xs], label=tp(key, threads=THREADS))
    for ((key, q), i), marker in zip(intensity.items(), "ovs^D"):
        ax.plot([i], [min(peak_f, peak_bw * i)], marker, ms=8, ls="none", label=tp(key, q=q))
    ax.set_xlabel(tp("nb3_intensity_axis"))
    ax.set_ylabel(tp("nb3_attainable_axis"))
    ax.set_title(tp("nb3_roofline_title", ctx=ctx))
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
fig

# %%
rows = [
    [t(key, q=q), f"{i:.1f}", t("nb3_memory") if i < peak_f / peak_bw else t("nb3_compute")]
    for (key, q), i in intensity.items()
]
display(HTML(html_table([t("nb3_what"), "FLOP / byte", t("nb3_bound")], rows)))
ridge = peak_f / peak_bw
assert intensity[("nb3_kernel_point", 1)] < ridge
assert intensity[("nb3_kernel_point", 2)] > ridge

# %% [markdown] en
# The `mla_decode` kernel for one query token reads each 576-value row once for all 128
# heads, at about 240 FLOP per byte: just under the H100/H800 ridge (about 295),
# memory-bound but close, which is why FlashMLA's authors quote both a bandwidth and a
# FLOP/s figure. On an H200 the ridge is about 206 (989 / 4.8), so the same one-token
# kernel is on the compute side there: more bandwidth does not speed it up. Two or four
# query tokens per request (speculative decoding) cross every ridge. The whole decode path
# of one token sits lower, because with a single request the
# absorbed weights `W_UK` and `W_UV` (about 17 MB each per layer in bf16) are read for one
# token; a batch of requests shares them. The prefill path of the same token has a similar
# intensity but does far more of both FLOPs and bytes (notebook 5 has the table).
#
# ## Check yourself
#
# Does the crossover depend on the number of heads? Write down your predictions of its value
# for the tiny model (`kv_lora_rank` 64, nope/rope/v 32/16/32) and for DeepSeek-V2-Lite (16
# heads) in the cell below, then run it.

# %% [markdown] zh
# 一个 query token 的 `mla_decode` 算子把每行 576 个值只读一次、供全部 128 个头使用，约每字节
# 240 FLOP：略低于 H100/H800 的脊点（约 295），访存受限但很接近，所以 FlashMLA 的作者同时给出
# 带宽和 FLOP/s 两个数字。H200 的脊点约为 206（989 / 4.8），同一个单 token 算子在那里落在计算
# 受限的一侧：更高的带宽并不能让它更快。每个请求两个或四个 query token（投机解码）越过
# 所有脊点。一个 token
# 的整条 decode 路径位置更低，因为只有一个请求时，吸收后的权重 `W_UK` 和 `W_UV`（bf16 下每层
# 各约 17 MB）只为一个 token 读取；一批请求会共享它们。同一个 token 的 prefill 路径算术强度
# 相近，但 FLOPs 和字节数都多得多（表格见笔记本 5）。
#
# ## 自测
#
# 临界点和头数有关吗？在下面的单元格里写下你对小模型（`kv_lora_rank` 64，nope/rope/v 为
# 32/16/32）和 DeepSeek-V2-Lite（16 个头）的预测，再运行。

# %%
from pdlab.exercises.notebook_checks import notebook_check

# Your predictions: replace each None, then run this cell. pdlab computes the answers
# and grades yours; they stay hidden until every one is filled in (solution=True
# shows them).
predictions = {
    "crossover_tiny": None,
    "crossover_v2_lite": None,
    "depends_on_heads": None,
}
notebook_check("03", predictions, lang=LANG)
