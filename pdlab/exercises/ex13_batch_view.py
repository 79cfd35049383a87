"""Exercise 13: the batch view of chapter 7 and notebook 07: is D's step a full decode
graph, and what does one arrival's first row cost every running decode?

The learner's ``batch_view`` takes a step of D's batch as ``pdlab sim`` builds it (one
token per row, ``pdlab/sim/simulator.py``) and returns ``decode_graph_eligible`` and the
step's modelled time from the simulator's cost model (``pdlab/sim/costs.py``). Graded on
named batches against the engine's own chain (Model Runner V2's
:func:`pdlab.engine.worker.gpu.batch.gather_batch_req_state`, the MLA builder's
``split_decodes_and_prefills`` and :func:`pdlab.sim.costs.step_cost`), then inside the
simulator: for each routing and design, every step's eligibility and time come from the
learner's function, and the TPOT the simulation reports must be the unpatched one.
No upstream file: vLLM measures its steps; it has no cost model.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pdlab.sim.simulator as sim
from pdlab.engine.attention.backend import CommonAttentionMetadata, split_decodes_and_prefills
from pdlab.engine.attention.mla_builder import MLAMetadataBuilder
from pdlab.engine.config import AttentionConfig, ModelConfig, ParallelConfig
from pdlab.engine.worker.gpu.batch import gather_batch_req_state
from pdlab.exercises.base import Exercise, Grader, Words, patched, wrong_type
from pdlab.exercises.bilingual import slip
from pdlab.exercises.cases import Draw, ask, consistent, diagnose_by, random_cases
from pdlab.sim.costs import Row, StepCost, step_cost
from pdlab.sim.profiles import device_profile
from pdlab.sim.report import summarize

GPU = "H200"


@functools.lru_cache(maxsize=1)
def _setup() -> tuple[ModelConfig, Any]:
    return ModelConfig.deepseek_v3(), device_profile(GPU)


def engine_view(model, profile, rows, routing, variant: str = "") -> tuple[bool, float]:
    """The step as the engine routes it (or as the mistake ``variant`` does): the runner's
    flags, the builder's split, the simulator's cost."""
    import torch

    use_pcp = routing == "pcp"
    ids = [f"r{i}" for i in range(len(rows))]
    b = gather_batch_req_state(
        dict.fromkeys(ids, 1), {r: c for r, (c, _) in zip(ids, rows)},
        {r: p for r, (_, p) in zip(ids, rows)}, {r: p for r, (_, p) in zip(ids, rows)},
        model_runner="v1" if routing == "v1" and variant != "v1_as_v2" else "v2",
        use_pcp=use_pcp,
        reorder_batch_threshold=_builder(use_pcp).reorder_batch_threshold,
    )  # fmt: skip
    builder, n = _builder(use_pcp), len(ids)
    meta = CommonAttentionMetadata.from_batch(
        b.num_scheduled_tokens, b.num_computed_tokens, b.num_prompt_tokens,
        torch.zeros(n, 1, dtype=torch.int32), torch.zeros(n, dtype=torch.int64), b.req_ids,
        b.is_prefilling,
    )  # fmt: skip
    treat = builder.treat_short_extends_as_decodes or variant == "pcp_row_as_decode"
    nd, _, _, _ = split_decodes_and_prefills(
        meta, builder.reorder_batch_threshold, builder.require_uniform, treat
    )
    eligible = b.decode_graph_eligible
    if variant == "prefilling_breaks_graph" and routing == "v2":
        eligible = not any(b.is_prefilling)
    if variant == "context_gt_one" and routing == "v2":
        eligible = all(not pf or c > 1 for c, pf in zip(b.num_computed_tokens, b.is_prefilling))
    shift = 1 if variant == "context_plus_one" else 0
    ordered = [Row(c + shift) for c in b.num_computed_tokens]
    cost = step_cost(model, ordered[:nd], ordered[nd:], eligible or variant == "no_launch_cost")
    return eligible, cost.time_s(profile)


@functools.lru_cache(maxsize=2)
def _builder(use_pcp: bool) -> MLAMetadataBuilder:
    pcp = ParallelConfig(prefill_context_parallel_size=2 if use_pcp else 1)
    return MLAMetadataBuilder(64, AttentionConfig(gpu=GPU), pcp)


_VARIANTS = ("prefilling_breaks_graph", "no_launch_cost", "pcp_row_as_decode", "context_plus_one",
             "v1_as_v2", "context_gt_one")  # fmt: skip
_SPEC = (bool, float)  # (decode_graph_eligible, step_time_s)


def _cases(g: Grader) -> list[tuple[Words, list[tuple[int, int]], str]]:
    b = g.rng.choice((8, 32, 64))
    ctx = g.rng.randrange(1000, 9000)
    decodes = [(4096 + i, 4096 + i) for i in range(b)]
    return [
        (Words("ex13_decodes_alone", b=b), decodes, "v2"),
        (Words("ex13_decodes_recompute_first_row_over", b=b), decodes + [(4095, 4096)], "v2"),
        (Words("ex13_decodes_append_prompt_first_row", b=b), decodes + [(4096, 4097)], "v2"),
        (Words("ex13_decodes_recompute_first_row_under", b=b), decodes + [(4095, 4096)], "pcp"),
        (Words("ex13_decodes_first_token_first_row", b=b), decodes + [(4096, 4096)], "pcp"),
        (Words("ex13_decodes_recompute_first_row_model", b=b), decodes + [(4095, 4096)], "v1"),
        (Words("ex13_one_token_prompt_nothing_cached"), decodes[:4] + [(0, 1)], "v2"),
        (Words("ex13_one_token_prompt_model_runner"), decodes[:4] + [(0, 1)], "v1"),
        (Words("ex13_random_two_arrivals_over_contexts", ctx=ctx),
         decodes[: b // 2] + [(ctx - 1, ctx), (ctx + 7, ctx + 8)], "pcp"),
    ]  # fmt: skip


def _same(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and abs(a[1] - b[1]) <= 1e-9 + 1e-6 * abs(b[1])


def _shown(v: tuple) -> Words:
    return Words("ex13_decode_graph_eligible_step_ms", eligible=v[0], ms=v[1] * 1e3)  # fmt: skip


def grade(fn: Any, g: Grader) -> None:
    model, profile = _setup()
    answers = []
    for name, rows, routing in _cases(g):
        want = engine_view(model, profile, rows, routing)
        wrong = {k: engine_view(model, profile, rows, routing, k) for k in _VARIANTS}
        wrong = {k: v for k, v in wrong.items() if not _same(v, want)}
        got = ask(fn, model, profile, [tuple(r) for r in rows], routing)
        answers.append((name, routing, got, want, wrong))
    seen = [(got, {k: got if _same(got, v) else v for k, v in w.items()})  # close: equal
            for *_, got, _, w in answers
            if not isinstance(got, Exception) and wrong_type(got, _SPEC) is None]  # fmt: skip
    for name, routing, got, want, wrong in answers:
        with g.case(Words("ex13_case_routing", name=name, routing=routing)):
            if isinstance(got, Exception):
                raise got
            got = g.returns(got, _SPEC)
            if not _same(got, want):
                ranked = consistent(wrong, seen)
                key = next((k for k, v in ranked.items() if _same(got, v)), None)
                g.fail(_shown(want), _shown(got), key)
    _random(fn, g)
    for routing, design in (("v2", "recompute"), ("pcp", "recompute"), ("pcp", "first_token"),
                            ("v1", "append_prompt")):  # fmt: skip
        with g.case(Words("ex13_inside_pdlab_sim_design_routing", design=design, routing=routing)):
            want_s = _simulated(None, g, routing, design)
            got_s = _simulated(fn, g, routing, design)
            for key in ("tpot_p50_s", "tpot_p99_s", "t2t_d_p50_s", "steps"):
                if abs(got_s[key] - want_s[key]) > 1e-9 + 1e-6 * abs(want_s[key]):
                    g.fail(f"{key} = {want_s[key]:.6g}", f"{key} = {got_s[key]:.6g}")


def _draw(rng: Any) -> dict:
    """A step of 1 to 6 one-token rows ``(num_computed_tokens, prefill_len)`` under one
    routing, biased to the edges: a one-token prompt, one token computed, the last prompt
    token (recompute's row), the first token past the prompt (first_token's row)."""
    rows = []
    for _ in range(rng.randrange(1, 7)):
        plen = rng.choice((1, 2, rng.randrange(2, 9000)))
        c = rng.choice((0, 1, plen - 1, plen - 1, plen, plen + rng.randrange(1, 50)))
        rows.append((max(c, 0), plen))
    return {"rows": rows, "routing": rng.choice(("v2", "v2", "pcp", "v1"))}


def _shrink(case: dict) -> list[dict]:
    rows = case["rows"]
    return [case | {"rows": rows[:i] + rows[i + 1:]} for i in range(len(rows))] if len(
        rows) > 1 else []  # fmt: skip


def _random(fn: Any, g: Grader) -> None:
    model, profile = _setup()

    def engine(case: dict, variant: str = "") -> tuple[bool, float]:
        return engine_view(model, profile, case["rows"], case["routing"], variant)

    def probes(case: dict) -> list[dict]:
        rows = [(4096, 4096), (1, 9), (0, 1), (4095, 4096)]
        return [{"rows": [r, *more], "routing": x} for r in rows for x in ("v2", "pcp", "v1")
                for more in ([], case["rows"])]  # fmt: skip

    random_cases(g, Draw(_draw, _shrink, lambda c: Words("ex13_random_features", **c),
                         lambda c: f"rows={c['rows']}, routing={c['routing']!r}"),
                 lambda case: g.call(fn, model, profile, list(case["rows"]), case["routing"]),
                 engine, count=60, spec=_SPEC, same=_same,
                 diagnose=diagnose_by({k: functools.partial(engine, variant=k) for k in _VARIANTS},
                                      probes, _same))  # fmt: skip


class _Timed(StepCost):
    """A step cost whose time is the learner's."""

    def __init__(self, cost: StepCost, time_s: float) -> None:
        super().__init__(cost.groups, cost.eager_launches)
        self._time_s = time_s

    def time_s(self, profile: Any) -> float:
        return self._time_s


