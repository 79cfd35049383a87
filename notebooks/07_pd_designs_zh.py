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

# %% [markdown]
# # 7. D 能省掉这一步吗？要紧吗？——D 的第一个 token 的四种设计
#
# （本篇是第 7 篇的中文版：两篇由同一份源文件生成，代码完全相同。）
#
# 第 5 篇说明了 D 为什么要把位置 `N-1` 再算一遍：P 传来的 K/V 含有每一层的 key 和
# value，却没有第一个 token 的 logits 所需要的最后一层隐藏状态。各家引擎的处理并不相同，
# 这正是本篇要讲的（vLLM 自己对此的公开讨论是 vllm-project/vllm#25373：一个希望在 D 上复用
# P 的分词结果和第一个 token 的功能请求）：
#
# - `recompute`（vLLM v1，默认）：P 不多传；D 的第一步在 `N-1` 个已缓存 token 上算位置
#   `N-1`，仍是 `is_prefilling`；
# - `first_token`（SGLang、TensorRT-LLM）：P 传来采样出的 token；D 的第一步在 `N` 个已缓存
#   token 上把它当作解码；
# - `append_prompt`（在 vLLM 的示例代理上试过，vllm-project/vllm#50559，已关闭）：把 P 的
#   token 追加到 D 的提示词，D 的第一步
#   是 `N` 个之上的一个提示词 token，仍是 `is_prefilling`；
# - `hidden_state`（参照 vLLM V0 的 `SimpleConnector`，它传的是每个提示词位置的隐藏状态；pdlab
#   只传最后一个）：P 传来最终 `norm` 之后的 `h[N-1]`；D 在 K/V 到达的那一步里只用 `lm_head`
#   算出 token 1，然后解码。
#
# **你会学到什么。** 每种设计都与非分离运行给出相同的 token；各自传了多少、D 在 token 1
# 已知之前算了什么、token 1 在哪里已知；为什么前两行只在预填充上下文并行（PCP）下才不同；
# 以及用同一套代价模型驱动的 D 的逐步模拟器：在 Model Runner V2 默认、PCP、DCP（两者都需
# 显式开启，P、D 都能用）与 V1 下，不开投机解码和开启 DeepSeek 的 MTP 时，按 DeepSeek-V3
# 宽度、H200 配置，一个到达请求的第一步让整个解码批次付出多少。全部在 CPU 上几秒跑完。

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
import random

import torch

# The tiny model's matrices are too small to split across threads; one thread is faster.
torch.set_num_threads(1)

from IPython.display import display
from rich.console import Console

from pdlab.catalog import text
from pdlab.disagg.designs import MODES, check_first_token_mode, hand_off
from pdlab.disagg.pair import PDPair
from pdlab.engine.config import CacheConfig, ModelConfig, ParallelConfig, SchedulerConfig
from pdlab.engine.request import SamplingParams
from pdlab.errors import error_text
from pdlab.sim.profiles import device_profile
from pdlab.sim.report import run_grid
from pdlab.sim.simulator import SimConfig
from pdlab.ui.designs_view import compare_designs, designs_table
from pdlab.ui.fmt import show_source
from pdlab.ui.plots_designs import plot_cache_grid, plot_timeline
from pdlab.ui.sim_report import plot_tpot, sim_table
from pdlab.ui.tour_designs import MTP_BASE, MTP_ROUTINGS, answer_values
from pdlab.ui.widgets import SimExplorer

LANG = "zh"  # the language of the tables' and widgets' labels
TINY = ModelConfig.tiny()
BS = 4
console = Console(width=100)

# %% [markdown]
# ## 把四种设计真跑一遍
#
# 用带种子的随机提示词，长度落在块大小的边界上（`N < B`、`N = B`、`N = 3B`、`N = 3B + 1`），
# 每种设计各过一遍 P/D 对，再过一遍非分离引擎。表格从 trace 读出：每个请求都有一个
# `first_token` 事件（`pdlab/disagg/designs.py`），字节数是传输实测的。

# %%
rng = random.Random(7)
PROMPTS = [[rng.randrange(TINY.vocab_size) for _ in range(n)] for n in (3, BS, 3 * BS, 3 * BS + 1)]
traces = {}
rows = compare_designs(PROMPTS, TINY, CacheConfig(block_size=BS), traces=traces)
console.print(designs_table(rows, lang=LANG))
assert all(r["same_as_colocated"] for r in rows)

# %% [markdown]
# 代理在每种设计下怎样处理 P 的结果，都在一个函数里；下面是它的真实源码（`append_prompt`
# 时代理还把 `max_tokens` 减一，并把 P 的 token 放在 D 的结果之前）：

# %%
show_source(hand_off)

