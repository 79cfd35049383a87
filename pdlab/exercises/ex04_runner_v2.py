"""Exercise 4: Model Runner V2's ``prefill_runs_as_decode`` and ``decode_graph_eligible``.

Graded against :func:`pdlab.engine.worker.gpu.batch.gather_batch_req_state` (upstream
``GPUModelRunner.gather_batch_req_state`` in ``vllm/v1/worker/gpu/model_runner.py``) on
batches of every kind, then inside the engine: the learner's flags replace the runner's for
a P/D pair (with and without prefill context parallelism), and the route events D records
must be the unpatched run's.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pdlab.engine.worker.gpu.model_runner as runner_module
from pdlab.engine.request import SamplingParams
from pdlab.engine.worker.gpu.batch import gather_batch_req_state, get_uniform_decode_token_count
from pdlab.exercises import engine_runs as er
from pdlab.exercises.base import Exercise, Grader, Words, patched
from pdlab.exercises.bilingual import slip
from pdlab.exercises.cases import Draw, ask, consistent, diagnose_by, random_cases

_slip = functools.partial(slip, "ex04_runner_v2")


def _norm(runs: Any, n: int) -> list[bool]:
    """None and all-False say the same of a batch (no row runs as a decode)."""
    return [False] * n if runs is None else [bool(x) for x in runs]


def _batch(rows: list[tuple[int, int, int]], use_pcp: bool):
    """``rows`` of (scheduled, computed, prompt) through the real runner."""
    ids = [f"r{i}" for i in range(len(rows))]
    scheduled, computed, prompt = ({r: row[k] for r, row in zip(ids, rows)} for k in range(3))
    return gather_batch_req_state(scheduled, computed, prompt, use_pcp=use_pcp)


def _flags(key: str, case: dict) -> tuple[list[bool], bool]:
    """What the runner (``key`` ""), or the learner who made mistake ``key``, answers for
    the batch of ``case``."""
    pf, q, c, use_pcp = _args(case)
    if use_pcp and key != "pcp_runs_as_decode":
        return [False] * len(q), not any(pf)
    least = {"no_context_test": 0, "context_gt_one": 2}.get(key, 1)
    most = 2 if key == "short_rows_as_decode" else 1
    runs = [(x or key == "every_row") and 1 <= qi <= most and ci >= least
            for x, qi, ci in zip(pf, q, c)]  # fmt: skip
    if key == "eligible_any_prefill":
        return runs, not any(pf)
    return runs, all(r or not x for r, x in zip(runs, pf))


_MISTAKES = ("no_context_test", "eligible_any_prefill", "every_row")  # named cases, no PCP
_PCP_MISTAKES = ("pcp_runs_as_decode",)
_RANDOM_MISTAKES = ("no_context_test", "context_gt_one", "short_rows_as_decode",
                    "eligible_any_prefill", "pcp_runs_as_decode", "every_row")  # fmt: skip


def _args(case: dict) -> tuple:
    """The learner's arguments for ``case``'s batch, as the runner orders and flags it."""
    b = _batch(case["rows"], case["pcp"])
    return (list(b.is_prefilling), list(b.num_scheduled_tokens),
            list(b.num_computed_prefill_tokens), case["pcp"])  # fmt: skip


def _draw(rng: Any) -> dict:
    """A batch of 1 to 5 rows ``(new tokens, computed, prompt)``, biased to the edges:
    nothing computed, one token computed, one token left, 1 or 2 new tokens, decodes."""
    rows = []
    for _ in range(rng.randrange(1, 6)):
        p = rng.choice((1, 2, 3, rng.randrange(2, 30)))
        c = max(0, rng.choice((0, 1, 1, 2, p - 1, p - 1, p, p + rng.randrange(1, 9))))
        left = p - c
        q = 1 if left <= 0 else min(left, rng.choice((1, 1, 2, 2, 3, left)))
        rows.append((q, c, p))
    return {"rows": rows, "pcp": rng.random() < 0.25}


def _shrink(case: dict) -> list[dict]:
    rows, out = case["rows"], []
    if len(rows) > 1:
        out += [case | {"rows": rows[:i] + rows[i + 1 :]} for i in range(len(rows))]
    if case["pcp"]:
        out.append(case | {"pcp": False})
    return out


def _shown(case: dict) -> str:
    pf, q, c, pcp = _args(case)
    return (f"is_prefilling={pf}, num_scheduled_tokens={q}, "
            f"num_computed_prefill_tokens={c}, use_pcp={pcp}")  # fmt: skip


def _same_flags(got: Any, want: Any) -> bool:
    try:
        return _norm(got[0], len(want[0])) == list(want[0]) and bool(got[1]) == want[1]
    except (TypeError, IndexError):
        return False


def _random(fn: Any, g: Grader) -> None:
    variants = {k: functools.partial(_flags, k) for k in _RANDOM_MISTAKES}

    def probes(case: dict) -> list[dict]:
        one = [(q, c, p) for q, c, p in case["rows"]]
        return [{"rows": [row], "pcp": pcp} for row in one for pcp in (False, True)] + [
            {"rows": [(1, 0, 1)], "pcp": False}, {"rows": [(1, 1, 5)], "pcp": False},
            {"rows": [(2, 1, 5)], "pcp": False}, {"rows": [(1, 9, 5)], "pcp": False},
            {"rows": [(1, 9, 5), (1, 4, 5)], "pcp": True},
        ]  # fmt: skip

    random_cases(g, Draw(_draw, _shrink, lambda c: Words("ex04_random_features", **c), _shown),
                 lambda case: g.call(fn, *_args(case)), functools.partial(_flags, ""), count=150,
                 spec=({list, None}, bool), diagnose=diagnose_by(variants, probes, _same_flags),
                 same=_same_flags)  # fmt: skip


def _routes(fn: Any | None, g: Grader, pcp: int, n: int) -> tuple[list[tuple], str]:
    real = runner_module.gather_batch_req_state

    def learner(*args: Any, **kw: Any):
        b = real(*args, **kw)
        if b.model_runner != "v2":
            return b
        args = (b.is_prefilling, b.num_scheduled_tokens, b.num_computed_prefill_tokens)
        runs, eligible = g.call(fn, *(list(a) for a in args), bool(kw.get("use_pcp")))
        q = b.num_scheduled_tokens
        uniform = get_uniform_decode_token_count(len(q), sum(q), max(q), bool(eligible))
        return dataclasses.replace(b, prefill_runs_as_decode=None if runs is None else list(runs),
                                   decode_graph_eligible=bool(eligible),
                                   uniform_decode_token_count=uniform)  # fmt: skip

    pair = er.pair(pcp)
    with patched(runner_module, "gather_batch_req_state", learner if fn else real):
        pair.generate(er.prompt_of(n), SamplingParams(max_tokens=3))
    routes = [
        (e["step"], e["req_id"], bool(e["prefill_runs_as_decode"]), e["decode_graph_eligible"])
        for e in pair.tracer.filter("route", "D")
    ]
    return routes, er.table_text(pair.tracer, "D", g.lang)


@functools.lru_cache(maxsize=4)
def _reference_routes(pcp: int, n: int) -> list[tuple]:
    return _routes(None, Grader(0, "en"), pcp, n)[0]


def grade(fn: Any, g: Grader) -> None:
    r = g.rng.randrange
    cases = [
        (Words("ex04_first_step_token_over_12"), [(1, 12, 13)], False),
        (Words("ex04_first_step_under_prefill_context"), [(1, 12, 13)], True),
        (Words("ex04_one_token_prompt_nothing_cached"), [(1, 0, 1)], False),
        (Words("ex04_three_decodes"), [(1, 20, 8), (1, 9, 5), (1, 30, 30)], False),
        (Words("ex04_decode_step_and_fresh_prompt"), [(1, 20, 8), (1, 12, 13), (7, 0, 7)], False),
        (Words("ex04_decode_and_step"), [(1, 20, 8), (1, 12, 13)], False),
        (
            Words("ex04_two_decodes_and_two_steps"),
            [(1, 20, 8), (1, 12, 13), (1, 30, 30), (1, 6, 7)],
            False,
        ),
        (Words("ex04_decode_and_step_with_pcp"), [(1, 20, 8), (1, 12, 13)], True),
        (Words("ex04_later_chunk_prompt_tokens_over"), [(4, 8, 20), (1, 9, 5)], False),
    ]
    rows = []
    for _ in range(4):
        p = r(1, 20)
        c = r(0, p + 5)
        rows.append((1 if c >= p else r(1, p - c + 1), c, p))
    cases.append((Words("ex04_random_batch", rows=rows), rows, bool(r(0, 2))))
    answers = []  # every case first: a pure function, and the other cases name a mistake
    for name, rows, use_pcp in cases:
        b, case = _batch(rows, use_pcp), {"rows": rows, "pcp": use_pcp}
        want = (_norm(b.prefill_runs_as_decode, len(rows)), b.decode_graph_eligible)
        keys = _PCP_MISTAKES if use_pcp else _MISTAKES
        got = ask(fn, *_args(case))
        answers.append((name, use_pcp, got, want, {k: _flags(k, case) for k in keys}))
    seen = [((_norm(got[0], len(want[0])), got[1]), wrong) for *_, got, want, wrong in answers
            if _same_flags(got, got) and isinstance(got[1], bool)]  # fmt: skip
    for name, use_pcp, got, want, wrong in answers:
        with g.case(Words("ex04_use_pcp", name=name) if use_pcp else name):
            if isinstance(got, Exception):
                raise got
            runs, eligible = g.returns(got, ({list, None}, bool))
            g.expect((_norm(runs, len(want[0])), eligible), want, consistent(wrong, seen))
    _random(fn, g)
    for pcp in (1, 2):
        with g.case(Words("ex04_inside_pair_prefill_context_parallel", pcp=pcp)):
            want = _reference_routes(pcp, 13)
            got, table = _routes(fn, g, pcp, 13)
            g.expect(got, want, evidence=table)


EXERCISE = Exercise(
    number=4, slug="ex04_runner_v2", function="decode_flags",
    library="pdlab/engine/worker/gpu/batch.py (gather_batch_req_state)",
    own=("pdlab.engine.worker.gpu.batch:gather_batch_req_state",), notebook="05_pd_decode_side",
    title={"en": "Model Runner V2: prefill_runs_as_decode",
           "zh": "Model Runner V2：prefill_runs_as_decode"},
    statement={
        "en": """\
