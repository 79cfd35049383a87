"""Exercise 8: the online-softmax loop of a paged decode kernel, in Triton (run by the
interpreter on a CPU, ``TRITON_INTERPRET=1``), or the same loop in torch where triton is not
installed (macOS, Windows; ``pdlab/kernels/backend.py``'s ``triton_installed``).

Graded against the oracle (``naive_attention`` over the request's rows gathered from the
cache) on caches whose unused slots hold NaN, so a read past ``seq_len`` shows, then inside
the engine: the learner's kernel replaces ``pdlab.kernels.mla_decode`` (upstream
``vllm/v1/attention/ops/triton_decode_attention.py``) while a colocated engine generates.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import torch

import pdlab.kernels as kernels_module
from pdlab.attention.reference import naive_attention
from pdlab.engine.request import SamplingParams
from pdlab.exercises import engine_runs as er
from pdlab.exercises.base import Exercise, Grader, Words, fill, patched
from pdlab.kernels.backend import triton_installed

PAGE, L, R = 4, 16, 8


def _launch_triton(kernel: Any, q, cache, table, seq_lens, scale, kv_lora_rank):
    """Launch the learner's kernel: through the interpreter on the CPU tensors, or compiled
    on a GPU (the tensors go there and the results come back), as pdlab's backend chose."""
    import triton

    interpreting = os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available()
    dev = "cpu" if interpreting else "cuda"
    q, cache, table, seq_lens = (x.to(dev) for x in (q, cache, table, seq_lens))
    b, h, w = q.shape
    out = torch.empty(b, h, kv_lora_rank, device=dev)
    lse = torch.empty(b, h, device=dev)
    with warnings.catch_warnings():  # the interpreter's numpy warns of 0/0 in a bad kernel
        warnings.simplefilter("ignore", RuntimeWarning)
        kernel[(b, h)](
            q.float().contiguous(), cache.float().contiguous(), table.int().contiguous(),
            seq_lens.int().contiguous(), out, lse, float(scale), table.shape[1], h,
            L=kv_lora_rank, W=w, PAGE=cache.shape[1], BLOCK_W=triton.next_power_of_2(w),
        )  # fmt: skip
    return out.cpu(), lse.cpu()


def _launch_torch(fn: Any, q, cache, table, seq_lens, scale, kv_lora_rank):
    outs = [
        fn(q[i], cache, table[i].tolist(), int(seq_lens[i]), scale, kv_lora_rank, cache.shape[1])
        for i in range(q.shape[0])
    ]
    return torch.stack([o for o, _ in outs]), torch.stack([s for _, s in outs])


def _per_query(block_table, seq_lens, query_start_loc):
    """A request's ``q`` queries as ``q`` one-query rows: query ``i`` sees the keys up to
    its own position, ``seq_len - q + 1 + i`` (causal within the request)."""
    tables, lens = [], []
    for r, (a, b) in enumerate(zip(query_start_loc[:-1].tolist(), query_start_loc[1:].tolist())):
        for i in range(b - a):
            tables.append(block_table[r])
            lens.append(int(seq_lens[r]) - (b - a) + 1 + i)
    return torch.stack(tables), torch.tensor(lens, dtype=seq_lens.dtype)


