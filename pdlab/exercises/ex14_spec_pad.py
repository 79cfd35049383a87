"""Exercise 14: D's padded row under MTP: ``Scheduler._pad_spec_decode``
(``pdlab/engine/core/sched/scheduler.py``; upstream the ``pad_spec_decode`` block of ``schedule``'s
waiting loop in ``vllm/v1/core/sched/scheduler.py``, vLLM 0.33.0).

Graded on random calls against the scheduler's own method, then in the real
:class:`Scheduler` with :class:`pdlab.engine.worker.fake_runner.FakeModelRunner` (D's side
through a real :class:`PDConnector`, and each case the padding rule has), then in a live
P/D pair with MTP: every call's answer, every step's scheduled tokens and placeholder
drafts, and the tokens must be the scheduler's own.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import torch

from pdlab.engine.config import CacheConfig, SchedulerConfig, SpeculativeConfig
from pdlab.engine.core.sched.scheduler import Scheduler
from pdlab.engine.distributed.kv_transfer.pd_connector import PDConnector
from pdlab.engine.distributed.kv_transfer.transport import InProcessTransport
from pdlab.engine.request import Request, SamplingParams
from pdlab.engine.worker.fake_runner import FakeModelRunner
from pdlab.exercises.base import Exercise, Grader, Words, patched
from pdlab.exercises.bilingual import slip
from pdlab.exercises.cases import Draw, consistent, diagnose_by, random_cases

B = 4


def _target(rid: str, pos: int) -> int:
    return 100 + (pos * 7 + len(rid)) % 53


def _sched(k: int, connector: Any = None, budget: int = 64, threshold: int = 0,
           max_model_len: int = 256) -> tuple[Scheduler, FakeModelRunner]:  # fmt: skip
    spec = SpeculativeConfig("mtp", k)
    cfg = SchedulerConfig(max_num_batched_tokens=budget, long_prefill_token_threshold=threshold)
    s = Scheduler(cfg, CacheConfig(block_size=B, num_blocks=64), max_model_len,
                  connector=connector, speculative_config=spec)  # fmt: skip
    runner = FakeModelRunner(connector, sample=_target, num_speculative_tokens=k, draft=_target)
    return s, runner


def _step(s: Scheduler, runner: FakeModelRunner, log: list, tokens: dict | None = None) -> list:
    """One step; its scheduled tokens and drafts into ``log``, its tokens into ``tokens``."""
    so = s.schedule()
    if so.total_num_scheduled_tokens:
        log.append((dict(so.num_scheduled_tokens), dict(so.scheduled_spec_decode_tokens)))
    outs = s.update_from_output(so, runner.execute_model(so))
    drafts = runner.take_draft_token_ids()
    if drafts is not None:
        s.update_draft_token_ids(drafts)
    for o in outs if tokens is not None else ():
        tokens.setdefault(o.req_id, []).extend(o.new_token_ids)
    return outs


def _req(rid: str, n: int, max_tokens: int = 4, start: int = 0) -> Request:
    return Request(rid, list(range(start, start + n)), SamplingParams(max_tokens=max_tokens))


def _finish(s: Scheduler, runner: FakeModelRunner, log: list, tokens: dict) -> None:
    for _ in range(200):
        if not s.has_requests():
            return
        _step(s, runner, log, tokens)


def _live(k: int, seam: Any) -> tuple[list, dict]:
    """A live P/D pair on the tiny model with MTP (K drafts): D's steps and the tokens."""
    from pdlab.exercises import engine_runs as er

    pair = er.pair(speculative_config=SpeculativeConfig("mtp", k))
    sched = pair.decode.scheduler
    with patched(sched, "_pad_spec_decode", seam(sched)):
        out = pair.generate(er.prompt_of(13), SamplingParams(max_tokens=er.MAX_TOKENS))
    rows = [(r["num_computed_tokens_before"], r["num_scheduled_tokens"])
            for r in pair.tracer.step_rows("D")]  # fmt: skip
    return rows, {"x": out[0].output_token_ids, "finish": out[0].finish_reason}


