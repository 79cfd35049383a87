"""Exercise 5: ``split_decodes_and_prefills`` with ``treat_short_extends_as_decodes``,
``require_uniform`` and ``is_prefilling``.

Graded against :func:`pdlab.engine.attention.backend.split_decodes_and_prefills` (upstream
``vllm/v1/attention/backends/utils.py``) on batches of every kind and every backend's
switches, then inside the engine: the MLA builder (``pdlab/engine/attention/mla_builder.py``) calls
the learner's split for a P/D pair with and without prefill context parallelism and for a
mixed colocated batch under FlashMLA's profile; the routes and tokens must be upstream's.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

import pdlab.engine.attention.mla_builder as builder_module
from pdlab.engine.attention.backend import CommonAttentionMetadata, split_decodes_and_prefills
from pdlab.engine.config import AttentionConfig, SchedulerConfig
from pdlab.engine.request import SamplingParams
from pdlab.exercises import engine_runs as er
from pdlab.exercises.base import Exercise, Grader, Words, patched
from pdlab.exercises.cases import Draw, ask, consistent, diagnose_by, random_cases


def _meta(q_lens: list[int], pf: list[bool]) -> CommonAttentionMetadata:
    n = len(q_lens)
    return CommonAttentionMetadata.from_batch(
        q_lens, [0] * n, [0] * n, torch.zeros(n, 1, dtype=torch.int32),
        torch.zeros(sum(q_lens), dtype=torch.int64), [f"r{i}" for i in range(n)], pf,
    )  # fmt: skip


def _split(variant: str, case: dict) -> tuple[int, int, int, int]:
    """The engine's split of ``case`` (``variant`` ""), or a known mistake's."""
    q, pf, thr, uniform, treat = (case[k] for k in ("q", "pf", "thr", "uniform", "treat"))
    if variant == "pops_padding":
        while q and q[-1] == 0:
            q, pf = q[:-1], pf[:-1]
        if not q:
            return 0, 0, 0, 0
    if variant == "not_prefix":  # every decode-like row, not the rows before the first prefill
        d = [i for i, x in enumerate(q) if x <= thr and (treat or not pf[i])]
        nd = sum(q[i] for i in d)
        return len(d), len(q) - len(d), nd, sum(q) - nd
    if variant == "padding_counts":  # a padding row counted as a length unlike the first's

        def pre(i: int) -> bool:
            return q[i] > thr or (uniform and q[i] != q[0]) or (not treat and pf[i])

        nd = next((i for i in range(len(q)) if pre(i)), len(q))
        t = sum(q[:nd])
        return nd, len(q) - nd, t, sum(q) - t
    treat = {"always_or": False, "wrong_switch": not treat}.get(variant, treat)
    uniform = False if variant == "ignore_uniform" else uniform
    return split_decodes_and_prefills(_meta(q, pf), thr, uniform, treat)


_RANDOM_MISTAKES = ("pops_padding", "always_or", "wrong_switch", "ignore_uniform", "not_prefix",
                    "padding_counts")  # fmt: skip


def _draw(rng: Any) -> dict:
    """A batch of 1 to 6 rows in any order, biased to the edges: padding rows (query length
    0) at every position, rows at the threshold and one over it, rows still in their
    prompt, each backend's threshold and switches."""
    thr = rng.choice((1, 1, 2, 4, 128, 512))
    q = [rng.choice((0, 0, 1, 1, 2, thr, thr + 1, rng.randrange(1, 9)))
         for _ in range(rng.randrange(1, 7))]  # fmt: skip
    if not any(q):  # a batch has a row that is not padding
        q[rng.randrange(len(q))] = rng.choice((1, 2, thr))
    pf = [x > 0 and rng.random() < 0.4 for x in q]
    return {"q": q, "pf": pf, "thr": thr, "uniform": rng.random() < 0.5,
            "treat": rng.random() < 0.6}  # fmt: skip


def _shrink(case: dict) -> list[dict]:
    q, pf = case["q"], case["pf"]
    smaller = [case | {"q": q[:i] + q[i + 1 :], "pf": pf[:i] + pf[i + 1 :]} for i in range(len(q))]
    return [c for c in smaller if any(c["q"])]  # a batch has a row that is not padding


def _shown(case: dict) -> str:
    return (f"query_lens={case['q']}, is_prefilling={case['pf']}, "
            f"decode_threshold={case['thr']}, require_uniform={case['uniform']}, "
            f"treat_short_extends_as_decodes={case['treat']}")  # fmt: skip


