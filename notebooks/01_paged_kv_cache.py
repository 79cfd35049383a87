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
# # 1. The paged KV cache
#
# **What you will learn.** How vLLM v1 stores keys and values: in fixed-size *blocks* of a
# preallocated pool, found through a per-request *block table*, written through a
# *slot mapping*. Then how the same blocks are reused across requests by *prefix caching*
# with chained block hashes, how freed blocks are *evicted* least recently used first, and
# why even a fully cached prompt of `N` tokens reuses only `floor((N-1)/B)*B` of them.
#
# pdlab's classes mirror vLLM's: `BlockPool` (`vllm/v1/core/block_pool.py`),
# `hash_block_tokens` (`vllm/v1/core/kv_cache_utils.py`) and `KVCacheManager`
# (`vllm/v1/core/kv_cache_manager.py`). Nothing here needs a model; the cache writes use
# pdlab's kernels on the `torch` backend.

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
import torch

torch.set_num_threads(1)  # tiny tensors: one thread avoids thread-pool overhead

from IPython.display import HTML, display

from pdlab.catalog import words
from pdlab.engine.config import CacheConfig
from pdlab.engine.core.block_pool import BlockPool
from pdlab.engine.core.kv_cache_manager import KVCacheManager
from pdlab.engine.core.kv_cache_utils import hash_block_tokens, hash_request_tokens
from pdlab.engine.request import Request, SamplingParams
from pdlab.engine.tokenizer import encode
from pdlab.kernels import gather_cache, reshape_and_cache_mla
from pdlab.ui.fmt import html_table, show_source
from pdlab.ui.widgets import BlockPoolExplorer

BACKEND = "torch"
LANG = "en"  # the language of the printed words and the widgets' labels
t = words(LANG)

# %% [markdown]
# ## 1. Blocks
#
# Every layer's cache is one tensor allocated up front, `[num_blocks, block_size, row]`
# (for DeepSeek's MLA a row is the 576-value latent `[kv_c | k_pe]`; notebook 3). A block is
# an index into the first dimension. The pool only deals in block ids: it hands them out
# from the front of a free queue. Where a freed block goes back depends on whether it
# still holds a cached prefix (section 5): these three hold nothing anyone could reuse, so
# they go back to the *front*, to be handed out again first. A request gives its blocks
# back tail first, so its last block is the next one out.

# %%
pool = BlockPool(num_blocks=8)
taken = pool.get_new_blocks(3)
print(t("nb1_taken", ids=taken))
print(t("nb1_free_queue", ids=[b.block_id for b in pool.free_block_queue]))
pool.free_blocks(reversed(taken))  # a request gives its blocks back tail first
print(t("nb1_after_free", ids=[b.block_id for b in pool.free_block_queue]))
never_used = [3, 4, 5, 6, 7]
assert [b.block_id for b in pool.free_block_queue] == [2, 1, 0] + never_used
assert [b.block_id for b in pool.get_new_blocks(2)] == [2, 1]

# %% [markdown]
# ## 2. Block tables and slot mapping
#
# A request's *block table* lists its blocks in order: logical block `j` holds its tokens
# `j*B .. j*B+B-1`. Blocks are allocated as the request grows, so two requests that grow
# in turn end up with interleaved, non-contiguous blocks. Token position `p` is written at
# *slot* `block_table[p // B] * B + p % B`, the flat index the cache-write kernel uses.

# %%
B = 4
mgr = KVCacheManager(CacheConfig(block_size=B, num_blocks=12), max_model_len=64)
a = Request("a", encode("hello!"), SamplingParams(max_tokens=8))
b = Request("b", encode("world"), SamplingParams(max_tokens=8))
mgr.allocate_slots(a, a.num_tokens)
a.num_computed_tokens = a.num_tokens
mgr.allocate_slots(b, b.num_tokens)
b.num_computed_tokens = b.num_tokens
a.append_output_token_ids(encode(" bye"))  # pretend a decoded four tokens
mgr.allocate_slots(a, 4)
a.num_computed_tokens = a.num_tokens

