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

# %% [markdown]
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

# %%
N = 11  # prompt length in tokens (the byte tokenizer: one ASCII character, one token)
prompt = prompt_of_length(N)
pair = PDPair(TINY, CacheConfig(block_size=4), SchedulerConfig(), backend=BACKEND)
out = pair.generate(prompt, SamplingParams(max_tokens=4))[0]
print(t("nb5_generated", p=repr(prompt), n=N, ids=out.output_token_ids), end=" ")
print(printable(out.output_token_ids))
trace_panels(pair.tracer, lang=LANG)
print(routing_reason(pair.tracer.meta["routing"]["D"], LANG))

# %% [markdown]
# P computed all `N` tokens in one step. D allocated blocks, waited for P's K/V
# (`waiting_for_remote_kvs`, then `kv_transfer`), and when they had landed
# (`remote_kv_ready`) it set `num_computed_tokens` to `N - 1`, not `N`:

# %%
ready = pair.tracer.first("remote_kv_ready", "D")
print(
    f"num_computed_tokens_before_adjust = {ready['num_computed_tokens_before_adjust']}, "
    f"num_computed_tokens = {ready['num_computed_tokens']}, N = {N}"
)
assert ready["num_computed_tokens_before_adjust"] == N
assert ready["num_computed_tokens"] == N - 1

# %% [markdown]
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

# %%
show_source(Scheduler._update_waiting_for_remote_kv)

# %% [markdown]
# ## 2. What crossed the wire, and what did not
#
# Step the pair by hand and stop right after D received P's blocks, before D has computed
# anything. D's paged cache (one tensor per layer, `[num_blocks, block_size, 80]`, unused
# slots hold NaN) now holds a latent row `[kv_c_normed | k_pe]` for every prompt position
# in every layer. Read them through D's block table with the same `gather_cache` kernel
# `forward_mha` uses.

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

# %% [markdown]
# So the cache has *everything* about position `N-1` that attention will ever need: its
# latent K/V in every layer. What it does not have is the thing the first output token is
# computed from. The logits are `lm_head(norm(h_last[N-1]))`, where `h_last` is the output
# of the **last** layer (its attention, then its MLP; the final `norm` is applied on the way
# to the logits). A cache row of layer
# `l` is computed from the *input* of layer `l`'s attention, before that layer's attention
# and MLP run, and it is a projection down to 80 values (576 for DeepSeek), not the
# 128-wide (7168) hidden state. No row of any layer is, or can be turned back into,
# `h_last[N-1]`.

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

# %% [markdown]
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

# %% [markdown]
# ## 3. The one-token step, and what routes it
#
# D's first computing step therefore looks like this in the trace. vLLM 0.33.0 runs Model
# Runner V2 by default (`vllm/v1/worker/gpu/model_runner.py`; `VLLM_USE_V2_MODEL_RUNNER=0`
# selects V1), and so does pdlab. Alongside the three counts, the runner recorded V2's
# view of the row: `prefill_len` (every token it was given with the request: the prompt,
# plus the outputs so far after a preemption), `is_prefilling = num_computed_prefill_tokens
# < prefill_len`, `prefill_runs_as_decode` and the step's `decode_graph_eligible`:

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

# %% [markdown]
# V2 names this row in its own code. Its comment says that one new prompt token over
# existing context runs as a decode, and the step then stays `decode_graph_eligible`: a
# uniform decode batch, the one a full decode CUDA graph replays
# (`get_uniform_decode_token_count`). pdlab's copy of the rule (upstream:
# `GPUModelRunner.gather_batch_req_state`; pdlab records the flag but captures no graphs):

# %%
show_source(gather_batch_req_state, 'if model_runner == "v2" and has_prefill', "eligible = all(")

# %% [markdown]
# One new token, like a decode; the prompt not finished, like a prefill: upstream calls it
# a *short extend*. V2 orders the batch with the one-token rows first, then by query
# length (`sort_batch_req_ids`; V1 sorts into four regions, decode → short_extend →
# long_extend → prefill), and the MLA builder then calls
# `split_decodes_and_prefills` to find where the decodes end. pdlab's version of that
# function, with upstream's arguments:

# %%
show_source(split_decodes_and_prefills)