def _simulated(fn: Any, g: Grader, routing: str, design: str) -> dict[str, Any]:
    """``pdlab sim``'s summary, each step's eligibility and time from ``fn`` (or the
    simulator's own, when ``fn`` is None)."""
    model, profile = _setup()
    cfg = sim.SimConfig(design=design, routing=routing, batch_size=16, arrival_rate=40.0,
                        duration_s=0.3, output_len=8, seed=g.seed % 1000)  # fmt: skip
    if fn is None:
        return summarize(sim.simulate(cfg, model, profile, GPU))
    real_gather, real_cost, last = sim.gather_batch_req_state, sim.step_cost, {}

    def gather(q, c, p, pl, **kw):
        b = real_gather(q, c, p, pl, **kw)
        rows = [(c[r], pl[r]) for r in q]
        eligible, dt = g.returns(g.call(fn, model, profile, rows, routing), _SPEC)
        last["dt"] = float(dt)
        return dataclasses.replace(b, decode_graph_eligible=bool(eligible))

    def cost(*a, **kw):
        return _Timed(real_cost(*a, **kw), last["dt"])

    with patched(sim, "gather_batch_req_state", gather), patched(sim, "step_cost", cost):
        return summarize(sim.simulate(cfg, model, profile, GPU))


_slip = functools.partial(slip, "ex13_batch_view")


