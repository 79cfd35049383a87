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
# # 2. The scheduler: one number per request, one budget per step
#
# **What you will learn.** vLLM v1's scheduler has no prefill phase and no decode phase.
# Each request carries `num_computed_tokens` (tokens whose K/V are in the cache) and
# `num_tokens` (prompt + outputs so far); every step tries to close the gap, within a
# per-step *token budget*. From that one rule come:
#
# - **chunked prefill**: a long prompt takes several steps, and a token is sampled only
#   when the last chunk is done;
# - **mixed batches**: decodes (one token each) and prompt chunks share a step;
# - **admission**: a waiting request is admitted only when its whole prompt fits in the
#   free blocks (`scheduler_reserve_full_isl`, on by default in vLLM 0.33.0);
# - **preemption**: when blocks run out, the newest running request gives its blocks back
#   and is recomputed later (helped by the prefix cache).
#
# The code is pdlab's `Scheduler` (after `vllm/v1/core/sched/scheduler.py`), driven by a
# real `LLMEngine` on the tiny DeepSeek-style model (kernels on the `torch` backend); what
# you see is read from the engine's trace.

# %% [markdown] zh
# # 2. 调度器：每个请求一个数，每一步一份预算
#
# **你会学到什么。** vLLM v1 的调度器里没有预填充阶段，也没有解码阶段。每个请求带着
# `num_computed_tokens`（K/V 已在缓存里的 token 数）和 `num_tokens`（提示词加上目前为止的输出）；
# 每一步都在一份按步计的 *token 预算*之内，尽量补上两者之差。由这一条规则得出：
#
# - **分块预填充**：长提示词要算好几步，只有最后一块算完时才采样一个 token；
# - **混合批次**：解码（每个一 token）和提示词的分块共用一步；
# - **接纳**：等待中的请求只有当整个提示词放得进空闲块时才被接纳（`scheduler_reserve_full_isl`，
#   vLLM 0.33.0 默认开启）；
# - **抢占**：块不够时，最新的运行中请求交还它的块，之后重新计算（前缀缓存会帮上忙）。
#
# 代码是 pdlab 的 `Scheduler`（仿照 `vllm/v1/core/sched/scheduler.py`），由一个真实的
# `LLMEngine` 在小型 DeepSeek 风格模型上驱动（算子用 `torch` 后端）；你看到的一切都读自
# 引擎的 trace。

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

torch.set_num_threads(1)  # the tiny model's matrices are too small to split across threads

from IPython.display import HTML, display

from pdlab.catalog import words
from pdlab.engine.config import CacheConfig, ModelConfig, SchedulerConfig
from pdlab.engine.core.sched.scheduler import Scheduler
from pdlab.engine.llm_engine import LLMEngine
from pdlab.engine.request import SamplingParams
from pdlab.ui.fmt import show_source
from pdlab.ui.plots import plot_num_computed_tokens
from pdlab.ui.trace_views import timeline_html
from pdlab.ui.widgets import StepPlayer

BACKEND = "torch"
LANG = "en"  # the language of the printed words, the plots and the widgets' labels
t = words(LANG)
TINY = ModelConfig.tiny()

# %% [markdown] en
# ## 1. `num_computed_tokens` is the single source of truth
#
# For each running request, `schedule()` asks for `num_tokens - num_computed_tokens` new
# tokens, cut by the budget left in this step (and by `long_prefill_token_threshold` when
# more than one request is running or waiting), and below `max_model_len`:

# %% [markdown] zh
# ## 1. `num_computed_tokens` 是唯一的依据
#
# 对每个运行中的请求，`schedule()` 申请 `num_tokens - num_computed_tokens` 个新 token，再受
# 本步剩余预算的限制（当运行或等待的请求不止一个时，还受 `long_prefill_token_threshold` 限制），
# 并且不超过 `max_model_len`：

# %%
show_source(Scheduler.schedule, start="# First the RUNNING", end="req_index += 1")

# %%
show_source(Scheduler._cap_new_tokens)

# %% [markdown] en
# and right after scheduling, before the model even runs, it advances the counter, so
# the next step already knows where this request stands:

# %% [markdown] zh
# 而且调度一结束、模型还没运行，它就推进这个计数器，所以下一步已经知道这个请求进行到哪里：

# %%
show_source(Scheduler._update_after_schedule)

# %% [markdown] en
# ## 2. A few requests under a 16-token budget
#
# Three prompts of 19, 24 and 2 tokens, each asking for 4 output tokens, with
# `max_num_batched_tokens=16`. The table shows, per step, what each request got:
# `before → after (+scheduled)`; `*` marks a step that sampled a token for it.

# %% [markdown] zh
# ## 2. 16 个 token 预算下的几个请求
#
# 三个提示词，分别为 19、24 和 2 个 token，各要 4 个输出 token，`max_num_batched_tokens=16`。
# 表格按步列出每个请求得到了什么：`之前 → 之后（+本步调度）`；`*` 表示这一步为它采样了一个 token。