# %% [markdown]
# `is_prefilling` is read only when `treat_short_extends_as_decodes` is False. Who decides
# that? The MLA builder (`vllm/model_executor/layers/attention/mla_attention.py`) passes
# `treat_short_extends_as_decodes = not use_pcp`, where `use_pcp` means
# `prefill_context_parallel_size > 1`, and `decode_threshold` = its backend's
# `reorder_batch_threshold`. pdlab's builder makes the same two choices:

# %%
show_source(MLAMetadataBuilder.__init__, "profile = attn.profile", "self.use_pcp")
show_source(MLAMetadataBuilder.build, "split_decodes_and_prefills(", ")")

# %% [markdown]
# So the answer to question 3 depends on one setting. Build the metadata of D's step both
# ways (pdlab does not implement context parallelism; it reproduces only this routing
# consequence of `prefill_context_parallel_size`):

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

# %% [markdown]
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

# %%
show_source(pcp_rank_chunks)
d_batch = [("dec-a", 1, False), ("dec-b", 1, False), (first["req_id"], 1, True)]
layout = pcp_layout(d_batch, 2)  # pdlab/ui/tour_route.py, over pcp_rank_chunks
rows = [[f"rank {r}", cells] for r, cells in enumerate(layout)]
display(HTML(html_table([t("nb5_col_rank"), t("nb5_col_rank_rows")], rows)))
assert layout == [f"dec-a[0:1], {first['req_id']}[0:1]*", "dec-b[0:1]"]

# %% [markdown]
# With prefill context parallelism the answer to question 3 is yes: D runs
# `forward_mha` (the question's `_forward_prefill`) for that one token. Here is the path,
# as pdlab's `MLAAttention` (after vLLM's `MLACommonImpl`) writes it:

# %%
show_source(MLAAttention.forward_mha)

# %% [markdown]
# For one query token over `N-1` cached tokens that means: up-project the new token
# (`kv_b_proj`), attend to itself, then `_compute_prefill_context`: gather all `N-1`
# latent rows from the paged cache, up-project every one of them through `kv_b_proj` into
# per-head keys and values, attend without a mask, and merge the two partial results by
# their log-sum-exp. Run the pair under V2, V2 with PCP 2, and V1, and compare D's first
# step, kernel by kernel (layer 0; the other layers call the same):

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

# %% [markdown]
# Two pictures drawn from these three traces (notebook 7 draws them for four designs of
# D's first token): what D's cache holds when its first step starts against what token 1
# needs (every layer's K/V of positions `0..N-1`, and the final hidden state of `N-1`, the
# top row), and each run as a timeline, D's steps shaded by `decode_graph_eligible`: under
# V2 and V1 D's first step keeps the decode graph, under PCP it loses it.

# %%
rid = routes[V2_RUN]["req_id"]
display(plot_cache_grid({label: tr for label, (tr, _) in runs.items()}, rid, LANG))
display(plot_timeline(runs[PCP_RUN][0], rid, LANG))
assert not routes[PCP_RUN]["decode_graph_eligible"]

# %% [markdown]
# The names in the question are older vLLM's. Where they live in 0.33.0 (files under
# `vllm/`; the tour prints the same table, from `pdlab/ui/tour_route.py`):

# %%
renames = [list(r) for r in RENAMES]
display(HTML(html_table([t("nb5_col_old"), "vLLM 0.33.0", t("nb5_col_file")], renames)))

# %% [markdown]
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

# %%
tn_attn = AttentionConfig("flash_attn_mla", "h200")
then_and_now_section(Console(width=100), LANG, N, BS, tn_attn)
tn = {r.rule.key: r for r in then_and_now(N, BS, tn_attn)}
assert [k for k, r in tn.items() if r.premise_holds] == ["pcp", "ascend_cp"]
assert tn["v0111"].path == tn["default"].path == tn["ascend_fix"].path == "decode"

# %% [markdown]
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

# %% [markdown]
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

# %% [markdown]
# ## 5. Both paths give the same token
#
# MLA's two forms are algebraically equal (notebook 3), so the setting changes the cost,
# not the answer. Compare both P/D runs with a colocated engine and with the model's own
# slow oracle (a full forward from scratch for every token):

# %%
colocated = LLMEngine(TINY, CacheConfig(block_size=BS), SchedulerConfig(), backend=BACKEND)
col_tokens = colocated.generate(prompt, SamplingParams(max_tokens=4))[0].output_token_ids
oracle = model.greedy_generate(ids.tolist(), 4)
for label, (_, toks) in runs.items():
    print(t("nb5_tokens_pd", label=label, toks=toks))