EXERCISE = Exercise(
    number=13, slug="ex13_batch_view", function="batch_view",
    library="pdlab/engine/worker/gpu/batch.py, pdlab/engine/attention/backend.py, "
            "pdlab/sim/costs.py",
    own=("pdlab.engine.worker.gpu.batch:gather_batch_req_state",
         "pdlab.engine.attention.backend:split_query_lens"), notebook="07_pd_designs",
    title={"en": "The batch view: the decode graph and TPOT",
           "zh": "批次视图：完整的 decode CUDA graph 与 TPOT"},
    statement={
        "en": """\
Exercise 13: the batch view (pdlab sim)

D runs a batch of decodes, and an arriving request adds its first row to it: under
recompute one token over N - 1 cached of an N-token prompt (still is_prefilling), under
append_prompt one over N of N + 1 (still is_prefilling), under first_token a plain decode
over N. Whether that step replays the full decode CUDA graph (decode_graph_eligible)
decides whether every running decode pays eager kernel launches in it: its TPOT.

Write batch_view(model, profile, rows, routing): rows are (num_computed_tokens,
prefill_len), one token scheduled each; routing is "v2" (Model Runner V2), "pcp" (V2 with
prefill context parallelism: no prefill_runs_as_decode, and the MLA builder passes
treat_short_extends_as_decodes = not use_pcp) or "v1" (its graph wants rows of
uniform_decode_query_len = 1 + K tokens; with no drafts here, one token each).
Return (decode_graph_eligible, step_time_s), the time from pdlab sim's cost model:
step_cost(model, decode_rows, prefill_rows, eligible).time_s(profile), a Row(context)
per row.

The grader compares with the engine's own runner, builder and cost model on named
batches, then runs pdlab sim with your function pricing every step: the TPOT it reports
must be the unpatched simulator's.""",
        "zh": """\
练习 13：批次视图（pdlab sim）

D 运行着一批 decode 行，新到的请求把它的第一行加进来：recompute 下是 N 个 token 的提示词在 N - 1
个已缓存之上算 1 个（仍 is_prefilling），append_prompt 下是 N + 1 中在 N 之上算 1 个（仍
is_prefilling），first_token 下是在 N 之上的普通 decode 行。这一步能否重放完整解码 CUDA graph
（decode_graph_eligible），决定了每个正在运行的 decode 行这一步是否要付逐个启动算子的开销：
也就是它的 TPOT。

请实现 `batch_view(model, profile, rows, routing)`：`rows` 是
`(num_computed_tokens, prefill_len)`，每行调度 1 个 token；`routing` 是 "v2"
（Model Runner V2）、"pcp"（开启预填充上下文并行的 V2：没有 prefill_runs_as_decode，
MLA builder 传入 treat_short_extends_as_decodes = not use_pcp）或 "v1"（它的图要求每行
uniform_decode_query_len = 1 + K 个 token；这里没有草稿，每行一个）。
返回 `(decode_graph_eligible, step_time_s)`，时间取自 pdlab sim 的代价模型：
`step_cost(model, decode_rows, prefill_rows, eligible).time_s(profile)`，每行一个
`Row(context)`。

评分先在若干命名批次上与引擎自己的 model runner、builder 和代价模型比较，再让 pdlab sim 用你的函数
为每一步计价：它报告的 TPOT 必须与未替换的模拟器相同。"""},
    hints={
        "en": (
            "is_prefilling is num_computed_tokens < prefill_len. Under V2 without PCP a "
            "prefilling row of one token over existing context runs as a decode, so "
            "recompute's first row keeps the graph; under PCP it does not.",
            "Under PCP a prefilling row is a prefill for the builder too (forward_mha): put it "
            "in prefill_rows. Every other row here is a decode. Row(c) is c tokens cached "
            "and one new; the cost model adds the new one itself."),
        "zh": (
            "is_prefilling 即 num_computed_tokens < prefill_len。不开 PCP 的 V2 中，在已有上下文"
            "之上只有一个 token 的 prefill 行按解码运行，所以 recompute 的第一行保住了图；"
            "PCP 下则不然。",
            "PCP 下 prefill 行对 builder 而言也是预填充（forward_mha）：把它放进 prefill_rows。"
            "这里其余每行都是 decode 行。Row(c) 表示 c 个已缓存 token 加 1 个新 token；代价模型"
            "自己会算上新的那个。"),
    },
    mistakes={
        "prefilling_breaks_graph": {
            "en": "any row in its prompt breaks the graph, under V2 too: V2's "
            "prefill_runs_as_decode keeps recompute's first row (one token over N - 1) "
            "inside the full decode graph; only PCP loses it",
            "zh": "V2 下也认为任何处于提示词阶段的行都会破坏图：V2 的 prefill_runs_as_decode "
            "让 recompute 的第一行（在 N - 1 之上算 1 个）留在完整的 decode CUDA graph 里；"
            "只有 PCP 会失去它"},
        "no_launch_cost": {
            "en": "pricing a step that is not decode_graph_eligible as if it replayed the "
            "graph: outside the graph every attention kernel of every layer launches "
            "eagerly, and that is what every running decode's TPOT pays",
            "zh": "把不是 decode_graph_eligible 的一步按重放图来计价：图之外每一层的每个注意力算子"
            "都要逐个启动，每个正在运行的 decode 行的 TPOT 都要为此付出"},
        "pcp_row_as_decode": {
            "en": "a prefilling row as a decode under PCP: the MLA builder passes "
            "treat_short_extends_as_decodes = not use_pcp, so under PCP that row takes "
            "forward_mha",
            "zh": "PCP 下把 prefill 行当成了 decode 行：MLA builder 传入"
            " treat_short_extends_as_decodes = not use_pcp，所以 PCP 下这一行走 forward_mha"},
        "v1_as_v2": {
            "en": "Model Runner V1 judged as V2: V1 has no prefill_runs_as_decode; its full "
            "decode graph wants a uniform batch of 1 + K-token rows (one token each without "
            "drafts), whatever is_prefilling says",
            "zh": "把 Model Runner V1 当成了 V2：V1 没有 prefill_runs_as_decode；"
            "它的完整的 decode CUDA graph 只要求每行 1 + K 个 token 的均匀解码批次（没有草稿时"
            "每行一个），不管 is_prefilling 怎么说"},
        "context_gt_one": {
            "en": "asking for more than one computed token (c > 1) under V2: one token of "
            "context is context, so a prompt row of one token over exactly one computed "
            "token runs as a decode and keeps the graph (the test is c > 0)",
            "zh": "在 V2 下要求已计算 token 多于一个（c > 1）：一个 token 的上下文也是上下文，"
            "所以在恰好一个已计算 token 之上只有一个 token 的提示词行按解码运行，"
            "保住了图（判断是 c > 0）"},
        "context_plus_one": {
            "en": "Row(num_computed_tokens + 1): a Row's context is the tokens cached before "
            "the step; the cost model adds the scheduled token itself",
            "zh": "写成了 `Row(num_computed_tokens + 1)`：`Row` 的 `context` 是这一步之前已缓存的 "
            "token；代价模型自己会加上调度的那个 token"},
    },
    grade=grade,
    slips={
        "prefilling_breaks_graph": _slip("all(not pf or c > 0 for (c, _), pf in zip(rows, "
                                         "prefilling))", "not any(prefilling)"),
        "no_launch_cost": _slip("prefills, eligible)", "prefills, True)"),
        "pcp_row_as_decode": _slip(
            "if not (use_pcp and pf)]\n    prefills = [Row(c) for (c, _), pf in zip(rows, "
            "prefilling) if use_pcp and pf]",
            "]\n    prefills = []",
        ),
        "context_plus_one": _slip("[Row(c)", "[Row(c + 1)"),
        "context_gt_one": _slip("c > 0 for", "c > 1 for"),
        "v1_as_v2": _slip(
            '    if routing == "v1":\n        # V1\'s full decode graph wants a uniform batch of '
            "1 + K-token rows: with no drafts,\n        # one token each, as every row here is.\n"
            "        eligible = bool(rows)\n    elif use_pcp:",
            "    if use_pcp:",
        ),
    },
)  # fmt: skip
