"""Exercise 2: ``KVCacheManager.get_computed_blocks``: chained block hashes and the
``N - 1`` cap.

Graded against the real method (``pdlab/engine/core/kv_cache_manager.py``, upstream
``vllm/v1/core/kv_cache_manager.py``) on a warmed block pool, then plugged into a colocated
engine's manager for a run of prompts that share prefixes: the prefix hits the scheduler
records, the tokens and the free blocks left after the run must be the unpatched
engine's. A lookup must change nothing: each case also compares the pool's free count and
every block's reference count before and after the learner's call.
"""

from __future__ import annotations

import functools
from typing import Any

from pdlab.engine.config import CacheConfig
from pdlab.engine.core.kv_cache_manager import KVCacheManager
from pdlab.engine.core.kv_cache_utils import hash_block_tokens
from pdlab.engine.request import Request, SamplingParams
from pdlab.exercises import engine_runs as er
from pdlab.exercises.base import Exercise, Grader, Words, patched
from pdlab.exercises.bilingual import slip

BS = er.BLOCK_SIZE


def _lookup(mgr: KVCacheManager, tokens: list[int], max_blocks: int, chain: bool = True,
            skip: bool = False):  # fmt: skip
    """A known mistake's answer: at most ``max_blocks`` blocks, hashes chained or not, a
    miss ending the lookup or (``skip``) passed over."""
    ids, parent = [], None
    for i in range(max(max_blocks, 0)):
        block_tokens = tokens[i * BS : (i + 1) * BS]
        if len(block_tokens) < BS:
            break
        parent = hash_block_tokens(parent if chain else None, block_tokens)
        block = mgr.block_pool.get_cached_block(parent, block_tokens)
        if block is None and skip:
            continue
        if block is None:
            break
        ids.append(block.block_id)
    return ids, len(ids) * BS


def _pool_state(mgr: KVCacheManager) -> tuple[int, tuple[int, ...]]:
    """The free block count and every block's reference count: what a lookup must leave."""
    pool = mgr.block_pool
    return pool.get_num_free_blocks(), tuple(b.ref_cnt for b in pool.blocks)