def _scenario(name: str, seam: Any) -> tuple[list, dict]:
    """Run scenario ``name`` with ``seam(scheduler)`` installed as D's (or the only)
    scheduler's method; the steps it scheduled and the tokens."""
    if name.startswith("live"):
        return _live(int(name[4:]), seam)
    log: list = []
    tokens: dict = {}
    if name.startswith("pd"):
        k, n = int(name[2]), int(name[4:])
        transport = InProcessTransport()
        p_conn, d_conn = (PDConnector(r, i, transport, B) for r, i in
                          (("prefill", "P"), ("decode", "D")))  # fmt: skip
        p_conn.register_kv_caches([torch.zeros(64, B, 2)])
        d_conn.register_kv_caches([torch.zeros(64, B, 2)])
        p = Scheduler(SchedulerConfig(), CacheConfig(block_size=B, num_blocks=64), 256,
                      connector=p_conn)  # fmt: skip
        p_runner = FakeModelRunner(p_conn, sample=_target)
        d, d_runner = _sched(k, d_conn)
        p.add_request(Request("x", list(range(n)), SamplingParams(max_tokens=6),
                              kv_transfer_params={"do_remote_decode": True}))  # fmt: skip
        params = None
        while params is None:
            params = next((o.kv_transfer_params for o in _step(p, p_runner, []) if o.finished),
                          None)  # fmt: skip
        with patched(d, "_pad_spec_decode", seam(d)):
            d.add_request(Request("x", list(range(n)), SamplingParams(max_tokens=6),
                                  kv_transfer_params=params))  # fmt: skip
            for _ in range(60):
                if not (d.has_requests() or p.has_requests()):
                    break
                _step(d, d_runner, log, tokens)
                if p.has_requests():
                    _step(p, p_runner, [])
        return log, tokens
    kw = {"budget": 5} if name == "budget" else {}
    kw |= {"budget": 12, "threshold": 8} if name == "mid_prefill" else {}
    if name.startswith("room"):
        kw["max_model_len"] = int(name[4:])
    s, runner = _sched(1 if name == "mid_prefill" else 2, **kw)
    with patched(s, "_pad_spec_decode", seam(s)):
        if name != "fresh":
            s.add_request(_req("warm", 9, max_tokens=1))
            _finish(s, runner, [], {})
        if name == "budget":
            s.add_request(_req("run", 3, max_tokens=20, start=50))
            _step(s, runner, log)
        if name == "mid_prefill":
            s.add_request(_req("long", 40, start=50))
            _step(s, runner, log)
        if name == "fresh":
            s.add_request(_req("one", 1, start=30))
            _step(s, runner, log)
            s.add_request(_req("two", 1, start=40))
        else:
            s.add_request(_req("hit", 9, max_tokens=2 if name.startswith("room") else 3))
        if name == "budget":
            s.add_request(_req("next", 1, start=70))
        _finish(s, runner, log, tokens)
    return log, tokens


_CASES = (
    ("pd1_9", Words("ex14_first_step_one_token_over")),
    ("pd2_8", Words("ex14_first_step_two_whole_blocks")),
    ("pd2_3", Words("ex14_first_step")),
    ("cached", Words("ex14_fully_prefix_cached_prompt")),
    ("budget", Words("ex14_padded_row_does_not_fit")),
    ("mid_prefill", Words("ex14_beside_running_row_that_is")),
    ("fresh", Words("ex14_fresh_one_token_prompts_alone")),
    ("room12", Words("ex14_max_model_len_12_room")),
    ("room11", Words("ex14_max_model_len_11_no")),
    ("live2", Words("ex14_live_pair_on_tiny_model")),
)  # fmt: skip


@functools.lru_cache(maxsize=16)
def _reference(name: str) -> tuple[list, dict]:
    return _scenario(name, lambda s: types.MethodType(type(s)._pad_spec_decode, s))


