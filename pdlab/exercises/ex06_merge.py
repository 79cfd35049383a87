"""Exercise 6: ``merge_attn_states`` from two partial outputs and their natural-log LSEs.

Graded against the oracle (``naive_attention`` over all keys, ``pdlab/attention/reference.py``)
for two parts computed apart, with empty parts and large scores, then inside ``forward_mha``
(``pdlab/engine/attention/mla_attention.py``): the learner's merge replaces
``pdlab.kernels.merge_attn_states`` (upstream ``vllm/v1/attention/ops/merge_attn_states.py``)
while D runs its one-token step under prefill context parallelism and a colocated engine runs
chunked prefill; every call must give the kernel's result, and the tokens must be the unpatched
engine's.
"""

from __future__ import annotations

import math
from typing import Any

import torch

import pdlab.kernels as kernels_module
from pdlab.attention.reference import naive_attention
from pdlab.exercises import engine_runs as er
from pdlab.exercises.base import Exercise, Grader, Words, patched
from pdlab.kernels.merge import merge_attn_states_torch, partial_attention


def _base2(out_a, lse_a, out_b, lse_b):
    """A known mistake: the LSEs read as base-2 (FlashInfer's convention, not pdlab's)."""
    m = torch.maximum(lse_a, lse_b)
    w_a, w_b = torch.exp2(lse_a - m), torch.exp2(lse_b - m)
    t = w_a + w_b
    out = (w_a / t)[..., None] * out_a + (w_b / t)[..., None] * out_b
    return out, m + torch.log2(t)


_SLIP = """\
import torch


def merge_attn_states(out_a, lse_a, out_b, lse_b):
    m = torch.maximum(lse_a, lse_b)
    w_a, w_b = torch.exp(lse_a - m), torch.exp(lse_b - m)
    t = w_a + w_b
    return (w_a / t)[..., None] * out_a + (w_b / t)[..., None] * out_b, m + torch.log(t)
"""


def _named(g: Grader, got: tuple, whole: tuple, a: tuple, b: tuple) -> None:
    """Fail unless ``got`` is ``whole``, naming the mistake whose answer it is."""
    mistakes: dict[str, object] = {"base2": _base2(a[0], a[1], b[0], b[1])}
    out, lse = got
    if isinstance(out, torch.Tensor) and out.shape == whole[0].shape:
        if torch.allclose(out.float(), (a[0] + b[0]) / 2, atol=1e-4):
            mistakes["average"] = got
        elif torch.allclose(out.float(), whole[0], atol=1e-4):
            mistakes["lse_max"] = (whole[0], torch.maximum(a[1], b[1]))
        else:
            m = torch.maximum(a[1], b[1])
            w_a, w_b = torch.exp(a[1] - m), torch.exp(b[1] - m)  # not divided by their sum
            mistakes["unnormalised"] = (w_a[..., None] * a[0] + w_b[..., None] * b[0], lse)
    g.expect(got, whole, mistakes)


def _parts(g: Grader, t: int, h: int, k_a: int, k_b: int, d: int = 8, shift: float = 0.0):
    q = torch.randn(t, h, d, generator=g.gen)
    k = torch.randn(k_a + k_b, h, d, generator=g.gen)
    v = torch.randn(k_a + k_b, h, d, generator=g.gen)
    scale = d**-0.5
    whole = naive_attention(q + shift, k, v, scale, causal=False)
    a = partial_attention(q + shift, k[:k_a], v[:k_a], scale)
    b = partial_attention(q + shift, k[k_a:], v[k_a:], scale)
    return a, b, whole


def _empty(t: int, h: int, d: int, fill: float) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.full((t, h, d), fill), torch.full((t, h), -math.inf)