def _warm(cached: list[list[int]], evict: tuple[int, ...] = ()) -> KVCacheManager:
    """A manager whose pool caches the blocks of ``cached``, but for the blocks ``evict``
    names of the first prompt (evicted since, as a full pool evicts: a miss mid-prefix)."""
    mgr = KVCacheManager(CacheConfig(block_size=BS, num_blocks=48), max_model_len=512)
    for i, tokens in enumerate(cached):
        req = Request(f"warm-{i}", tokens)
        mgr.allocate_slots(req, len(tokens))
        mgr.free(req)  # the blocks stay cached, evictable
    parent = None
    for i in range(len(cached[0]) // BS if cached else 0):
        block_tokens = cached[0][i * BS : (i + 1) * BS]
        parent = hash_block_tokens(parent, block_tokens)
        block = mgr.block_pool.get_cached_block(parent, block_tokens)
        if i in evict and block is not None:
            mgr.block_pool._maybe_evict_cached_block(block)
    return mgr


def _random_case(g: Grader, salt: int) -> tuple[Words, list[list[int]], list[int], tuple]:
    """A random lookup: a cached prompt at a block edge or not, a block of it evicted (a
    miss mid-prefix) or not, a query sharing a prefix of it cut anywhere, 1 token long or
    block-aligned or anything."""
    r = g.rng
    n = r.choice((BS, 2 * BS, 3 * BS, 3 * BS + 1, 4 * BS + 2, r.randrange(1, 5 * BS)))
    base = er.prompt_of(n, salt=salt)
    other = [(t + 37 + salt) % 256 for t in er.prompt_of(5 * BS, salt=salt + 1)]
    share = r.choice((0, BS - 1, BS, 2 * BS, n, n, r.randrange(0, n + 1)))
    length = r.choice((1, share, share + 1, (share // BS + 1) * BS, n, r.randrange(1, 5 * BS)))
    query = (base[:share] + other[share:])[: max(length, 1)]
    blocks = n // BS
    evict = tuple(sorted({r.randrange(blocks) for _ in range(r.choice((0, 1, 1, 2)))})) if (
        blocks > 1) else ()  # fmt: skip
    name = Words("ex02_random", cached=n, query=len(query), share=min(share, len(query)),
                 evicted=list(evict))  # fmt: skip
    return name, [base], query, evict


def _engine_run(fn: Any | None, g: Grader, prompts: list[list[int]], together: bool = False):
    """``prompts`` one after the other (or all at once, ``together``, in an engine of 10
    blocks, where one is preempted and looks its prefix up again) with ``fn`` as the
    manager's lookup."""
    engine = er.colocated(cache={"num_blocks": 10} if together else {})
    tracer = engine.tracer
    mgr = engine.scheduler.kv_cache_manager

    error, outs = None, []
    seam = functools.partial(g.call, fn, mgr) if fn is not None else mgr.get_computed_blocks
    with patched(mgr, "get_computed_blocks", seam):
        try:
            if together:
                outs = er.tokens(engine.generate(prompts, SamplingParams(max_tokens=12)))
            for p in [] if together else prompts:
                outs.append(engine.generate(p, SamplingParams(max_tokens=2))[0].output_token_ids)
        except RuntimeError as e:
            error = f"{type(e).__name__}: {e}"
    hits = [e["num_hit_tokens"] for e in tracer.filter("prefix_hit")]
    return outs, hits, error, tracer, mgr.block_pool.get_num_free_blocks()


def grade(fn: Any, g: Grader) -> None:
    a = er.prompt_of(3 * BS + 1, salt=g.seed % 5)
    other = [(t + 101) % 256 for t in a]
    cases = [
        (Words("ex02_fully_cached_prompt_exactly_blocks", v0=3 * BS), [a[: 3 * BS]], a[: 3 * BS]),
        (Words("ex02_fully_cached_prompt_blocks", v0=3 * BS + 1), [a], a),
        (Words("ex02_one_token_prompt_cached"), [a[:1]], a[:1]),
        (Words("ex02_empty_cache"), [], a),
        (Words("ex02_second_block_equal_first_block"), [a], other[:BS] + a[BS:]),
        (Words("ex02_shares_tokens_one_whole_block"), [a], a[:5] + other[5:]),
    ]
    n = g.rng.randrange(2, 4 * BS)
    cases.append((Words("ex02_random_shares_tokens", n=n, v0=3 * BS + 1), [a], a[:n] + other[n:]))
    cases = [(name, cached, query, ()) for name, cached, query in cases]
    cases.append((Words("ex02_miss_mid_prefix", v0=len(a)), [a], a, (1,)))
    cases += [_random_case(g, g.seed % 11 + i) for i in range(12)]
    for name, cached, query, evict in cases:
        with g.case(name):
            mgr = _warm(cached, evict)
            want_blocks, want_n = mgr.get_computed_blocks(Request("q", query))
            want = ([b.block_id for b in want_blocks], want_n)
            free = _pool_state(mgr)
            blocks, num = g.returns(g.call(fn, mgr, Request("q", query)), (list, int))
            got = ([getattr(b, "block_id", b) for b in blocks], num)
            g.expect(got, want, {
                "no_cap": _lookup(mgr, query, len(query) // BS),
                "one_block_short": _lookup(mgr, query, len(query) // BS - 1),
                "no_chain": _lookup(mgr, query, (len(query) - 1) // BS, chain=False),
                "blocks_not_tokens": (want[0], len(want[0])),
                "skips_miss": _lookup(mgr, query, (len(query) - 1) // BS, skip=True),
            })  # fmt: skip
            after = _pool_state(mgr)
            if after != free:
                moved = [i for i, (x, y) in enumerate(zip(free[1], after[1])) if x != y]
                g.fail(Words("ex02_block_pool_as_it_was"),
                       Words("ex02_free_blocks_ref_cnt_changed", free=free[0], after=after[0],
                             moved=moved),
                       "touched")  # fmt: skip
    runs = (
        (Words("ex02_inside_colocated_engine_13_tokens"),
         [a, a, a[: 2 * BS] + other[2 * BS :], a[: 3 * BS]], False),
        (Words("ex02_inside_colocated_engine_10_blocks"),
         [a, a[:BS] + other[BS:]], True),
    )  # fmt: skip
    for name, prompts, together in runs:
        with g.case(name):
            want_out, want_hits, _, _, want_free = _engine_run(None, g, prompts, together)
            outs, hits, error, tracer, free = _engine_run(fn, g, prompts, together)
            evidence = er.said(error, g.lang) + "\n" + er.table_text(tracer, None, g.lang, rows=8)
            g.expect(hits, want_hits, evidence=evidence)
            g.expect(outs, want_out, evidence=evidence)
            g.expect(free, want_free, evidence=evidence)  # what the run left in the pool


_slip = functools.partial(slip, "ex02_computed_blocks")


EXERCISE = Exercise(
    number=2, slug="ex02_computed_blocks", function="get_computed_blocks",
    library="pdlab/engine/core/kv_cache_manager.py (KVCacheManager.get_computed_blocks)",
    own=("pdlab.engine.core.kv_cache_manager:KVCacheManager.get_computed_blocks",),
    notebook="01_paged_kv_cache",
    title={"en": "Prefix cache hits: chained hashes, N - 1 cap",
           "zh": "前缀缓存命中：链式哈希与 N - 1 上限"},
    statement={
        "en": """\
Exercise 2: KVCacheManager.get_computed_blocks

Prefix caching names each full block by a hash of its tokens chained with the hash of
the block before it, so equal hashes mean equal prefixes (a token's K/V depend on every
token before it). A new request looks up its blocks in order and stops at the first miss;
only whole blocks are reused.

One more rule: the hit may cover at most request.num_tokens - 1 tokens. The cache holds
keys and values, not the last token's final hidden state, and the next token's logits
need it.

Write get_computed_blocks as a method of KVCacheManager, returning (blocks, num_tokens).
The grader compares it with the real method on warmed caches, then plugs it into a
colocated engine: the prefix hits and the tokens must be the engine's.""",
        "zh": """\
练习 2：KVCacheManager.get_computed_blocks

前缀缓存用“本块 token 与前一块哈希串联”的哈希给每个满块命名，所以哈希相等意味着前缀相等
（一个 token 的 K/V 取决于它之前的所有 token）。新请求按顺序查找自己的块，遇到第一个未命中
就停；只复用整块。

还有一条规则：命中最多覆盖 `request.num_tokens - 1` 个 token。缓存里存的是 key 和 value，
不是最后一个 token 的最终隐藏状态，而下一个 token 的 logits 需要它。

请把 get_computed_blocks 写成 KVCacheManager 的方法，返回 `(blocks, num_tokens)`。评分先在
预热过的缓存上与真实方法比较，再把它装进非分离引擎：前缀命中和生成的 token 都必须与引擎一致。"""},
    hints={
        "en": (
            "Loop over blocks i = 0, 1, ...; block i's tokens are "
            "all_token_ids[i * block_size:(i + 1) * block_size]; pass the previous block's "
            "hash as the parent (None for block 0).",
            "At most (num_tokens - 1) // block_size blocks: a fully cached prompt of N tokens "
            "reuses floor((N - 1) / B) * B tokens."),
        "zh": (
            "对块 i = 0, 1, ... 循环；块 i 的 token 是 all_token_ids[i * block_size:(i + 1) * "
            "block_size]；把前一块的哈希作为 `parent` 传入（块 0 为 None）。",
            "最多 (num_tokens - 1) // block_size 块：N 个 token 的提示词即使全部缓存，"
            "也只复用 floor((N - 1) / B) * B 个 token。"),
    },
    mistakes={
        "skips_miss": {
            "en": "passing over a miss (continue) instead of stopping there: a block after a "
            "missing one was computed over K/V that are gone, so the hit ends at the first "
            "miss; the request would reuse blocks its own prefix does not lead to",
            "zh": "遇到未命中时跳过（`continue`）而不是停下：未命中块之后的块依赖已经不在的 K/V，"
            "所以命中止于第一个未命中；否则会复用前缀接不上的块"},
        "no_cap": {
            "en": "no N - 1 cap: a fully cached prompt leaves nothing to compute, and the "
            "next token's logits need the last token's hidden state",
            "zh": "没有 N - 1 上限：全部缓存的提示词就没有要算的了，而下一个 token 的 logits "
            "需要最后一个 token 的隐藏状态"},
        "one_block_short": {
            "en": "capping one block too early: the cap is num_tokens - 1 tokens, then "
            "rounded down to whole blocks",
            "zh": "上限少了一整块：上限是 num_tokens - 1 个 token，再向下取整到整块",
        },
        "no_chain": {
            "en": "hashing each block alone: the hash must chain the previous block's, so "
            "block i is found only after the same prefix",
            "zh": "每块单独哈希：哈希必须串联前一块的哈希，块 i 只有在前缀相同时才能命中",
        },
        "blocks_not_tokens": {
            "en": "returning the number of blocks: the second value is the number of "
            "computed tokens, len(blocks) * block_size",
            "zh": "返回了块数：第二个值是已计算的 token 数，即 `len(blocks) * block_size`",
        },
        "touched": {
            "en": "touching the blocks (ref_cnt += 1) in the lookup: only allocate_slots "
            "takes them, so a lookup that touches leaks a reference per hit and the blocks "
            "are never free again",
            "zh": "在查找里 `touch` 了块（ref_cnt += 1）：只有 allocate_slots 才占用它们，查找时 "
            "`touch` 会让每次命中多留一个引用，这些块再也不会被释放"},
    },
    grade=grade,
    slips={
        "no_cap": _slip("(request.num_tokens - 1) // bs", "request.num_tokens // bs"),
        "one_block_short": _slip("(request.num_tokens - 1) // bs", "request.num_tokens // bs - 1"),
        "no_chain": _slip("hash_block_tokens(parent,", "hash_block_tokens(None,"),
        "blocks_not_tokens": _slip("len(blocks) * bs", "len(blocks)"),
        "skips_miss": _slip("            break", "            continue"),
        "touched": _slip("    return", "    self.block_pool.touch(blocks)\n    return"),
    },
)  # fmt: skip