def _random(fn: Any, g: Grader) -> None:
    def learner(case: dict) -> Any:
        q, pf = list(case["q"]), list(case["pf"])
        got = g.call(fn, q, pf, case["thr"], case["uniform"], case["treat"])
        if (q, pf) != (case["q"], case["pf"]):
            g.fail(Words("ex05_lists_as_given", q=case["q"], pf=case["pf"]),
                   Words("ex05_lists_changed", q=q, pf=pf), "mutated_input")  # fmt: skip
        return got

    def probes(case: dict) -> list[dict]:
        base = {"thr": 4, "uniform": True, "treat": True}
        batches = ([2, 0, 2], [2, 2, 0], [0, 2], [1, 3], [1, 1, 5], [3, 1])
        return [base | {"q": q, "pf": [x > 2 for x in q], "treat": t, "uniform": u, "thr": thr}
                for q in batches for t in (True, False) for u in (True, False)
                for thr in (1, 4)]  # fmt: skip

    variants = {k: functools.partial(_split, k) for k in _RANDOM_MISTAKES}
    random_cases(g, Draw(_draw, _shrink, lambda c: Words("ex05_random_features", **c), _shown),
                 learner, functools.partial(_split, ""), count=150, spec=(int, int, int, int),
                 diagnose=diagnose_by(variants, probes),
                 same=lambda a, b: tuple(a) == tuple(b))  # fmt: skip


def _run(fn: Any | None, g: Grader, what: str):
    def learner(m, decode_threshold=1, require_uniform=False, treat_short_extends_as_decodes=True):
        out = g.call(fn, m.query_lens_cpu.tolist(), m.is_prefilling.tolist(), decode_threshold,
                     require_uniform, treat_short_extends_as_decodes)  # fmt: skip
        return tuple(g.returns(out, (int, int, int, int)))

    seam = learner if fn is not None else split_decodes_and_prefills
    with patched(builder_module, "split_decodes_and_prefills", seam):
        if what.startswith("pd"):
            engine: Any = er.pair(int(what[-1]))
            prompts = er.prompt_of(13)
        else:
            budget = SchedulerConfig(max_num_batched_tokens=10)
            flashmla = AttentionConfig(backend="flashmla")
            engine = er.colocated(attention_config=flashmla, scheduler_config=budget)
            prompts = [er.prompt_of(n, salt=n) for n in (3, 9, 14)]
        out = er.tokens(engine.generate(prompts, SamplingParams(max_tokens=3)))
    tracer = engine.tracer
    routes = [(e.instance, e.step, e["req_id"], e["forward"]) for e in tracer.filter("route")]
    return out, routes, tracer


@functools.lru_cache(maxsize=4)
def _reference(what: str):
    out, routes, _ = _run(None, Grader(0, "en"), what)
    return out, routes