table_a = mgr.get_block_ids("a")
slot_mapping = [table_a[p // B] * B + p % B for p in range(a.num_tokens)]
print(t("nb1_tables", a=table_a, b=mgr.get_block_ids("b")))
print(t("nb1_slots", slots=slot_mapping))
assert table_a == [0, 1, 4] and mgr.get_block_ids("b") == [2, 3]

# %% [markdown]
# Write request `a`'s rows into a small cache with pdlab's `reshape_and_cache_mla` (each
# row here is just `[position, token id]`, so you can see where it landed), then read them
# back in order through the block table with `gather_cache`, as attention does.

# %%
cache = torch.full((12, B, 2), -1.0)
rows_c = torch.arange(a.num_tokens, dtype=torch.float32)[:, None]  # "kv_c": position
rows_pe = torch.tensor(a.all_token_ids, dtype=torch.float32)[:, None]  # "k_pe": token id
reshape_and_cache_mla(rows_c, rows_pe, cache, torch.tensor(slot_mapping), backend=BACKEND)
grid = [
    [blk] + [int(cache[blk, s, 0]) if cache[blk, s, 0] >= 0 else "" for s in range(B)]
    for blk in range(6)
]
display(HTML(html_table([t("nb_block")] + [t("nb_slot", s=s) for s in range(B)], grid)))
back = gather_cache(
    cache,
    torch.tensor([table_a], dtype=torch.int32),
    torch.tensor([0, a.num_tokens], dtype=torch.int32),
    backend=BACKEND,
)
print(t("nb1_read_back", pos=back[:, 0].int().tolist()))
assert back[:, 0].int().tolist() == list(range(a.num_tokens))

# %% [markdown]
# ## 3. Prefix caching: blocks named by their whole prefix
#
# A full block can be shared by any later request with the same tokens *before and in* it,
# because a token's K/V depend on every token before it. So a block's hash chains the hash
# of the previous block with the block's own token ids:

# %%
show_source(hash_block_tokens)

# %%
abcd = encode("abcd")
first = hash_block_tokens(None, abcd)
after_xxxx = hash_block_tokens(hash_block_tokens(None, encode("xxxx")), abcd)
print(t("nb1_hashes", a=first.hex()[:12], b=after_xxxx.hex()[:12]))
assert first != after_xxxx
cat = "the cat sat on the mat"
hashes = hash_request_tokens(B, encode(cat), [])
print(t("nb1_hashed", text=cat, n=len(cat), full=len(hashes)))

# %% [markdown]
# When a request arrives, `get_computed_blocks` walks its block hashes until the first
# miss and returns the cached blocks; `allocate_slots` then takes a reference on them
# (`ref_cnt` counts the requests holding a block) and allocates only the rest.

# %%
mgr = KVCacheManager(CacheConfig(block_size=B, num_blocks=12), max_model_len=64)
r1 = Request("r1", encode("the cat sat on the mat"))
mgr.allocate_slots(r1, r1.num_tokens)  # full blocks are hashed as they are allocated
r1.num_computed_tokens = r1.num_tokens
r2 = Request("r2", encode("the cat sat on the hat"))
hit_blocks, hit_tokens = mgr.get_computed_blocks(r2)
mgr.allocate_slots(r2, r2.num_tokens - hit_tokens, hit_tokens, hit_blocks)
print(t("nb1_r2", n=hit_tokens, blocks=[blk.block_id for blk in hit_blocks]))
print("r1:", mgr.get_block_ids("r1"), " r2:", mgr.get_block_ids("r2"))
print("ref_cnt:", {blk.block_id: blk.ref_cnt for blk in mgr.block_pool.blocks if blk.ref_cnt})
assert hit_tokens == 16 and all(blk.ref_cnt == 2 for blk in hit_blocks)

# %% [markdown]
# ## 4. Why a full hit still computes the last token
#
# Send the *same* prompt twice. Every full block of it is cached, yet the hit is capped at
# `num_tokens - 1` tokens, rounded down to whole blocks:

# %%
show_source(KVCacheManager.get_computed_blocks)

# %% [markdown]
# At least the last prompt token must run through the model again: the next token's
# logits come from its final hidden state, which no cache holds (notebook 5, section 2,
# shows it on D, where the same rule makes the `N - 1`). Since hits are whole blocks, the
# whole block containing it is recomputed; when `N` is a multiple of `B` that is a full
# block of `B` tokens. (Under MTP behind a KV connector vLLM drops one block more, for the
# same reason: the drafter needs what the cache does not hold; notebook 5, section 8, and
# `pdlab/engine/core/kv_cache_manager.py`.)

# %%
rows = []
for n in range(1, 14):
    mgr = KVCacheManager(CacheConfig(block_size=B, num_blocks=12), max_model_len=64)
    ids = encode("abcdefghijklm"[:n])
    first_req = Request("first", ids)
    mgr.allocate_slots(first_req, n)
    _, hit = mgr.get_computed_blocks(Request("again", ids))
    rows.append([n, n // B, hit, (n - 1) // B * B, n - hit])
    assert hit == (n - 1) // B * B
display(
    HTML(
        html_table(
            ["N", t("nb1_h_full"), t("nb1_h_reused"), "floor((N-1)/B)*B", t("nb1_h_computed")],
            rows,
        )
    )
)

# %% [markdown]
# ## 5. LRU eviction
#
# A freed block that holds a cached prefix keeps its contents and its hash: it can still
# be hit until the pool hands it out again. Blocks are handed out from the front of the
# free queue; freed cached blocks join the back, so the least recently freed is evicted
# first (a freed block with no hash, like a half-filled last block, goes to the front
# instead: nobody can hit it, so it is reused first, as in section 1). A request frees its
# blocks tail first, so its last blocks (least likely to be shared) go before its prefix.

# %%
mgr = KVCacheManager(CacheConfig(block_size=B, num_blocks=6), max_model_len=64)
reqs = {}
for rid, text in (("x", "aaaabbbb"), ("y", "ccccdddd")):
    reqs[rid] = Request(rid, encode(text))
    mgr.allocate_slots(reqs[rid], 8)
    reqs[rid].num_computed_tokens = 8
mgr.free(reqs["x"])
mgr.free(reqs["y"])


def queue(m):
    return [
        f"{blk.block_id}{'*' if blk.block_hash else ''}" for blk in m.block_pool.free_block_queue
    ]


print(t("nb1_queue_cached", q=queue(mgr)))
z = Request("z", encode("zzzzzzzzzz"))
mgr.allocate_slots(z, z.num_tokens)  # needs 3 blocks: the two never used, then block 1
print(t("nb1_z_took", ids=mgr.get_block_ids("z"), q=queue(mgr)))
_, hit_x = mgr.get_computed_blocks(Request("x2", encode("aaaabbbb!")))
_, hit_y = mgr.get_computed_blocks(Request("y2", encode("ccccdddd!")))
print(t("nb1_again", x=hit_x, y=hit_y))
assert mgr.get_block_ids("z") == [4, 5, 1] and (hit_x, hit_y) == (4, 8)

# %% [markdown]
# ## 6. Play with the pool
#
# The explorer drives a real `Scheduler` over a 12-block pool (block size 4) with a runner
# that has no model: **add request** queues a prompt, **step** runs one
# `schedule() -> execute_model() -> update_from_output()` (a new request is admitted, with
# its prefix hit, at the next step; every request then generates one `.` per step and
# finishes after six), **free** aborts a request. Green blocks are held (`ref` = how many
# requests), amber ones are free but still cached (`#hash`, `qN` = place in the free queue),
# grey ones are free. It starts with two requests that share a 16-token prefix. Try: free
# `r0`, add its prompt again and step (a prefix hit on the amber blocks); add requests until
# the pool runs out (a preemption appears in the event log).

# %%
explorer = BlockPoolExplorer(block_size=4, num_blocks=12, lang=LANG)
explorer.add("the cat sat on the mat")
explorer.step()
explorer.add("the cat sat on the hat")
explorer.step()
explorer

# %% [markdown]
# ## Check yourself
#
# Write your predictions in the cell below, then run it: block size 8. A 23-token prompt is
# fully cached; an identical request arrives. How many of its tokens are reused, and how
# many computed? The same for a 24-token prompt?

# %%
from pdlab.exercises.notebook_checks import notebook_check

# Your predictions: replace each None, then run this cell. pdlab computes the answers
# and grades yours; they stay hidden until every one is filled in (solution=True
# shows them).
predictions = {
    "reused_23": None,
    "computed_23": None,
    "reused_24": None,
    "computed_24": None,
}
notebook_check("01", predictions, lang=LANG)