# %%
PROMPTS = ["the quick brown fox", "jumps over the lazy dog!", "hi"]
SP = SamplingParams(max_tokens=4)


def run(cache: CacheConfig, sched: SchedulerConfig) -> tuple[LLMEngine, list[list[int]]]:
    engine = LLMEngine(TINY, cache, sched, backend=BACKEND)
    return engine, [o.output_token_ids for o in engine.generate(PROMPTS, SP)]


chunked, chunked_tokens = run(
    CacheConfig(block_size=4, num_blocks=64), SchedulerConfig(max_num_batched_tokens=16)
)
display(HTML(timeline_html(chunked.tracer, lang=LANG)))

# %% [markdown] en
# Read it row by row. Step 1 spends the whole budget on the first prompt's first 16
# tokens. Step 2 finishes that prompt (3 tokens, and samples its first output), then gives
# the second prompt the 13 tokens left. From then on decodes of one token share steps with
# the rest of the prompts. Nothing in the scheduler says "prefill" or "decode": only
# `num_computed_tokens` against `num_tokens`, and the budget. The checks below are the
# rules, verified on the trace:

# %% [markdown] zh
# 逐行来读。第 1 步把整份预算都花在第一个提示词的前 16 个 token 上。第 2 步算完这个提示词（3 个
# token，并采样出它的第一个输出），再把剩下的 13 个 token 给第二个提示词。此后，每个一 token 的
# 解码和其余提示词共用各步。调度器里没有哪里写着“预填充”或“解码”：只有 `num_computed_tokens`
# 与 `num_tokens` 的比较，以及预算。下面的检查就是这些规则，在 trace 上逐条核对：

# %%
events = chunked.tracer.filter("step", "local")
last_after = {}
for ev in events:
    assert ev["total_num_scheduled_tokens"] <= 16  # the budget holds
    for r in ev["scheduled"]:
        # the counter only moves forward, and picks up where the last step left it
        assert r["num_computed_tokens_before"] == last_after.get(r["req_id"], 0)
        last_after[r["req_id"]] = r["num_computed_tokens_after"]
for s in chunked.tracer.filter("sample", "local"):
    row = next(
        r for r in chunked.tracer.step_rows("local", s["step"]) if r["req_id"] == s["req_id"]
    )
    assert row["num_computed_tokens_after"] == row["num_tokens"]  # sample only when complete
print(t("nb2_rules_hold"))

# %%
plot_num_computed_tokens(chunked.tracer, lang=LANG)

# %% [markdown] en
# ## 3. Chunked prefill and `long_prefill_token_threshold`
#
# A 50-token prompt under a 16-token budget is computed in chunks of 16, 16, 16 and 2.
# `long_prefill_token_threshold` caps a single request's share of a step even when the
# budget has room, so one long prompt cannot crowd out the others. When the long prompt is
# the only request there is nobody to crowd out, and vLLM lifts the cap: below, a short
# prompt arrives with the long one, and the cap holds only while both are there.

# %% [markdown] zh
# ## 3. 分块预填充与 `long_prefill_token_threshold`
#
# 一个 50 个 token 的提示词在 16 个 token 的预算下分成 16、16、16 和 2 四块计算。
# `long_prefill_token_threshold` 限制单个请求在一步里的份额，即使预算还有空余，这样一个长提示词
# 就挤不掉其他请求。当长提示词是唯一的请求时，没有谁会被挤掉，vLLM 便取消这个上限：下面有一个短
# 提示词和长提示词一起到来，上限只在两者都在时才生效。

# %%
long_prompt = "a long prompt is prefilled in chunks, step by step"
assert len(long_prompt) == 50
for threshold in (0, 8):
    eng = LLMEngine(
        TINY,
        CacheConfig(block_size=4),
        SchedulerConfig(max_num_batched_tokens=16, long_prefill_token_threshold=threshold),
        backend=BACKEND,
    )
    long_out, short_out = eng.generate([long_prompt, "a short one"], SamplingParams(max_tokens=1))
    short_done = eng.tracer.first("finish", req_id=short_out.request_id)["step"]
    chunks = [
        (e["step"], r["num_scheduled_tokens"])
        for e in eng.tracer.filter("step")
        for r in e["scheduled"]
        if r["req_id"] == long_out.request_id
    ]
    print(t("nb2_chunks", threshold=threshold, chunks=[n for _, n in chunks], step=short_done))
    assert sum(n for _, n in chunks) == 50
    if threshold:
        assert all(n <= threshold for s, n in chunks if s <= short_done)
        assert max(n for s, n in chunks if s > short_done) > threshold  # alone: no cap