# %% [markdown]
# ## D 手里有什么，token 1 需要什么
#
# 取最长的提示词，每种设计画一张“层 x 位置”格子图，全部从 trace 画出：蓝色是从 P 传来的
# K/V，橙色是 D 的第一步算的，斜线是 token 1 需要的（`0..N-1` 每一层的 K/V，以及 `N-1` 的
# 最后一层隐藏状态，即最上面一行）。recompute 重写第 `N-1` 列，其余设计从第 `N` 列开始。
# 然后是这个请求的时间线：代理 -> P -> 传输 -> D，D 的每一步按 `decode_graph_eligible` 着色，
# 分别是默认设置与 PCP。

# %%
display(plot_cache_grid(traces, "req-3", LANG))
display(plot_timeline(traces["recompute"], "req-3", LANG))
pcp = PDPair(
    TINY,
    CacheConfig(block_size=BS),
    SchedulerConfig(),
    backend="torch",
    parallel_config=ParallelConfig(prefill_context_parallel_size=2),
)
pcp.generate(PROMPTS, SamplingParams(max_tokens=4))
display(plot_timeline(pcp.tracer, "req-3", LANG))

# %% [markdown]
# ## 设计做不到的事
#
# 当 P 采样出 D 要接着往下生成的 token 时，两边需要共享同一个采样器状态；pdlab 的两个 model runner
# 各自播种，所以这些设计只支持贪心解码，并在开始工作前用一行说明。（pdlab 的
# `SamplingParams` 没有 `logprobs`、惩罚项或投机解码；上游的这些功能要么在 P 上算，要么随 token
# 一起传。）

# %%
for mode in MODES:
    try:
        check_first_token_mode(mode, SamplingParams(temperature=0.8, seed=1))
        print(text(LANG, "nb7_accepted", mode=mode))
    except ValueError as e:
        print(error_text(e, LANG))

# %% [markdown]
# ## 短 extend 让整个批次付出多少
#
# 在 D 上，每个到达请求的第一步都落进一批正在解码的请求里。`pdlab sim` 按 DeepSeek-V3 的实际
# 部署逐步重放：fp8 权重，DeepSeek 的 144 块 GPU 解码实例，路由专家按专家并行、注意力按数据并行，
# 批次是一块 GPU 的，专家的全对全通信按 DeepSeek 解码的做法用两个微批次与计算重叠（每条假设见
# 表格的说明）：64 个解码请求、上下文
# 4K token，泊松到达的 4K token 提示词；每一步如何拆分由引擎自己的
# `gather_batch_req_state` 与 `split_decodes_and_prefills` 决定，每一步的时间是各组算子在
# 公开的 H200 参数上按 roofline 模型算出的下限（`pdlab/sim/kernel_costs.py`），失去完整的
# decode CUDA graph 时再加上一项注明出处的启动开销。V2 默认下到达的那一行是
# `prefill_runs_as_decode`；PCP 下它变成 `forward_mha` 行；DCP 下它仍是 decode 行。第二张表
# 是开启 MTP（`K = 1`，DeepSeek-V3 公布的接受率）的同一组模拟：每行验证 `1 + K` 个 token，
# D 的第一行补上 `K` 个占位草稿后仍是 `prefill_runs_as_decode`。

# %%
H200 = device_profile("H200")
sim_rows, sim_runs = run_grid(SimConfig(), ModelConfig.deepseek_v3(), H200, "h200")
console.print(sim_table(sim_rows, H200, LANG))
display(plot_tpot(sim_rows))
mtp_rows, _ = run_grid(MTP_BASE, ModelConfig.deepseek_v3(), H200, "h200", routings=MTP_ROUTINGS)
console.print(sim_table(mtp_rows, H200, LANG))
print(text(LANG, "ch7_answer", **answer_values(sim_rows, mtp_rows)))

# %% [markdown]
# 动手试试：设计、路由、上下文（对数刻度，最长 128K token）、运行中的解码数（吸收后的
# `W_UK`/`W_UV` 每批只读一次）、到达率和 GPU 配置。上下文短时 PCP 多出的那一行很便宜；到 128K
# 时，它主导了每个有请求到达的步。

# %%
SimExplorer(lang=LANG)

# %% [markdown]
# ## 自测
#
# 在下面的单元格里写下你的预测，再运行：9 个 token 的提示词，块大小 4，开启 PCP。(a) 在
# `recompute` 下，D 第一步的 `num_computed_tokens` 是多少？(b) `append_prompt` 在 D 上的第一步
# 跑哪个前向（`forward_mqa` 还是 `forward_mha`）？(c) `first_token` 呢？(d) 在上面的模拟里，
# 四种设计中有几个让 PCP 下的每一步
# 都保持为均匀解码批次？

# %%
from pdlab.exercises.notebook_checks import notebook_check

# Your predictions: replace each None, then run this cell. pdlab computes the answers
# and grades yours; they stay hidden until every one is filled in (solution=True
# shows them).
predictions = {
    "a_recompute_computed": None,
    "b_append_prompt_forward": None,
    "c_first_token_forward": None,
    "d_uniform_designs": None,
}
notebook_check("07", predictions, lang=LANG)