def _variant(key: str, k: int, sampled: int, max_len: int, args: tuple) -> int | None:
    """What a known mistake answers for one call."""
    n, c, budget, prefill, anyone = args
    pads = k > 0 and sampled > 0 and (n == 1 or (key == "pads_short_rows" and n < 1 + k))
    pads = pads and (key == "always_pad" or not prefill)
    pads = pads and (key == "no_context_rule" or anyone or c > 0)
    if not pads:
        return n
    padded = k if key == "pad_by_k" else 1 + k
    fits = padded < budget if key == "budget_ge" else padded <= budget
    if key == "budget_before_room" and not fits:
        return None
    if key != "no_room_check" and c + padded + sampled > max_len:
        return n
    if not fits:
        return n if key == "schedule_unpadded" else None
    return padded


_MISTAKES = ("always_pad", "no_context_rule", "pad_by_k", "no_room_check", "schedule_unpadded",
             "pads_short_rows", "budget_ge", "budget_before_room")  # fmt: skip


def _draw(rng: Any) -> dict:
    """One call of the method, biased to its edges: K from 0 to 3, one new token or 1 + K
    or fewer, the budget and max_model_len at, under and over the padded row's needs."""
    k = rng.choice((0, 1, 2, 2, 3, 3))
    n = 1 if rng.random() < 0.6 else rng.choice((2, k, 1 + k, 2 + k, rng.randrange(1, 20)))
    c = rng.choice((0, 0, 1, rng.randrange(1, 40)))
    edge = c + 1 + k + 1
    budget = rng.choice((k, k, 1 + k, 2 + k, rng.randrange(1, 64)))
    max_len = rng.choice((edge - 1, edge - 1, edge, edge + 1, 256))
    return {"k": k, "n": max(n, 1), "c": c, "budget": max(budget, 1), "max_len": max_len,
            "prefill": rng.random() < 0.15, "anyone": rng.random() < 0.6}  # fmt: skip


