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
# # 7. Could D skip it, and does it matter? Four designs for D's first token
#
# Notebook 5 showed why D runs position `N-1` again: the K/V P sends hold every layer's keys
# and values, not the final hidden state the first logits need. The engines disagree on
# what to do about it, and that is the lesson (vLLM's own open thread on it is
# vllm-project/vllm#25373, a feature request to reuse P's tokenization and first token on D):
#
# - `recompute` (vLLM v1, the default): P sends nothing more; D's first step is position
#   `N-1` over `N-1` cached tokens, still `is_prefilling`;
# - `first_token` (SGLang, TensorRT-LLM): P sends its sampled token; D's first step decodes
#   that token over `N` cached;
# - `append_prompt` (tried for vLLM's example proxy, vllm-project/vllm#50559, closed): P's
#   token is appended to D's prompt, so
#   D's first step is one prompt token over `N`, still `is_prefilling`;
# - `hidden_state` (after vLLM V0's `SimpleConnector`, which sent the hidden states of every
#   prompt position; pdlab sends the last one only): P sends `h[N-1]` after the final norm;
#   D computes token 1 with `lm_head` alone, in the step its K/V land, then decodes.
#
# **What you will learn.** Each design gives the same tokens as a colocated run; what each
# moves, what D computes before token 1 is known, and where it is known; why the first two
# rows differ only under prefill context parallelism (PCP); and, with a step-level
# simulator of D driven by the same cost model, what an arriving request's first step
# costs the whole decode batch under Model Runner V2's default, under PCP, under DCP (both
# opt-in settings, on either role) and under V1, without speculative decoding
# and with DeepSeek's MTP, at DeepSeek-V3's widths on an H200 profile. Everything runs on a
# CPU in seconds.

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

LANG = "en"  # the language of the tables' and widgets' labels
TINY = ModelConfig.tiny()
BS = 4
console = Console(width=100)

# %% [markdown]
# ## The four designs, run
#
# Seeded random prompts whose lengths sit on the block-size edges (`N < B`, `N = B`,
# `N = 3B`, `N = 3B + 1`), each through a P/D pair once per design and through a colocated
# engine. The table is read off the trace: the `first_token` event each request gets
# (`pdlab/disagg/designs.py`), with the bytes the transfer measured.

# %%
rng = random.Random(7)
PROMPTS = [[rng.randrange(TINY.vocab_size) for _ in range(n)] for n in (3, BS, 3 * BS, 3 * BS + 1)]
traces = {}
rows = compare_designs(PROMPTS, TINY, CacheConfig(block_size=BS), traces=traces)
console.print(designs_table(rows, lang=LANG))
assert all(r["same_as_colocated"] for r in rows)

# %% [markdown]
# What the proxy does with P's answer under each design is one function; here it is, as
# it runs (for `append_prompt` the proxy also shortens `max_tokens` by one and puts P's
# token before D's answer):

# %%
show_source(hand_off)

# %% [markdown]
# ## What D holds against what token 1 needs
#
# For the longest prompt, a layers x positions grid per design, drawn from each run's
# trace: blue is the K/V that landed from P, orange what D's first step computed, the
# hatch what token 1 needs (every layer's K/V of `0..N-1`, and the final hidden state of
# `N-1`, the top row). Recompute rewrites column `N-1`; the others start at column `N`.
# Then the timeline of that request, proxy -> P -> transfer -> D, with D's steps shaded by
# `decode_graph_eligible`, under the default and under PCP.

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
# ## What a design cannot honour
#
# When P samples the token D continues from, both sides would need one sampler state;
# pdlab seeds each runner's generator apart, so those designs are greedy only, and say so
# in one line before any work. (pdlab's `SamplingParams` has no logprobs, penalties or
# speculative decoding; upstream's would have to run on P, or travel with the token.)

# %%
for mode in MODES:
    try:
        check_first_token_mode(mode, SamplingParams(temperature=0.8, seed=1))
        print(text(LANG, "nb7_accepted", mode=mode))
    except ValueError as e:
        print(error_text(e, LANG))

# %% [markdown]
# ## What the short extend costs the whole batch
#
# On D every arriving request's first step lands in a batch of running decodes. `pdlab sim`
# replays that step by step for DeepSeek-V3 as deployed: fp8 weights, DeepSeek's 144-GPU
# decode instance with the routed experts expert parallel and attention data parallel, the
# batch one GPU's, the experts' all-to-all overlapped with compute by two micro-batches as
# DeepSeek's decode does (the table's caption states every assumption): 64 decodes over
# 4K tokens, Poisson arrivals of 4K-token prompts, each step's split made by the engine's
# own `gather_batch_req_state` and `split_decodes_and_prefills`, each
# step's time the roofline of its kernel groups (`pdlab/sim/kernel_costs.py`) on a
# published H200 profile, plus a named launch overhead when the full decode graph is lost.
# Under V2's default the arriving row is `prefill_runs_as_decode`; under PCP it becomes a
# `forward_mha` row; under DCP it stays a decode. The second table is the same grid with
# MTP (`K = 1`, DeepSeek-V3's published acceptance rate): every row verifies `1 + K`
# tokens, D's first row is padded with `K` placeholder drafts and is still
# `prefill_runs_as_decode`.

# %%
H200 = device_profile("H200")
sim_rows, sim_runs = run_grid(SimConfig(), ModelConfig.deepseek_v3(), H200, "h200")
console.print(sim_table(sim_rows, H200, LANG))
display(plot_tpot(sim_rows))
mtp_rows, _ = run_grid(MTP_BASE, ModelConfig.deepseek_v3(), H200, "h200", routings=MTP_ROUTINGS)
console.print(sim_table(mtp_rows, H200, LANG))
print(text(LANG, "ch7_answer", **answer_values(sim_rows, mtp_rows)))

# %% [markdown]
# Try it: the design, the routing, the context (log scale, up to 128K tokens), the number
# of running decodes (the absorbed `W_UK`/`W_UV` are read once per batch), the arrival rate
# and the GPU profile. At short contexts PCP's extra row is cheap; at 128K it dominates
# every step an arrival joins.

# %%
SimExplorer(lang=LANG)

# %% [markdown]
# ## Check yourself
#
# Write your predictions in the cell below, then run it: a 9-token prompt, block size 4,
# under PCP. (a) Under `recompute`, what is D's `num_computed_tokens` on its first step?
# (b) Which forward does `append_prompt`'s first step on D run? (c) And `first_token`'s?
# (d) In the simulation above, how many of the four designs kept every PCP step a uniform
# decode batch?

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