def grade(fn: Any, g: Grader) -> None:
    t, h = g.rng.randrange(1, 6), g.rng.randrange(1, 5)
    for name, ka, kb, shift in (
        (Words("ex06_random_tokens_heads_keys_keys", t=t, h=h), 5, 7, 0.0),
        (Words("ex06_one_key_in_each_part"), 1, 1, 0.0),
        (Words("ex06_large_scores_lses_in_hundreds"), 6, 3, 100.0),
    ):
        with g.case(name):
            a, b, whole = _parts(g, t, h, ka, kb, shift=shift)
            got = _tensors(g, g.call(fn, a[0], a[1], b[0], b[1]))
            if shift and not all(bool(torch.isfinite(x).all()) for x in got):
                g.fail(whole, got, "overflow")
            _named(g, got, whole, a, b)
    for empty, label in (("B", Words("ex06_part_empty")), ("A", Words("ex06_part_empty_2"))):
        with g.case(Words("ex06_lse_inf_its_output_nan", label=label)):  # fmt: skip
            part, _, _ = _parts(g, t, h, 4, 1)
            none = _empty(t, h, 8, math.nan)
            args = (*part, *none) if empty == "B" else (*none, *part)
            got = _tensors(g, g.call(fn, *args))
            if isinstance(got[0], torch.Tensor) and bool(torch.isnan(got[0]).any()):
                g.fail(part, got, "nan_leak")
            g.expect(tuple(got), part)
    with g.case(Words("ex06_both_parts_empty_out_lse")):
        got = _tensors(g, g.call(fn, *_empty(t, h, 8, 0.0), *_empty(t, h, 8, 0.0)))
        g.expect(tuple(got), (torch.zeros(t, h, 8), torch.full((t, h), -math.inf)))
    _random(fn, g)
    for label, pd in (
        (Words("ex06_one_token_step_under_pcp"), True),
        (Words("ex06_colocated_engine_chunked_prefill_budget"), False),
    ):
        with g.case(Words("ex06_inside_forward_mha", label=label)):
            calls: list[tuple[Any, Any, Any]] = []

            def learner(out_a, lse_a, out_b, lse_b, *, backend=None, calls=calls):
                got = g.call(fn, out_a, lse_a, out_b, lse_b)
                right = merge_attn_states_torch(out_a, lse_a, out_b, lse_b)
                calls.append((tuple(got), right, _base2(out_a, lse_a, out_b, lse_b)))
                return got

            with patched(kernels_module, "merge_attn_states", learner):
                out, want, tracer = er.pcp_or_chunked(pd)
            for got, right, base2 in calls:
                g.expect(got, right, {"base2": base2})
            g.expect(out, want, evidence=er.table_text(tracer, None, g.lang))
            if not calls:
                g.fail(Words("ex06_forward_mha_merges_its_parts"), Words("ex06_no_call"))