print(t("nb5_tokens_colocated", toks=col_tokens))
print(t("nb5_tokens_oracle", toks=oracle))
assert all(toks == col_tokens == oracle for _, toks in runs.values())

# %% [markdown]
# ## 6. What each costs
#
# Each kernel in the trace carries modelled FLOPs and bytes (matrix products at `2MNK`
# FLOPs; each operand read once, each result written once, at the tensors' own dtype:
# fp32 for the tiny model here). Summed over D's first step:

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

# %% [markdown]
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

# %% [markdown]
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

# %%
explorer = PDExplorer(prompt_len=N, block_size=BS, pcp=1, preset="deepseek-v3", lang=LANG)
explorer

# %% [markdown]
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

# %% [markdown]
# The padding, pdlab's copy of upstream's waiting-loop block (in
# `pdlab/engine/core/sched/scheduler.py`, the section of the scheduler's speculative-decoding
# methods):

# %%
show_source(Scheduler._pad_spec_decode)

# %% [markdown]
# Why the padded row is still a decode: the subtraction in `gather_batch_req_state` (the
# excerpt in section 3 shows it: `new = [qi - di ...]`), and the threshold, raised to
# `1 + K` for builders that are not SINGLE_ONLY (FLASH_ATTN_MLA's 512 is already above it;
# TRITON_MLA's 1 becomes `1 + K`; CPU_MLA and CUTLASS_MLA stay at 1, so there every `1 + K`
# verifying row takes `forward_mha`, the padded one among them):

# %%
show_source(type(H200.profile).effective_threshold)
for name in ("triton_mla", "flashmla", "flash_attn_mla", "cpu_mla"):
    prof = AttentionConfig(backend=name).profile
    print(f"{prof.name}: {prof.reorder_batch_threshold} -> K=1: {prof.effective_threshold(1)}, "
          f"K=2: {prof.effective_threshold(2)}")  # fmt: skip

# %% [markdown]
# The placeholders can never be accepted: the row's step starts inside the prefill
# (`num_computed_tokens < prefill_len`), so every draft counts as `-1`, upstream's rule in
# `vllm/v1/worker/gpu/spec_decode/rejection_sampler.py`. The row produces one token, the
# first output, and `num_computed_tokens` is rolled back over the K rejected positions.
# Then the drafter: its first input is the target's hidden state at the last accepted
# position, on D's first step the recomputed `N - 1`, and the token just sampled there. So
# the recompute that gives the first logits also feeds the drafter (SGLang's P/D instead
# ships P's draft state with the first token, because its D verifies P's drafts at once):

# %%
show_source(gather_draft_sampled)
show_source(MTPProposer.propose, "ids = input_ids.clone()", "out = self.mtp(")
for (k, pcp), tr in spec_traces.items():
    dr = tr.first("draft", "D")
    assert dr["hidden_position"] == N - 1
    print(t("nb5_mtp_drafter", k=k, pcp=pcp, hp=dr["hidden_position"], tok=dr["next_token"],
            drafts=dr["draft_token_ids"]))  # fmt: skip

# %% [markdown]
# Under PCP the padded row is still prefilling, V2 computes no `prefill_runs_as_decode`,
# the builder passes `treat_short_extends_as_decodes = False`, and the row takes
# `forward_mha`; the PCP manager cuts its `1 + K` tokens, placeholders included, across the
# ranks (with two running decodes beside it, drawn for the picture):

# %%
pcp_route = spec_traces[(2, 2)].filter("route", "D")[0]  # D's first step under PCP 2
assert pcp_route["forward"] == "forward_mha" and pcp_route["prefill_runs_as_decode"] is None
layout_rows = [("dec-a", 1, False), ("dec-b", 1, False), ("D", pcp_route["query_len"], True)]
for r, cells in enumerate(pcp_layout(layout_rows, 2)):
    print(f"rank {r}: {cells}")

# %% [markdown]
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

# %% [markdown]
# ## Check yourself
#
# Write your predictions in the cell below, then run it: a 37-token prompt, block size 16,
# `prefill_context_parallel_size = 2`. (a) What is D's `num_computed_tokens` when it first
# computes? (b) Which forward runs? (c) How many latent rows does that step gather per
# layer? (d) If instead the same prompt were fully in a *local* prefix cache, how many of
# its tokens would be reused? (e) Under the `flashmla` profile without PCP, which forward
# does P's first step take?

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