def _shrink(case: dict) -> list[dict]:
    """Smaller cases: fewer computed tokens (max_model_len moving with them), fewer new
    tokens, a smaller K, flags off."""
    out = []
    if case["c"] > 0:
        for c in (0, case["c"] // 2, case["c"] - 1):
            out.append(case | {"c": c, "max_len": case["max_len"] - case["c"] + c})
    if case["n"] > 1:
        out.append(case | {"n": case["n"] - 1})
    if case["max_len"] > case["c"] + case["k"] + 3:
        out.append(case | {"max_len": case["c"] + case["k"] + 3})
    if case["budget"] > case["k"] + 2:
        out.append(case | {"budget": case["k"] + 2})
    if case["k"] > 1:
        out.append(case | {"k": case["k"] - 1})
    out += [case | {f: False} for f in ("prefill", "anyone") if case[f]]
    return [c for c in out if c != case]


def _features(case: dict) -> Words:
    padded, edge = 1 + case["k"], case["c"] + 1 + case["k"] + 1
    rel = {-1: "<", 0: "=", 1: ">"}
    sign = (case["budget"] > padded) - (case["budget"] < padded)
    room = (case["max_len"] > edge) - (case["max_len"] < edge)
    beside = "ex14_beside_prefill" if case["prefill"] else (
        "ex14_beside_running" if case["anyone"] else "ex14_alone")  # fmt: skip
    return Words("ex14_random_features", k=case["k"], n=case["n"], c=case["c"],
                 budget=f"token_budget {rel[sign]} 1 + K",
                 room=f"max_model_len {rel[room]} num_computed_tokens + 1 + K + 1",
                 beside=Words(beside))  # fmt: skip


def _mistaken(key: str, case: dict) -> int | None:
    """What the mistake ``key`` answers for one random case."""
    return _variant(key, case["k"], 1, case["max_len"], _args(case))


def _args(case: dict) -> tuple:
    return case["n"], case["c"], case["budget"], case["prefill"], case["anyone"]


_CALL = ("num_new_tokens={}, num_computed_tokens={}, token_budget={}, prefill_scheduled={}, "
         "any_scheduled={}")  # fmt: skip


def _shown(case: dict) -> str:
    return f"K={case['k']}, max_model_len={case['max_len']}: " + _CALL.format(*_args(case))


def _self(case: dict) -> Any:
    """What the method reads of its scheduler, for one call."""
    return types.SimpleNamespace(num_spec_tokens=case["k"], num_sampled_tokens_per_step=1,
                                 max_model_len=case["max_len"])  # fmt: skip


def _probes(case: dict) -> list[dict]:
    """The cases around ``case`` that tell mistakes apart: another budget, max_model_len,
    flags or row size."""
    probes = [case | {"budget": b} for b in range(1, case["k"] + 4)]
    probes += [case | {"max_len": m} for m in range(case["c"] + 1, case["c"] + case["k"] + 5)]
    probes += [case | {"n": n} for n in range(1, case["k"] + 3)]
    return probes + [case | {"prefill": not case["prefill"]}, case | {"anyone": not case["anyone"]}]


def grade(fn: Any, g: Grader) -> None:
    random_cases(g, Draw(_draw, _shrink, _features, _shown),
                 lambda case: g.call(fn, _self(case), *_args(case)),
                 lambda case: Scheduler._pad_spec_decode(_self(case), *_args(case)),
                 count=400, spec={int, None},
                 diagnose=diagnose_by({k: functools.partial(_mistaken, k) for k in _MISTAKES},
                                      _probes))  # fmt: skip
    _named_cases(fn, g)


def _named_cases(fn: Any, g: Grader) -> None:
    """The named scenarios, in the real scheduler and a live P/D pair."""
    calls: list[tuple] = []  # every call of every case: (args, k, sampled, max_len, got)
    for name, label in _CASES:
        with g.case(label):
            want_log, want_tokens = _reference(name)
            mine: list[tuple] = []

            def seam(s: Scheduler, mine: list = mine) -> Any:
                def learner(self: Scheduler, *call: Any) -> Any:
                    got = g.returns(g.call(fn, self, *call), {int, None})
                    right = type(self)._pad_spec_decode(self, *call)
                    ctx = (self.num_spec_tokens, self.num_sampled_tokens_per_step,
                           self.max_model_len)  # fmt: skip
                    mine.append((call, ctx, got, right))
                    return got

                return types.MethodType(learner, s)

            log, tokens = _scenario(name, seam)
            calls += mine
            for args, ctx, got, right in mine:
                if got != right:
                    seen = [(c[2], {m: _variant(m, *c[1], c[0]) for m in _MISTAKES}) for c in calls]
                    wrong = {m: _variant(m, *ctx, args) for m in _MISTAKES}
                    named = next(iter(consistent(wrong, seen)), None)
                    shown = _CALL.format(*args)
                    g.fail(Words("ex14_right_for_args", right=right, shown=shown),
                           f"{got!r}", named, _steps(log))  # fmt: skip
            g.expect(log, want_log, evidence=_steps(log))
            g.expect(tokens, want_tokens)


def _steps(log: list) -> str:
    """The steps a run scheduled: tokens per request, and the drafts (-1: a placeholder)."""
    return "\n".join(f"  {i + 1}: {q} {d or ''}" for i, (q, d) in enumerate(log[:6]))


_slip = functools.partial(slip, "ex14_spec_pad")
#: The solution's room test, as it writes it.
_ROOM = ("    if num_computed_tokens + padded + self.num_sampled_tokens_per_step > "
         "self.max_model_len:\n        return num_new_tokens\n")  # fmt: skip


EXERCISE = Exercise(
    number=14, slug="ex14_spec_pad", function="_pad_spec_decode",
    library="pdlab/engine/core/sched/scheduler.py (Scheduler._pad_spec_decode)",
    own=("pdlab.engine.core.sched.scheduler:Scheduler._pad_spec_decode",), notebook="07_pd_designs",
    title={"en": "D's padded row under MTP", "zh": "MTP 下 D 被补齐的那一行"},
    statement={
        "en": """\
Exercise 14: D's padded row under MTP (vLLM 0.33.0's
pad_spec_decode in vllm/v1/core/sched/scheduler.py)

With speculative decoding (MTP, K drafts per step) every verifying row runs 1 + K tokens:
its token and K drafts. D's first step after a KV transfer is one token over N - 1
cached, and a fully prefix-cached prompt is too. vLLM pads such a row to 1 + K tokens
with K placeholder drafts (-1, never accepted), so the step keeps the uniform 1 + K shape
and its full decode CUDA graph.

Write _pad_spec_decode, a method of D's Scheduler that the waiting loop calls for each
request it admits: pad only a row of one new token, with speculative decoding on, never
beside a running row that is mid-prefill, and a fresh prompt only when some row is
already scheduled; only when the sampled token still has a position below
max_model_len; and if the padded row does not fit the budget, return None: upstream
would rather not schedule it than schedule it unpadded.

The grader runs the real scheduler with a runner without a model (the one the scheduler
tests use, which drafts and verifies), D's side through a real PDConnector, then a live
P/D pair with MTP, beside the scheduler's own method: every answer, every step and the
tokens must agree.""",
        "zh": """\
练习 14：MTP 下 D 被补齐的那一行（vLLM 0.33.0
vllm/v1/core/sched/scheduler.py 中的 pad_spec_decode）

开启投机解码（MTP，每步 K 个草稿 token）时，每个验证行运行 1 + K 个 token：它自己的 token 加上
K 个草稿 token。KV 传输后 D 的第一步是在 N - 1 个已缓存 token 之上算 1 个，全部命中前缀缓存的
提示词也是这样。vLLM 用 K 个占位草稿（-1，永远不会被接受）把这样的行补齐到 1 + K 个 token，
让这一步保持统一的 1 + K 形状，保住完整解码 CUDA graph。

请把 _pad_spec_decode 写成 D 的调度器类 `Scheduler` 的方法，等待队列循环每接纳一个请求就调用
一次：只补齐只有一个新 token 的行，且开启了投机解码；旁边有还在预填充中途的运行行时不补；
全新的提示词只有在本步已调度了某一行时才补；采样出的 token 在 max_model_len 之下还有位置时才补；
补齐后的行放不进预算时返回 None：上游宁可不调度它，也不调度一个没补齐的行。

评分用真实的调度器和一个没有模型的 model runner（调度器测试用的那个，会起草并验证），解码侧经过
真实的 PDConnector，再用一个开启 MTP 的真实 P/D 对，与调度器自己的方法对照：每次返回值、每一步
以及生成的 token 都必须一致。"""},
    hints={
        "en": (
            "Padding keeps every row of a step the one shape a full decode graph replays, "
            "1 + K. Which rows are decode rows worth padding: how many new tokens, over what "
            "context, beside which running rows, with speculative decoding on or off?",
            "Then two limits decide, in this order: is there room below max_model_len for the "
            "1 + K positions and the sampled token (if not, the row stays as it is)? Does "
            "1 + K fit token_budget (if not, None: the waiting loop stops)? Mind the edges: a "
            "budget of exactly 1 + K fits."),
        "zh": (
            "补齐让一步中的每一行都保持完整解码 CUDA graph 可以重放的同一个形状 1 + K。哪些行是"
            "值得补齐的 decode 行：有几个新 token、在什么上下文之上、旁边是哪些运行中的行、"
            "投机解码开没开？",
            "接下来按这个顺序由两个上限决定：max_model_len 之下还有没有放 1 + K 个位置和采样出的 "
            "token 的余地（没有就保持原样）？1 + K 放不放得进 `token_budget`（放不进就返回 None："
            "等待队列循环停下）？留意边界：预算恰为 1 + K 时放得进。"),
    },
    mistakes={
        "always_pad": {
            "en": "padding beside a running row that is mid-prefill: the step is not a "
            "uniform decode batch anyway, and upstream pads only when no scheduled running "
            "row is still in its prefill",
            "zh": "旁边有还在预填充中途的运行行时也补齐了：这一步反正不是均匀解码批次，上游只在"
            "已调度的运行行都不在预填充中时才补齐"},
        "no_context_rule": {
            "en": "padding a fresh one-token prompt that runs alone: with no computed context "
            "and nothing else scheduled, upstream leaves it as it is",
            "zh": "把单独运行的全新一 token 提示词也补齐了：没有已计算的上下文、也没有别的行被"
            "调度时，上游保持原样"},
        "pad_by_k": {
            "en": "padding to K tokens: a verifying row is the token itself plus K drafts, 1 + K",
            "zh": "补齐到了 K 个 token：验证行是它自己的 token 加上 K 个草稿 token，即 1 + K",
        },
        "no_room_check": {
            "en": "padding without room below max_model_len: the 1 + K positions and the "
            "sampled token must all fit, or the row stays one token",
            "zh": "在 max_model_len 之下没有余地时仍然补齐：1 + K 个位置和采样出的 token 都要"
            "放得下，否则这一行仍是一个 token"},
        "pads_short_rows": {
            "en": "padding a row of more than one new token (fewer than 1 + K): only a row of "
            "exactly one new token over its context is a decode row to pad; a row of 2 to K "
            "new tokens is a prefill chunk and keeps its size",
            "zh": "把不止一个新 token（少于 1 + K 个）的行也补齐了：只有在上下文之上恰好一个新 "
            "token 的行才是要补齐的 decode 行；2 到 K 个新 token 的行是预填充的一块，保持原样"},
        "budget_ge": {
            "en": "refusing a padded row that fits the budget exactly: 1 + K tokens fit a "
            "token_budget of 1 + K (the test is 1 + K > token_budget, not >=)",
            "zh": "补齐后的行正好放得进预算时也拒绝了：1 + K 个 token 放得进等于 1 + K 的 "
            "token_budget（判断是 1 + K > token_budget，不是 >=）"},
        "budget_before_room": {
            "en": "testing the budget before max_model_len: a row with no room for 1 + K "
            "positions is not padded at all, so it is scheduled as it is (its one token) "
            "whatever the budget, never held back with None",
            "zh": "先判断了预算再判断 max_model_len：放不下 1 + K 个位置的行根本不补齐，无论预算"
            "多少都按原样（一个 token）调度，绝不会因返回 None 而被挡下"},
        "schedule_unpadded": {
            "en": "scheduling the row unpadded when 1 + K does not fit the budget: upstream "
            "returns None and the waiting loop stops, rather than break the 1 + K shape",
            "zh": "1 + K 放不进预算时调度了没补齐的行：上游返回 None，等待队列循环停下，而不是"
            "破坏 1 + K 的形状"},
    },
    grade=grade,
    slips={
        "always_pad": _slip("        and not prefill_scheduled\n", ""),
        "no_context_rule": _slip("        and (any_scheduled or num_computed_tokens > 0)\n", ""),
        "pad_by_k": _slip("padded = 1 + k  #", "padded = k  #"),
        "no_room_check": _slip(_ROOM, ""),
        "schedule_unpadded": _slip("return None  # upstream", "return num_new_tokens  # upstream"),
        "pads_short_rows": _slip("and num_new_tokens == 1\n", "and num_new_tokens < 1 + k\n"),
        "budget_ge": _slip("if padded > token_budget:", "if padded >= token_budget:"),
        "budget_before_room": _slip(_ROOM + "    if padded > token_budget:\n",
                                    "    if padded > token_budget:\n        return None\n" + _ROOM
                                    + "    if False:\n"),
    },  # fmt: skip
)  # fmt: skip