def _case(g: Grader, seq_lens: list[int], h: int = 2):
    """A NaN-trapped cache, random block tables, and the oracle's answer."""
    w = L + R
    need = sum(-(-s // PAGE) for s in seq_lens)
    cache = torch.full((need + 3, PAGE, w), float("nan"))
    ids = list(range(need + 3))
    g.rng.shuffle(ids)
    table = torch.zeros(len(seq_lens), max(-(-s // PAGE) for s in seq_lens), dtype=torch.int32)
    q = torch.randn(len(seq_lens), h, w, generator=g.gen)
    want_o, want_l, k = [], [], 0
    wrong: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {m: [] for m in _VARIANTS}
    for i, s in enumerate(seq_lens):
        blocks = ids[k : k + -(-s // PAGE)]
        k += len(blocks)
        table[i, : len(blocks)] = torch.tensor(blocks, dtype=torch.int32)
        rows = torch.randn(s, w, generator=g.gen)
        for p in range(s):
            cache[blocks[p // PAGE], p % PAGE] = rows[p]
        o, lse = naive_attention(q[i][None], rows[:, None], rows[:, None, :L], w**-0.5, False)
        want_o.append(o[0])
        want_l.append(lse[0])
        for m, kw in _VARIANTS.items():
            wrong[m].append(_online(q[i], rows, w**-0.5, **kw))
    mistakes = {m: (torch.stack([o for o, _ in v]), torch.stack([x for _, x in v]))
                for m, v in wrong.items()}  # fmt: skip
    args = (q, cache, table, torch.tensor(seq_lens, dtype=torch.int32), w**-0.5, L)
    return args, (torch.stack(want_o), torch.stack(want_l)), mistakes


_VARIANTS = {"scores_unmasked": {"mask_scores": False}, "no_rescale": {"rescale": False},
             "lse_no_max": {"lse_max": False}}  # fmt: skip


def _online(q, rows, scale, mask_scores=True, rescale=True, lse_max=True):
    """The page loop as a known mistake runs it: the unused slots loaded as 0 but scored
    (``mask_scores=False``), ``acc`` not rescaled when the max grows, or ``log(l)`` as the
    LSE. ``q`` is one request's ``[H, W]``, ``rows`` its ``[seq_len, W]``."""
    s_len, h = rows.shape[0], q.shape[0]
    m, l, acc = torch.full((h,), -float("inf")), torch.zeros(h), torch.zeros(h, L)
    for start in range(0, s_len, PAGE):
        page = torch.zeros(PAGE, rows.shape[1])
        n = min(PAGE, s_len - start)
        page[:n] = rows[start : start + n]
        sc = (q.float() @ page.T) * scale
        if mask_scores:
            sc[:, n:] = -float("inf")
        m_new = torch.maximum(m, sc.max(dim=1).values)
        alpha = torch.exp(m - m_new)
        p = torch.exp(sc - m_new[:, None])
        l = l * alpha + p.sum(dim=1)
        acc = (acc * alpha[:, None] if rescale else acc) + p @ page[:, :L]
        m = m_new
    return acc / l[:, None], (m if lse_max else 0) + torch.log(l)


def _grader(launch: Any):
    def grade(fn: Any, g: Grader) -> None:
        n = g.rng.randrange(2, 4 * PAGE)
        for name, lens in (
            (Words("ex08_one_cached_row_seq_len"), [1]),
            (Words("ex08_exactly_pages_seq_len", v0=2 * PAGE), [2 * PAGE]),
            (Words("ex08_pages_seq_len", v0=2 * PAGE + 1), [2 * PAGE + 1]),
            (Words("ex08_random_batch_seq_lens", n=n, v0=2 * PAGE - 1), [n, 3, 2 * PAGE - 1]),
        ):
            with g.case(Words("ex08_unused_slots_nan", name=name)):
                args, want, wrong = _case(g, lens)
                got = g.pair(launch(fn, *args), Words("ex08_pair_out_lse"))
                if bool(torch.isnan(got[1]).any()):  # NaN in an LSE: a NaN slot was scored
                    g.fail(want, tuple(got), "nan")
                g.expect(tuple(got), want, wrong)
        with g.case(Words("ex08_inside_colocated_engine_mla_decode")):
            calls = []

            def mla_decode(q, kv_cache, block_table, seq_lens, scale, num_kv_splits=None,
                           kv_lora_rank=None, backend=None, query_start_loc=None):  # fmt: skip
                calls.append(q.shape[0])
                if query_start_loc is not None:  # rows of several queries: one row each
                    block_table, seq_lens = _per_query(block_table, seq_lens, query_start_loc)
                return g.call(launch, fn, q, kv_cache, block_table, seq_lens, scale, kv_lora_rank)

            prompt = er.prompt_of(13)
            with patched(kernels_module, "mla_decode", mla_decode):
                out = er.colocated().generate(prompt, SamplingParams(max_tokens=er.MAX_TOKENS))
            g.expect(er.tokens(out), [er.colocated_tokens(tuple(prompt))])
            if not calls:
                g.fail(Words("ex08_decode_steps_call_mla_decode"), Words("ex08_no_call"))

    return grade


_STATEMENT = {
    "en": """\
Exercise 8: the online-softmax loop of a paged decode kernel ({form};
after vLLM's
vllm/v1/attention/ops/triton_decode_attention.py)

Absorbed MLA decodes as multi-query attention over the latent rows: for one head's query
q (W = L + R values), score s_j = scale * q . row_j for each of the request's seq_len
cached rows, out = sum_j softmax(s)_j row_j[:L], lse = log sum_j exp(s_j).

The rows live in pages of the paged cache, found through the request's block table, the
last page partly filled. A kernel reads one page at a time and never holds every score:
it keeps a running max m, a running sum l of exp(s - m) and a running weighted sum acc,
rescaling both by exp(m_old - m_new) when the max grows (the online softmax).

{task} The grader checks it against the naive oracle on caches whose unused slots hold
NaN, then runs a colocated engine's decode steps with it.""",
    "zh": """\
练习 8：分页解码算子中的在线 softmax 循环（{form}；
参照 vLLM 的
vllm/v1/attention/ops/triton_decode_attention.py）

吸收形式的 MLA 解码是对潜向量行的多查询注意力：对一个头的 query q（W = L + R 个值），
请求的 seq_len 行缓存中每一行的分数 `s_j = scale * q · row_j`，
`out = sum_j softmax(s)_j row_j[:L]`，`lse = log sum_j exp(s_j)`。

这些行存放在分页缓存的页里，通过请求的块表找到，最后一页可能没填满。算子一次读一页，从不
同时持有全部分数：它维护运行最大值 m、exp(s - m) 的运行和 l、以及加权运行和 `acc`；当最大值
增大时把两者都乘以 exp(m_old - m_new)（在线 softmax）。

{task}评分先在“未用槽填 NaN”的缓存上与朴素实现比较，再让非分离引擎的解码步骤使用它。""",
}
_HINTS = {
    "en": (
        "Mask the positions page * PAGE + offs >= seq_len: their slots hold NaN. Give them a "
        "score of -inf, and load them as 0.",
        "m_new = max(m, max(s)); alpha = exp(m - m_new); p = exp(s - m_new); l = l * alpha + "
        "sum(p); acc = acc * alpha + sum(p * rows); m = m_new."),
    "zh": (
        "屏蔽 `page * PAGE + offs >= seq_len` 的位置：它们的槽是 NaN。给它们 `-inf` 的分数，"
        "加载时取 0。",
        "m_new = max(m, max(s))；alpha = exp(m - m_new)；p = exp(s - m_new)；l = l * alpha + "
        "sum(p)；acc = acc * alpha + sum(p * rows)；m = m_new。"),
}  # fmt: skip
_MISTAKES = {
    "nan": {
        "en": "reading past seq_len: the slots after the request's last token are not its "
        "(here they hold NaN); mask them out of the load and the softmax",
        "zh": "读过了 seq_len：请求最后一个 token 之后的槽不属于它（这里是 NaN）；"
        "加载和 softmax 时都要屏蔽它们"},
    "scores_unmasked": {
        "en": "masking the load but not the scores: the unused slots load as 0, so they "
        "score 0 and still take a share exp(0 - m) of the softmax; give them -inf",
        "zh": "只屏蔽了加载而没有屏蔽分数：未用的槽加载为 0，分数为 0，仍在 softmax 中占了 "
        "exp(0 - m) 的一份；要给它们 `-inf`"},
    "no_rescale": {
        "en": "not rescaling acc when the max grows: what was summed under the old max must "
        "be multiplied by exp(m_old - m_new), acc as well as l",
        "zh": "最大值增大时没有重新缩放 `acc`：旧最大值下累加的部分要乘以 exp(m_old - m_new)，"
        "`acc` 和 `l` 都要"},
    "lse_no_max": {
        "en": "the LSE as log(l): l sums exp(s - m), so the LSE is m + log(l) (the merge "
        "of exercise 6 reads it)",
        "zh": "把 LSE 写成 log(l)：l 累加的是 exp(s - m)，所以 LSE 是 m + log(l)"
        "（练习 6 的合并会读它）"},
}  # fmt: skip


def _exercise(slug: str, function: str, form: dict[str, str], task: dict[str, str], launch,
              slips: dict[str, str]):  # fmt: skip
    return Exercise(
        number=8, slug=slug, function=function,
        library="kernels/decode_attention.py, kernels/decode_attention_kernels.py",
        notebook="04_kernels",
        title={"en": f"Paged decode, online softmax ({form['en']})",
               "zh": f"分页解码的在线 softmax（{form['zh']}）"},
        statement={k: _STATEMENT[k].format(form=form[k], task=task[k]) for k in ("en", "zh")},
        hints=_HINTS, mistakes=_MISTAKES, grade=_grader(launch), slips=slips,
    )  # fmt: skip


_TRITON_SLIP = """\
import triton
import triton.language as tl


@triton.jit
def paged_decode_kernel(q_ptr, cache_ptr, block_table_ptr, seq_lens_ptr, out_ptr, lse_ptr,
                        scale, max_blocks, H, L: tl.constexpr, W: tl.constexpr,
                        PAGE: tl.constexpr, BLOCK_W: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    cols = tl.arange(0, BLOCK_W)
    in_row = cols < W
    q = tl.load(q_ptr + (b * H + h) * W + cols, mask=in_row, other=0.0)
    seq_len = tl.load(seq_lens_ptr + b)
    offs = tl.arange(0, PAGE)
    m_i = tl.full((), float("-inf"), tl.float32)
    l_i = tl.full((), 0.0, tl.float32)
    acc = tl.zeros([BLOCK_W], dtype=tl.float32)
    for page in range(0, tl.cdiv(seq_len, PAGE)):
        block_id = tl.load(block_table_ptr + b * max_blocks + page).to(tl.int64)
        valid = page * PAGE + offs < seq_len
        rows = tl.load(cache_ptr + (block_id * PAGE + offs[:, None]) * W + cols[None, :],
                       mask=LOAD_MASK, other=0.0)
        s = SCORES
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        acc = ACC + tl.sum(p[:, None] * rows, axis=0)
        m_i = m_new
    out = acc / l_i
    tl.store(out_ptr + (b * H + h) * L + cols, out, mask=cols < L)
    tl.store(lse_ptr + b * H + h, LSE)
"""
_TORCH_SLIP = """\
import torch


def paged_decode(q, kv_cache, block_ids, seq_len, scale, kv_lora_rank, page_size):
    h, w = q.shape
    m, l = torch.full((h,), float("-inf")), torch.zeros(h)
    acc = torch.zeros(h, kv_lora_rank)
    for page in range((seq_len + page_size - 1) // page_size):
        n = min(page_size, seq_len - page * page_size)
        rows = kv_cache[block_ids[page]].float().clone()
        LOAD_MASK
        s = (q.float() @ rows.T) * scale
        SCORES
        m_new = torch.maximum(m, s.max(dim=1).values)
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new[:, None])
        l = l * alpha + p.sum(dim=1)
        acc = ACC + p @ rows[:, :kv_lora_rank]
        m = m_new
    return acc / l[:, None], LSE
"""


def _slips(template: str, right: dict[str, str], wrong: dict[str, dict[str, str]]):
    """Each known mistake as a whole file: the template with one part written wrongly."""
    return {key: fill(template, right, **parts) for key, parts in wrong.items()}


_TRITON_RIGHT = {
    "LOAD_MASK": "valid[:, None] & in_row[None, :]",
    "SCORES": "tl.where(valid, tl.sum(rows * q[None, :], axis=1) * scale, float('-inf'))",
    "ACC": "acc * alpha",
    "LSE": "m_i + tl.log(l_i)",
}
_TORCH_RIGHT = {"LOAD_MASK": "rows[n:] = 0", "SCORES": "s[:, n:] = float('-inf')",
                "ACC": "acc * alpha[:, None]", "LSE": "m + torch.log(l)"}  # fmt: skip


TRITON = _exercise(
    "ex08_decode_kernel", "paged_decode_kernel", {"en": "Triton", "zh": "Triton"},
    {"en": "Write the loop's body in paged_decode_kernel.",
     "zh": "请写出 paged_decode_kernel 中循环的主体。"},
    _launch_triton,
    _slips(_TRITON_SLIP, _TRITON_RIGHT, {
        "nan": {"LOAD_MASK": "in_row[None, :]",
                "SCORES": "tl.sum(rows * q[None, :], axis=1) * scale"},
        "scores_unmasked": {"SCORES": "tl.sum(rows * q[None, :], axis=1) * scale"},
        "no_rescale": {"ACC": "acc"},
        "lse_no_max": {"LSE": "tl.log(l_i)"},
    }),
)  # fmt: skip
TORCH = _exercise(
    "ex08_decode_torch", "paged_decode", {"en": "torch", "zh": "torch"},
    {"en": "Write paged_decode (this machine has no triton: the same loop in torch).",
     "zh": "请实现 paged_decode（本机没有 triton：用 torch 写同样的循环）。"},
    _launch_torch,
    _slips(_TORCH_SLIP, _TORCH_RIGHT, {
        "nan": {"LOAD_MASK": "pass", "SCORES": "pass"},
        "scores_unmasked": {"SCORES": "pass"},
        "no_rescale": {"ACC": "acc"},
        "lse_no_max": {"LSE": "torch.log(l)"},
    }),
)  # fmt: skip
EXERCISE = TRITON if triton_installed() else TORCH