def grade(fn: Any, g: Grader) -> None:
    r = g.rng.randrange
    D = (1, True)  # D's first step: one token, still prefilling
    mixed, padded = [(1, False), (1, False), (5, True)], [(2, False), (0, False), (2, False)]
    cases = [
        (Words("ex05_step_alone_default_switches"), [D], 1, True, True),
        (Words("ex05_step_alone_treat_short_extends"), [D], 1, True, False),
        (Words("ex05_decode_step_fresh_prompt"), [(1, False), D, (7, True)], 1, False, True),
        (Words("ex05_decode_step_fresh_prompt_pcp"), [(1, False), D, (7, True)], 1, False, False),
        (Words("ex05_flashmla_128_uniform_decodes_prompt"), mixed, 128, True, True),
        (Words("ex05_flash_attn_mla_512_varlen"), mixed, 512, False, True),
        (Words("ex05_uniform_with_padding_rows_query"), padded, 4, True, True),
        (Words("ex05_first_row_above_threshold"), [(9, True), (1, False)], 1, False, True),
        (Words("ex05_empty_batch"), [], 1, False, True),
    ]
    rows = sorted(((r(1, 4), bool(r(0, 2))) for _ in range(5)), key=lambda x: x[0])
    cases.append(
        (Words("ex05_random_batch", rows=rows), rows, r(1, 4), bool(r(0, 2)), bool(r(0, 2)))
    )
    answers = []  # every case first: a pure function, and the other cases name a mistake
    for name, rows, thr, uniform, treat in cases:
        q, pf = [x[0] for x in rows], [x[1] for x in rows]
        case = {"q": q, "pf": pf, "thr": thr, "uniform": uniform, "treat": treat}
        want = _split("", case)
        keys = ("always_or", "wrong_switch", "ignore_uniform", "not_prefix", "padding_counts")
        wrong = {k: _split(k, case) for k in keys} if q else {}
        got = ask(fn, list(q), list(pf), thr, uniform, treat)
        answers.append((name, thr, uniform, treat, got, want, wrong))
    seen = [(tuple(got), wrong) for *_, got, _, wrong in answers if isinstance(got, (tuple, list))]
    for name, thr, uniform, treat, got, want, wrong in answers:
        with g.case(Words("ex05_switches", name=name, thr=thr, uniform=uniform, treat=treat)):
            if isinstance(got, Exception):
                raise got
            got = tuple(g.returns(got, (int, int, int, int)))
            g.expect(got, want, consistent(wrong, seen))
    _random(fn, g)
    for what, label in (
        ("pd1", Words("ex05_pair_13")),
        ("pd2", Words("ex05_pair_under_pcp_13")),
        ("mixed", Words("ex05_colocated_flashmla_batch_14_tokens")),
    ):
        with g.case(Words("ex05_inside_mla_builder", label=label)):
            want_out, want_routes = _reference(what)
            out, routes, tracer = _run(fn, g, what)
            table = er.table_text(tracer, "D" if what.startswith("pd") else None, g.lang)
            g.expect(routes, want_routes, evidence=table)
            g.expect(out, want_out, evidence=table)


_M = {
    "wrong_switch": (
        "OR-ing is_prefilling under the wrong switch: a row still in its prompt is a prefill "
        "only when treat_short_extends_as_decodes is False (the MLA builder passes not use_pcp)",
        "在错误的开关下 OR 了 is_prefilling：只有 treat_short_extends_as_decodes 为 False 时"
        "（MLA builder 传入 not use_pcp），仍在提示词阶段的行才算预填充"),
    "always_or": (
        "OR-ing is_prefilling always: by default D's one-token step is a decode (forward_mqa)",
        "总是 OR 上 is_prefilling：默认情况下 D 的一 token 步骤是解码（forward_mqa）",
    ),
    "ignore_uniform": (
        "ignoring require_uniform: under a UNIFORM backend every decode has the first row's "
        "query length",
        "忽略了 require_uniform：UNIFORM 后端要求每个 decode 行的 query 长度与第一行相同",
    ),
    "not_prefix": (
        "counting every decode-like row: the decodes are the rows before the first prefill",
        "把所有像解码的行都算进去了：decode 行是第一个 prefill 行之前的那些行",
    ),
    "pops_padding": (
        "dropping the trailing padding rows (query length 0): they are rows of the batch "
        "too, counted among the decodes when no prefill comes before them",
        "丢掉了末尾的填充行（query 长度 0）：它们也是批次的行，前面没有 prefill 行时就算作 "
        "decode 行"),
    "mutated_input": (
        "changing query_lens or is_prefilling in place: the lists are the caller's (upstream "
        "the split reads the attention metadata the whole step uses); the split only counts",
        "就地修改了 query_lens 或 is_prefilling：这些列表属于调用者（上游的划分读的是整步都要用的"
        "注意力元数据）；划分只负责计数"),
    "padding_counts": (
        "counting a padding row (query length 0) as a different length under "
        "require_uniform: padding never ends the decodes",
        "在 require_uniform 下把填充行（query 长度 0）当成了不同的长度：填充行不会结束 decode 行",
    ),
}  # fmt: skip

_SLIP = """\
def split_decodes_and_prefills(query_lens, is_prefilling, decode_threshold=1,
                               require_uniform=False, treat_short_extends_as_decodes=True):
    if (max(query_lens, default=0) <= decode_threshold
            and (not require_uniform or decode_threshold <= 1) and SWITCH_EARLY):
        return len(query_lens), 0, sum(query_lens), 0

    def is_prefill(i):
        q = query_lens[i]
        prefill = q > decode_threshold or (require_uniform and UNIFORM)
        return prefill or (SWITCH and is_prefilling[i])

    nd = next((i for i in range(len(query_lens)) if is_prefill(i)), len(query_lens))
    t = sum(query_lens[:nd])
    return nd, len(query_lens) - nd, t, sum(query_lens) - t
"""


