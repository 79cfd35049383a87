"""Exercise 1: the slot mapping, from a block table and positions.

Graded twice: on batches built here against the contract (``slot = block_id * block_size +
offset``, ``docs/design.md``), then inside a colocated engine with chunked prefill, where the
learner's slots replace the ones the model runner computed (``ModelRunner.prepare_inputs``
in ``pdlab/engine/worker/gpu/model_runner.py``, upstream ``BlockTable.compute_slot_mapping`` in
``vllm/v1/worker/block_table.py``) on their way into ``CommonAttentionMetadata``: each step
must get the runner's slots, and the engine must generate the same tokens; then again in
an engine of 10 blocks, where a request is preempted and resumes.
"""

from __future__ import annotations

import functools
from typing import Any

from pdlab.engine.attention.backend import CommonAttentionMetadata
from pdlab.engine.config import SchedulerConfig
from pdlab.engine.request import SamplingParams
from pdlab.exercises import engine_runs as er
from pdlab.exercises.base import Exercise, Grader, Words, patched
from pdlab.exercises.bilingual import slip

BS = er.BLOCK_SIZE


_slip = functools.partial(slip, "ex01_slot_mapping")


def _slots(table, computed, q_lens, bs, shift=0, from_zero=False, by_index=False, scale=True):
    """The contract's slots, or a known mistake's (``shift`` positions, positions counted
    from 0 each step, the block's index in the table used as its id, or the block id not
    multiplied by the block size)."""
    out = []
    for blocks, start, n in zip(table, computed, q_lens):
        for pos in range(0 if from_zero else start, (0 if from_zero else start) + n):
            p = pos + shift
            block = p // bs if by_index else blocks[p // bs] if p // bs < len(blocks) else -1
            out.append(block * (bs if scale else 1) + p % bs)
    return out


def _mistakes(table, computed, q_lens, bs):
    right = _slots(table, computed, q_lens, bs)
    return {
        "off_by_one": [s + 1 for s in right],
        "off_by_one_": [s - 1 for s in right],
        "off_by_one__": _slots(table, computed, q_lens, bs, shift=1),
        "from_zero": _slots(table, computed, q_lens, bs, from_zero=True),
        "block_index": _slots(table, computed, q_lens, bs, by_index=True),
        "no_scale": _slots(table, computed, q_lens, bs, scale=False),
    }