# %% [markdown] en
# ## 4. Preemption
#
# Now the same three prompts with only 11 blocks of 4 slots. As the requests grow, the
# pool runs out; `schedule()` then preempts the most recently admitted running request:
# its blocks are freed, its `num_computed_tokens` drops to 0, and it goes back to the
# front of the waiting queue. When it is admitted again, the prefix cache may still hold
# some of its blocks (a `prefix_hit`), and only the rest is recomputed.

# %% [markdown] zh
# ## 4. 抢占
#
# 现在还是这三个提示词，但只有 11 个块、每块 4 个槽。随着请求增长，块池耗尽；`schedule()` 于是
# 抢占最近被接纳的运行中请求：它的块被释放，`num_computed_tokens` 归零，并回到等待队列的队头。
# 它再次被接纳时，前缀缓存可能还保留着它的部分块（一次 `prefix_hit`），只需重算其余部分。

# %%
tight, tight_tokens = run(
    CacheConfig(block_size=4, num_blocks=11), SchedulerConfig(max_num_batched_tokens=16)
)
display(HTML(timeline_html(tight.tracer, lang=LANG)))
for e in tight.tracer.filter("preempt") + tight.tracer.filter("prefix_hit"):
    details = ", ".join(
        f"{k}={v}" for k, v in e.items() if k not in ("kind", "instance", "step", "req_id")
    )
    print(t("nb2_event", step=e["step"], kind=e["kind"], req=e["req_id"], details=details))
assert tight.tracer.filter("preempt"), "expected at least one preemption with 11 blocks"

# %% [markdown] en
# Preemption costs time, not correctness: greedy decoding gives the same tokens as the run
# with plenty of blocks.

# %% [markdown] zh
# 抢占耗费的是时间，不影响正确性：贪心解码得到的 token 与块充足时完全相同。

# %%
print(t("nb2_with", tokens=tight_tokens))
print(t("nb2_without", tokens=chunked_tokens))
assert tight_tokens == chunked_tokens

# %% [markdown] en
# Admission decides how often this happens. With one block fewer (10), the second prompt
# (24 tokens, 6 blocks) does not fit beside the first while that one runs, so by default
# it waits and nothing is preempted. Turn `scheduler_reserve_full_isl` off (an older vLLM
# admitted a request as soon as its *first chunk* fit) and it is admitted early, only to be
# preempted and recomputed:

# %% [markdown] zh
# 接纳策略决定了这种情况出现的频率。再少一个块（10 个），第二个提示词（24 个 token，6 个块）在
# 第一个运行时就放不下，所以默认它会等待，什么也不会被抢占。关掉 `scheduler_reserve_full_isl`
# （较早的 vLLM 只要请求的*第一块*放得下就接纳它），它就会被提前接纳，随后被抢占并重算：

# %%
for reserve in (True, False):
    eng, tokens = run(
        CacheConfig(block_size=4, num_blocks=10),
        SchedulerConfig(max_num_batched_tokens=16, scheduler_reserve_full_isl=reserve),
    )
    admitted = [(e["step"], e["req_id"]) for e in eng.tracer.filter("admit")]
    preempted = len(eng.tracer.filter("preempt"))
    print(t("nb2_admits", reserve=reserve, admitted=admitted, n=preempted))
    assert tokens == chunked_tokens
    assert (preempted == 0) == reserve

# %% [markdown] en
# ## 5. Step through it
#
# The step player reads the same trace: move the slider to see what each step scheduled,
# the path the attention layer took for each request (`forward_mha` or
# `forward_mqa`, notebook 5), the tokens sampled, and the scheduler's events (admit,
# prefix hit, preempt, finish, free).

# %% [markdown] zh
# ## 5. 逐步查看
#
# 步进播放器读的是同一个 trace：拖动滑块，看每一步调度了什么、注意力层为每个请求走了哪条路径
# （`forward_mha` 或 `forward_mqa`，见笔记本 5）、采样出的 token，以及调度器的事件
# （接纳、前缀命中、抢占、完成、释放）。

# %%
player = StepPlayer(tight.tracer, "local", lang=LANG)
player

# %% [markdown] en
# ## Check yourself
#
# Write your predictions in the cell below, then run it: one 50-token prompt, budget 16, no
# threshold, `max_tokens=3`. At which step is its first token sampled, and how many steps
# does the whole request take?

# %% [markdown] zh
# ## 自测
#
# 在下面的单元格里写下你的预测，再运行：一个 50 个 token 的提示词，预算
# 16，不设阈值，`max_tokens=3`。它的第一个 token 在第几步采样，整个请求一共要几步？

# %%
from pdlab.exercises.notebook_checks import notebook_check

# Your predictions: replace each None, then run this cell. pdlab computes the answers
# and grades yours; they stay hidden until every one is filled in (solution=True
# shows them).
predictions = {
    "first_sample_step": None,
    "num_steps": None,
}
notebook_check("02", predictions, lang=LANG)