def _slip(uniform: str = "q not in (query_lens[0], 0)",
          switch: str = "not treat_short_extends_as_decodes") -> str:  # fmt: skip
    early = "False" if switch == "True" else (
        "not " + switch if switch.startswith("treat") else switch[4:])  # fmt: skip
    return (_SLIP.replace("SWITCH_EARLY", early).replace("UNIFORM", uniform)
            .replace("SWITCH", switch))  # fmt: skip


_POP = "    while query_lens and query_lens[-1] == 0:\n        query_lens.pop()\n"
_NOT_PREFIX = """\
def split_decodes_and_prefills(query_lens, is_prefilling, decode_threshold=1,
                               require_uniform=False, treat_short_extends_as_decodes=True):
    decodes = [i for i, q in enumerate(query_lens) if q <= decode_threshold
               and (treat_short_extends_as_decodes or not is_prefilling[i])]
    t = sum(query_lens[i] for i in decodes)
    return len(decodes), len(query_lens) - len(decodes), t, sum(query_lens) - t
"""

EXERCISE = Exercise(
    number=5, slug="ex05_split", function="split_decodes_and_prefills",
    library="pdlab/engine/attention/backend.py (split_query_lens)",
    own=("pdlab.engine.attention.backend:split_decodes_and_prefills",
         "pdlab.engine.attention.backend:split_query_lens"), notebook="05_pd_decode_side",
    title={"en": "split_decodes_and_prefills and its switches",
           "zh": "split_decodes_and_prefills 及其开关"},
    statement={
        "en": """\
Exercise 5: split_decodes_and_prefills (vLLM 0.33.0's vllm/v1/attention/backends/utils.py)

The batch arrives in the runner's order, decode-like rows first. The decodes are the rows
before the first row that counts as a prefill, and a row counts as a prefill when:
  * its query length is above decode_threshold (the backend's reorder_batch_threshold);
  * with require_uniform, its query length differs from the first row's (a query length
    of 0 is padding and never counts);
  * with treat_short_extends_as_decodes=False, it is still in its prompt (is_prefilling),
    whatever its length.
The MLA builder passes treat_short_extends_as_decodes = not use_pcp.

Return (num_decodes, num_prefills, num_decode_tokens, num_prefill_tokens). The grader
then lets the MLA builder route real batches with your function.""",
        "zh": """\
练习 5：split_decodes_and_prefills（vLLM 0.33.0 的 vllm/v1/attention/backends/utils.py）

批次按 model runner 的顺序到达，像解码的行在前。decode 行是第一个“算作预填充”的行之前的那些行；
一行在以下情况算作预填充：
  * 它的 query 长度大于 decode_threshold（后端的 reorder_batch_threshold）；
  * 开启 require_uniform 时，它的 query 长度与第一行不同（长度 0 是填充，不计）；
  * treat_short_extends_as_decodes=False 时，它仍在提示词阶段（is_prefilling），不论长度。
MLA builder 传入 treat_short_extends_as_decodes = not use_pcp。

返回 (num_decodes, num_prefills, num_decode_tokens, num_prefill_tokens)。评分随后让 MLA
builder 用你的函数为真实批次路由。"""},
    hints={
        "en": (
            "Find the index of the first row that counts as a prefill; everything before it "
            "is a decode, everything from it on a prefill.",
            "is_prefilling matters only when treat_short_extends_as_decodes is False: that "
            "is how D's one-token step becomes a prefill under PCP and a decode otherwise."),
        "zh": (
            "找出第一个算作预填充的行的下标；它之前的都是解码，从它开始都是预填充。",
            "只有 treat_short_extends_as_decodes 为 False 时 is_prefilling 才起作用：D 的一 token "
            "步骤在 PCP 下因此成为预填充，否则是解码。"),
    },
    mistakes={k: {"en": en, "zh": zh} for k, (en, zh) in _M.items()}, grade=grade,
    slips={
        "wrong_switch": _slip(switch="treat_short_extends_as_decodes"),
        "always_or": _slip(switch="True"),
        "ignore_uniform": _slip(uniform="False"),
        "padding_counts": _slip(uniform="q != query_lens[0]"),
        "not_prefix": _NOT_PREFIX,
        "mutated_input": _slip().replace("=True):\n", "=True):\n" + _POP, 1),
        "pops_padding": _slip().replace("=True):\n", "=True):\n    query_lens = list(query_lens)\n"
                                        + _POP, 1),
    },
)  # fmt: skip