def _batch(g: Grader, contexts: list[int], q_lens: list[int],
           bs: int = BS) -> tuple[list[list[int]], ...]:  # fmt: skip
    ids = list(range(1, 64 * 64))
    g.rng.shuffle(ids)
    table, k = [], 0
    for c, q in zip(contexts, q_lens):
        n = -(-(c + q) // bs)
        table.append(ids[k : k + n] + [0] * 2)  # padded, as the runner's table rows are
        k += n
    return table, contexts, q_lens


def _random_case(g: Grader) -> tuple[Words, list[int], list[int], int]:
    """A random batch of 1 to 5 requests, biased to the edges: a block size of 1 to 16,
    contexts of 0, one short of a block, a whole number of blocks, one over, new tokens
    from 1 (a decode) to several blocks."""
    r = g.rng
    bs = r.choice((1, 2, 4, 4, 16))
    n = r.randrange(1, 6)
    contexts = [r.choice((0, 0, bs - 1, bs, 2 * bs, 2 * bs + 1, r.randrange(0, 5 * bs)))
                for _ in range(n)]  # fmt: skip
    q_lens = [r.choice((1, 1, bs, bs + 1, r.randrange(1, 3 * bs + 2))) for _ in range(n)]
    name = Words("ex01_random", bs=bs, contexts=contexts, q_lens=q_lens)
    return name, contexts, q_lens, bs


def grade(fn: Any, g: Grader) -> None:
    r = g.rng.randrange
    cases = [
        (Words("ex01_one_request_empty_context_new"), [0], [5]),
        (Words("ex01_exactly_blocks_empty_context_new", v0=2 * BS), [0], [2 * BS]),
        (Words("ex01_blocks_context_new_token_decode", v0=2 * BS), [2 * BS], [1]),
        (Words("ex01_later_chunk_context_new_tokens"), [6], [5]),
        (Words("ex01_one_token_prompt"), [0], [1]),
        (Words("ex01_random_batch_three"), [r(0, 12), r(0, 12), r(0, 12)], [r(1, 9), 1, r(1, 9)]),
    ]
    cases = [(*case, BS) for case in cases] + [_random_case(g) for _ in range(12)]
    for name, contexts, q_lens, bs in cases:
        with g.case(name):
            table, computed, q = _batch(g, contexts, q_lens, bs)
            got = fn([list(row) for row in table], list(computed), list(q), bs)
            got = g.returns(got, [int])
            g.expect(got, _slots(table, computed, q, bs), _mistakes(table, computed, q, bs))
    runs = (
        (Words("ex01_inside_colocated_engine_chunked_prefill"),
         [er.prompt_of(13), er.prompt_of(6, salt=1)], er.MAX_TOKENS,
         {"scheduler_config": SchedulerConfig(max_num_batched_tokens=8)}),
        (Words("ex01_inside_colocated_engine_with_10"),
         [er.prompt_of(13), er.prompt_of(14, salt=1)], 8, {"cache": {"num_blocks": 10}}),
    )  # fmt: skip
    for name, prompts, max_tokens, engine_kw in runs:
        with g.case(name):
            _engine_case(fn, g, prompts, max_tokens, engine_kw)


def _engine_case(fn: Any, g: Grader, prompts: list[list[int]], max_tokens: int,
                 engine_kw: dict[str, Any]) -> None:  # fmt: skip
    """``prompts`` through a colocated engine whose slots are the learner's: each step's
    slots, then the tokens, must be the runner's."""
    seen: list[tuple[list[int], list[int], list[list[int]], list[int], list[int]]] = []
    original = CommonAttentionMetadata.__dict__["from_batch"]

    def from_batch(cls, query_lens, num_computed_tokens, num_prompt_tokens, block_table,
                   slot_mapping, req_ids, is_prefilling=None):  # fmt: skip
        rows = block_table.tolist()
        mine = g.call(fn, [list(x) for x in rows], list(num_computed_tokens), list(query_lens), BS)
        mine = [int(s) for s in mine]
        seen.append((slot_mapping.tolist(), mine, rows, list(num_computed_tokens),
                     list(query_lens)))  # fmt: skip
        return original.__func__(
            cls, query_lens, num_computed_tokens, num_prompt_tokens, block_table,
            slot_mapping.new_tensor(list(mine)), req_ids, is_prefilling,
        )  # fmt: skip

    engine = er.colocated(**engine_kw)
    error, out = None, []
    with patched(CommonAttentionMetadata, "from_batch", classmethod(from_batch)):
        try:
            out = engine.generate(prompts, SamplingParams(max_tokens=max_tokens))
        except (RuntimeError, ValueError) as e:
            error = f"{type(e).__name__}: {e}"
    for step, (right, mine, rows, computed, q) in enumerate(seen, 1):
        if mine != right:
            g.case_name = g.t(
                Words("ex01_engine_step_contexts_new_tokens", step=step, computed=computed, q=q)
            )
            g.expect(mine, right, _mistakes(rows, computed, q, BS), er.said(error, g.lang))
    want = [er.colocated_tokens(tuple(p), max_tokens) for p in prompts]
    g.expect(er.tokens(out), want, evidence=er.said(error, g.lang))


EXERCISE = Exercise(
    number=1, slug="ex01_slot_mapping", function="slot_mapping",
    library="pdlab/engine/worker/gpu/model_runner.py (prepare_inputs)",
    notebook="01_paged_kv_cache",
    title={"en": "Slot mapping from a block table", "zh": "由块表计算槽映射"},
    statement={
        "en": """\
Exercise 1: the slot mapping (the model runner's prepare_inputs)

The paged KV cache is num_blocks blocks of block_size slots; slot s is row s % block_size
of block s // block_size. A request holds a list of blocks (its row of the block table)
in the order of its positions: position p lives in its (p // block_size)-th block.

Each step, the model runner tells the kernel that writes K/V where each new token goes:
slot_mapping, one slot per token computed this step, requests in batch order. Request i
computes positions num_computed_tokens[i] .. num_computed_tokens[i] + query_lens[i] - 1.

Write slot_mapping. The grader checks batches against the contract, then replaces the
model runner's slots with yours inside a colocated engine running chunked prefill, and in
one so small that a request is preempted and resumes: every step must get the runner's
slots, and the engine must generate the same tokens.""",
        "zh": """\
练习 1：槽映射 slot_mapping（model runner 的 prepare_inputs）

分页 KV 缓存由 num_blocks 个块组成，每块 block_size 个槽；槽 s 是块 s // block_size 的
第 s % block_size 行。一个请求按位置顺序持有一串块（它在块表中的那一行）：位置 p 位于它的
第 p // block_size 个块。

每一步，model runner 要告诉写入 K/V 的算子每个新 token 写到哪里：slot_mapping，本步计算的每个
token 一个槽，按批内请求的顺序。请求 i 计算位置 num_computed_tokens[i] ..
num_computed_tokens[i] + query_lens[i] - 1。

请实现 slot_mapping。评分先按约定检查若干批次，再在一个开启分块预填充的非分离引擎里用你的
槽替换 model runner 算出的槽，再在一个小到会抢占请求（被抢占的请求随后恢复）的引擎里重复：每一步都
必须与 model runner 一致，生成的 token 也必须相同。"""},
    hints={
        "en": (
            "Positions start at num_computed_tokens[i], not at 0: a later chunk or a decode "
            "continues where the cache ends.",
            "block_table[i][p // block_size] is the id of the block holding position p; the "
            "slot is that id times block_size, plus p % block_size."),
        "zh": (
            "位置从 num_computed_tokens[i] 开始，而不是从 0：后续的分块或解码从缓存末尾接着写。",
            "block_table[i][p // block_size] 是存放位置 p 的块的 id；槽是该 id 乘以 "
            "block_size，再加 p % block_size。"),
    },
    mistakes={
        key: {
            "en": "an off-by-one slot: every token lands one slot away from where attention "
            "will read it",
            "zh": "槽差一：每个 token 都写到了注意力读取位置旁边的槽",
        }
        for key in ("off_by_one", "off_by_one_", "off_by_one__")
    }
    | {
        "from_zero": {
            "en": "counting positions from 0 each step: a later chunk or a decode overwrites "
            "the first tokens' K/V",
            "zh": "每一步都从位置 0 数起：后续分块或解码会覆盖最前面 token 的 K/V",
        },
        "block_index": {
            "en": "using the block's index in the request's table as its id: the table maps "
            "a request's i-th block to any block of the pool",
            "zh": "把块在请求块表中的序号当成块 id：块表可以把请求的第 i 块映射到池里的任意块",
        },
        "no_scale": {
            "en": "adding the offset to the block id itself: a block's first slot is "
            "block_id * block_size, so neighbouring blocks' tokens collide",
            "zh": "把块内偏移直接加在块 id 上：一个块的第一个槽是 block_id * block_size，"
            "相邻块的 token 会互相覆盖"},
    },
    grade=grade,
    slips={
        "off_by_one": _slip("pos % block_size)", "pos % block_size + 1)"),
        "from_zero": _slip("[pos //", "[(pos - start) //").replace("+ pos %", "+ (pos - start) %"),
        "block_index": _slip("blocks[pos // block_size]", "(pos // block_size)"),
        "no_scale": _slip("] * block_size", "]"),
    },
)  # fmt: skip