Exercise 4: Model Runner V2's prefill_runs_as_decode and decode_graph_eligible
(vLLM 0.33.0's vllm/v1/worker/gpu/model_runner.py)

V2 computes, for every row of a step, is_prefilling = num_computed_prefill_tokens <
prefill_len. Without prefill context parallelism (PCP) it then marks the rows that are
one new prompt token over existing context: prefill_runs_as_decode ("runs as a decode").
The step is decode_graph_eligible, the uniform decode batch a full decode CUDA graph
replays, when every row is a decode or such a row. Under PCP, V2 computes no such flag
(None), and the step is eligible only when no row is prefilling.

D's first step after a KV transfer (one token over N - 1 cached) is exactly the row V2
names. Write decode_flags; the grader compares it with the runner on many batches, then
puts your flags into a P/D pair's runner and compares the route events D records.""",
        "zh": """\
练习 4：Model Runner V2 的 prefill_runs_as_decode 与 decode_graph_eligible
（vLLM 0.33.0 的 vllm/v1/worker/gpu/model_runner.py）

V2 为一步中的每一行计算 is_prefilling = num_computed_prefill_tokens < prefill_len。不开启
预填充上下文并行（PCP）时，它再标出“在已有上下文之上只有一个新的提示词 token”的行：
prefill_runs_as_decode（“按解码运行”）。当每一行都是 decode 行或这样的行时，这一步是
decode_graph_eligible，即完整解码 CUDA graph 可以重放的均匀解码批次。开启 PCP 时，V2 不计算
这个标志（None），只有没有任何行在预填充时这一步才是 decode_graph_eligible。

KV 传输后 D 的第一步（在 N - 1 个已缓存 token 之上算 1 个 token）正是 V2 点名的这种行。
请实现 decode_flags；评分先在许多批次上与 model runner 比较，
再把你的标志放进一个 P/D 对的 model runner，
比较 D 记录下的 `route` 事件。"""},
    hints={
        "en": (
            "A fresh one-token prompt is prefilling with one new token, but it has no "
            "existing context: it does not run as a decode.",
            "Without PCP: runs = is_prefilling and new tokens == 1 and computed > 0; eligible "
            "= every prefilling row runs as a decode. With PCP: (None, no row prefilling)."),
        "zh": (
            "全新的一 token 提示词也在预填充、也只有一个新 token，但它没有已有上下文："
            "它不按解码运行。",
            "不开 PCP：runs = is_prefilling 且新 token 数 == 1 且已算 > 0；eligible = 每个 prefill "
            "行都按解码运行。开 PCP：(None, 没有行在预填充)。"),
    },
    mistakes={
        "no_context_test": {
            "en": "leaving out num_computed > 0: a fresh one-token prompt has no context to "
            "decode over, so V2 does not run it as a decode",
            "zh": "漏了 num_computed > 0：全新的一 token 提示词没有可以解码的上下文，"
            "V2 不会按解码运行它"},
        "eligible_any_prefill": {
            "en": "eligible = no row prefilling, without PCP: then D's first step could never "
            "replay the decode graph, which is what prefill_runs_as_decode is for",
            "zh": "不开 PCP 时把 `eligible` 写成“没有行在预填充”：这样 D 的第一步永远不能重放完整的"
            " decode CUDA graph，而 prefill_runs_as_decode 正是为此而设"},
        "pcp_runs_as_decode": {
            "en": "applying prefill_runs_as_decode under PCP: PCP splits every prefilling row "
            "across ranks, so such a row must take the prefill path",
            "zh": "在 PCP 下也用了 prefill_runs_as_decode：PCP 会把每个 prefill 行切分到各个 rank，"
            "这样的行必须走 prefill 路径"},
        "context_gt_one": {
            "en": "asking for more than one computed token (c > 1): one token of context is "
            "context, so a row of one new token over exactly one computed token runs as a "
            "decode (the test is num_computed > 0)",
            "zh": "要求已计算 token 多于一个（c > 1）：一个 token 的上下文也是上下文，所以在恰好一"
            "个已计算 token 之上只有一个新 token 的行按解码运行（判断是 num_computed > 0）"},
        "short_rows_as_decode": {
            "en": "letting two new tokens run as a decode (q <= 2): only a row of exactly one "
            "new prompt token runs as a decode; two are a prefill chunk",
            "zh": "让两个新 token 的行也按解码运行（q <= 2）：只有恰好一个新的提示词 token 的行才按"
            "解码运行；两个就是预填充的一块"},
        "every_row": {
            "en": "marking decode rows too: prefill_runs_as_decode names the rows still in "
            "their prompt that run as a decode; a row past its prompt is a decode already",
            "zh": "把 decode 行也标上了：prefill_runs_as_decode 只标仍在提示词阶段、却按解码运行的"
            "行；提示词已经结束的行本来就是 decode 行"},
    },
    grade=grade,
    slips={
        "no_context_test": _slip("pf and q == 1 and c > 0", "pf and q == 1"),
        "eligible_any_prefill": _slip("all(rd or not pf for rd, pf in zip(runs_as_decode, "
                                      "is_prefilling))", "not any(is_prefilling)"),
        "pcp_runs_as_decode": _slip("if use_pcp:", "if False:"),
        "every_row": _slip("pf and q == 1 and c > 0", "q == 1 and c > 0"),
        "context_gt_one": _slip("c > 0", "c > 1"),
        "short_rows_as_decode": _slip("q == 1 and", "q <= 2 and"),
    },
)  # fmt: skip