def _tensors(g: Grader, got: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``got`` as the pair of tensors a merge returns, its types checked first."""
    return tuple(g.returns(got, (torch.Tensor, torch.Tensor)))  # type: ignore[return-value]


def _random(fn: Any, g: Grader) -> None:
    """Random merges, a seed replaying them, biased to the edges: one key in a part, large
    scores, and rows (tokens) whose part A or B is empty (LSE -inf, output NaN) at every
    position, as a chunk with no context for some rows leaves them."""
    for _ in range(8):
        t, h = g.rng.randrange(1, 7), g.rng.randrange(1, 5)
        ka, kb = g.rng.choice((1, 2, 7)), g.rng.choice((1, 3, 8))
        shift = g.rng.choice((0.0, 0.0, 50.0, -50.0))
        a, b, _ = _parts(g, t, h, ka, kb, shift=shift)
        (out_a, lse_a), (out_b, lse_b) = (x.clone() for x in a), (x.clone() for x in b)
        empty_a = [i for i in range(t) if g.rng.random() < 0.25]
        empty_b = [i for i in range(t) if i not in empty_a and g.rng.random() < 0.25]
        for rows, out, lse in ((empty_a, out_a, lse_a), (empty_b, out_b, lse_b)):
            out[rows], lse[rows] = math.nan, -math.inf
        name = Words("ex06_random", t=t, h=h, ka=ka, kb=kb, shift=shift, empty_a=empty_a,
                     empty_b=empty_b)  # fmt: skip
        with g.case(name):
            got = _tensors(g, g.call(fn, out_a, lse_a, out_b, lse_b))
            want = merge_attn_states_torch(out_a, lse_a, out_b, lse_b)
            if bool(torch.isnan(got[0]).any()) and not bool(torch.isnan(want[0]).any()):
                g.fail(want, got, "nan_leak")
            g.expect(got, want, {"base2": _base2(out_a, lse_a, out_b, lse_b)})


EXERCISE = Exercise(
    number=6, slug="ex06_merge", function="merge_attn_states",
    library="kernels/merge.py (merge_attn_states)",
    own=("pdlab.kernels.merge:merge_attn_states_torch",
         "pdlab.kernels.merge:merge_attn_states_triton"), notebook="04_kernels",
    title={"en": "merge_attn_states: two parts, one softmax",
           "zh": "merge_attn_states：两部分，一个 softmax"},
    statement={
        "en": """\
Exercise 6: merge_attn_states (vLLM's
vllm/v1/attention/ops/merge_attn_states.py)

Attention of a query over keys K is out = sum_j softmax(s)_j v_j, with
lse = log(sum_j exp(s_j)), the natural-log log-sum-exp of the scaled scores. Split K into
disjoint parts A and B, attend to each separately, and the whole can be recovered exactly
from (out_a, lse_a) and (out_b, lse_b).

MLA's prefill path (forward_mha) does exactly this: it attends to the cached context
chunk by chunk and to the new tokens apart, then merges the parts.

Write merge_attn_states. Be careful with large LSEs and with empty parts (lse = -inf).
The grader compares with attention over all keys at once, then puts your merge into
forward_mha on D under prefill context parallelism and in chunked prefill.""",
        "zh": """\
练习 6：merge_attn_states（vLLM 的
vllm/v1/attention/ops/merge_attn_states.py）

一个 query 对 key 集合 K 的注意力是 out = sum_j softmax(s)_j v_j，lse = log(sum_j exp(s_j))，
即缩放后分数的自然对数 log-sum-exp。把 K 分成不相交的 A、B 两部分分别计算注意力，
由 (out_a, lse_a) 和 (out_b, lse_b) 可以精确恢复整体结果。

MLA 的 prefill 路径（forward_mha）正是这样做的：对已缓存上下文逐块计算注意力，对新 token
单独计算，再把各部分合并。

请实现 merge_attn_states。注意很大的 LSE 和空的部分（`lse = -inf`）。评分先与一次性对全部
key 计算的注意力比较，再把你的合并放进 forward_mha：PCP 下 D 的那一步，以及分块预填充。"""},
    hints={
        "en": (
            "lse = log(exp(lse_a) + exp(lse_b)); each part's weight is exp(lse_part - lse).",
            "Subtract m = max(lse_a, lse_b) before exp(); if both are -inf use m = 0, and never "
            "multiply an empty part's output (it may be NaN) by its zero weight."),
        "zh": (
            "`lse = log(exp(lse_a) + exp(lse_b))`；每部分的权重是 `exp(lse_part - lse)`。",
            "求 exp() 之前先减去 m = max(lse_a, lse_b)；两者都是 `-inf` 时取 `m = 0`；不要把空部分"
            "的输出（可能是 NaN）乘以它为零的权重。"),
    },
    mistakes={
        "overflow": {
            "en": "exp() of a large LSE overflows: subtract max(lse_a, lse_b) before exp()",
            "zh": "对很大的 LSE 求 exp() 溢出了：先减去 max(lse_a, lse_b) 再求 exp()",
        },
        "base2": {"en": "a base-2 LSE (exp2/log2): pdlab's and vLLM's merge read the natural log",
                  "zh": "以 2 为底的 LSE（exp2/log2）：pdlab 和 vLLM 的合并使用自然对数"},
        "average": {
            "en": "averaging the two parts: each part weighs what its keys weigh in the "
            "whole softmax, exp(lse_part - lse), not one half",
            "zh": "把两部分取了平均：每部分的权重是它的 key 在整体 softmax 中的份额 "
            "`exp(lse_part - lse)`，而不是一半"},
        "lse_max": {
            "en": "the merged LSE as max(lse_a, lse_b): the output is right, but the LSE "
            "is the log of the summed weights, log(exp(lse_a) + exp(lse_b)), and a later "
            "merge (the next context chunk) reads it",
            "zh": "把合并后的 LSE 写成 max(lse_a, lse_b)：输出是对的，但 LSE 是权重和的对数 "
            "log(exp(lse_a) + exp(lse_b))，之后的合并（下一个上下文分块）还要读它"},
        "unnormalised": {
            "en": "weighting by exp(lse_part) without dividing by the sum: the weights of "
            "the two parts must add up to 1",
            "zh": "按 exp(lse_part) 加权却没有除以总和：两部分的权重之和必须为 1",
        },
        "nan_leak": {
            "en": "multiplying an empty part's output by its zero weight: its output may be "
            "NaN (it attended to no key), and 0 * NaN is NaN",
            "zh": "把空部分的输出乘以它为零的权重：它的输出可能是 NaN（没有 key 可看），而 "
            "0 * NaN 仍是 NaN"},
    },
    grade=grade,
    slips={
        "average": """\
def merge_attn_states(out_a, lse_a, out_b, lse_b):
    import torch

    return (out_a + out_b) / 2, torch.logaddexp(lse_a, lse_b)
""",
        "overflow": _SLIP.replace("    m = torch.maximum(lse_a, lse_b)\n", "")
        .replace(" - m)", ")").replace("m + torch.log(t)", "torch.log(t)"),
        "base2": _SLIP.replace("torch.exp(", "torch.exp2(").replace("log(", "log2("),
        "lse_max": _SLIP.replace("m + torch.log(t)", "m"),
        "unnormalised": _SLIP.replace("    t = w_a + w_b\n", "").replace(
            "(w_a / t)[..., None] * out_a + (w_b / t)[..., None] * out_b, m + torch.log(t)",
            "w_a[..., None] * out_a + w_b[..., None] * out_b, m + torch.log(w_a + w_b)"),
        "nan_leak": _SLIP.replace("lse_b)\n", "lse_b)\n    m = torch.where(torch.isinf(m), "
                                  "torch.zeros_like(m), m)\n").replace("/ t)", "/ safe)")
        .replace("    return (", "    safe = torch.where(t > 0, t, torch.ones_like(t))\n"
                 "    out = (").replace(", m + torch.log(t)", "\n    return out, m + torch.log(t)"),
    },
)  # fmt: skip
