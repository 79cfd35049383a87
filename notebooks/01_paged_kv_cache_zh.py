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
# # 1. 分页 KV 缓存
#
# **你会学到什么。** vLLM v1 怎样存放 key 和 value：放在预先分配好的池子里大小固定的*块*中，
# 通过每个请求的*块表*找到它们，再通过*槽映射*写进去。然后是：同一批块如何借助带链式块哈希的
# *前缀缓存*在请求之间复用，释放的块如何按最近最少使用（LRU）的顺序被*驱逐*，以及为什么即使
# `N` 个 token 的提示词已全部缓存，也只能复用其中 `floor((N-1)/B)*B` 个。
#
# pdlab 的类与 vLLM 一一对应：`BlockPool`（`vllm/v1/core/block_pool.py`）、
# `hash_block_tokens`（`vllm/v1/core/kv_cache_utils.py`）和 `KVCacheManager`
# （`vllm/v1/core/kv_cache_manager.py`）。这里用不到模型；写缓存用的是 pdlab 在 `torch`
# 后端上的算子。

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
LANG = "zh"  # the language of the printed words and the widgets' labels
t = words(LANG)

# %% [markdown]
# ## 1. 块
#
# 每一层的缓存都是预先分配的一个张量 `[num_blocks, block_size, row]`（DeepSeek 的 MLA 中一行
# 就是 576 个值的潜向量 `[kv_c | k_pe]`；见笔记本 3）。一个块就是第一维上的一个下标。块池只和
# 块 id 打交道：它从空闲队列的队头把块发出去。释放的块回到哪里，取决于它是否还存着一段已缓存的
# 前缀（第 5 节）：下面这三个块里没有任何可复用的内容，所以回到*队头*，最先被再次发出。请求
# 从尾到头归还自己的块，所以它的最后一个块最先被再次取走。

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
# ## 2. 块表与槽映射
#
# 请求的*块表*按顺序列出它的块：逻辑块 `j` 存放它的第 `j*B .. j*B+B-1` 个 token。块是随着
# 请求增长而分配的，所以两个轮流增长的请求，最后拿到的是相互交错、并不连续的块。位置 `p`
# 的 token 写在*槽* `block_table[p // B] * B + p % B`，也就是写缓存算子使用的扁平下标。

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
# 用 pdlab 的 `reshape_and_cache_mla` 把请求 `a` 的各行写进一个小缓存（这里每一行只是
# `[位置, token id]`，方便看出它落在哪里），再像注意力那样用 `gather_cache` 经块表按顺序
# 读回来。

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
# ## 3. 前缀缓存：用整段前缀给块命名
#
# 一个满块可以被之后任何一个在它*之前和之中*有相同 token 的请求共享，因为一个 token 的 K/V
# 取决于它之前的所有 token。所以一个块的哈希把前一个块的哈希和本块的 token id 串在一起：

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
# 请求到来时，`get_computed_blocks` 沿着它的块哈希一路查，直到第一次未命中，返回已缓存的块；
# 随后 `allocate_slots` 给这些块加一个引用（`ref_cnt` 统计持有该块的请求数），只为其余部分
# 分配新块。

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
# ## 4. 为什么全部命中仍要计算最后一个 token
#
# 把*同一个*提示词发两次。它的每个满块都已缓存，但命中数被限制在 `num_tokens - 1` 个 token，
# 再向下取整到整块：

# %%
show_source(KVCacheManager.get_computed_blocks)

# %% [markdown]
# 至少最后一个提示词 token 必须再过一遍模型：下一个 token 的 logits 由它的最终隐藏状态算出，
# 而任何缓存里都没有这个隐藏状态（笔记本 5 第 2 节在 D 上演示了这一点，同一条规则在那里
# 产生了 `N - 1`）。又因为命中按整块计，包含它的整个块都要重算；当 `N` 是 `B` 的倍数时，
# 这就是整整一块 `B` 个 token。（在 MTP 下且有 KV connector 时，vLLM 还要多丢一块，原因相同：
# 草稿模型需要缓存里没有的东西；见笔记本 5 第 8 节和 `pdlab/engine/core/kv_cache_manager.py`。）

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
# ## 5. LRU 驱逐
#
# 存着已缓存前缀的块被释放后，仍保留其内容和哈希：在块池把它再次发出之前，它都可以被命中。
# 块从空闲队列的队头发出；释放的已缓存块排到队尾，所以最早释放的最先被驱逐（没有哈希的块，
# 比如半满的最后一块，释放后回到队头：没人能命中它，所以最先被复用，如第 1 节所示）。请求
# 从尾到头释放它的块，所以它最后面的块（最不可能被共享）比它的前缀先被驱逐。

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
# ## 6. 动手玩块池
#
# 这个探索器在一个 12 块（块大小 4）的块池上驱动一个真实的 `Scheduler`，配一个没有模型的
# model runner：**添加请求** 把一个提示词放进队列，**执行一步** 跑一次
# `schedule() -> execute_model() -> update_from_output()`（新请求在下一步被接纳，并带上它的
# 前缀命中；之后每个请求每步生成一个 `.`，六步后结束），**释放** 中止一个请求。绿色块被占用
# （`ref` = 持有它的请求数），琥珀色块空闲但仍在缓存中（`#哈希`，`qN` = 在空闲队列中的位置），
# 灰色块空闲。开始时有两个共享 16 个 token 前缀的请求。试试：释放 `r0`，再添加它的提示词并执行
# 一步（琥珀色块上的前缀命中）；不断添加请求直到块池耗尽（事件日志里会出现一次抢占）。

# %%
explorer = BlockPoolExplorer(block_size=4, num_blocks=12, lang=LANG)
explorer.add("the cat sat on the mat")
explorer.step()
explorer.add("the cat sat on the hat")
explorer.step()
explorer

# %% [markdown]
# ## 自测
#
# 在下面的单元格里写下你的预测，再运行：块大小 8。一个 23 个 token 的提示词已全部缓存；又来
# 了一个完全相同的请求。它有多少个 token 被复用，多少个要计算？换成 24 个 token 的提示词呢？

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
