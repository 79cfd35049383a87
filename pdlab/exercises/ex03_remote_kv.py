"""Exercise 3: ``_update_waiting_for_remote_kv``, and its ``- 1``.

The learner's method replaces ``Scheduler._update_waiting_for_remote_kv``
(``pdlab/engine/core/sched/scheduler.py``, upstream ``vllm/v1/core/sched/scheduler.py``) on D's
scheduler of a real P/D pair, for one run, and is put back afterwards. Each case runs twice, once
with the engine's own method and once with the learner's, and everything D can observe must
agree: what the method leaves in ``num_computed_tokens``, the two id sets it must empty, the
prefix hits a later request gets, every step D schedules, the tokens and the free blocks.
The cases include the unhappy paths the ``==`` guard exists for: K/V that arrive short of
the prompt (blocks that failed to load, a whole failed load under the ``recompute`` policy)
and a local prefix hit beside the remote K/V. The engine's own error for a missing ``- 1``
spells out the fix, so the grader shows its own words instead (:func:`_said`).
"""

from __future__ import annotations

import functools
import types
from typing import Any

from pdlab.engine.config import KVTransferConfig
from pdlab.engine.distributed.kv_transfer.transport import InProcessTransport
from pdlab.engine.request import SamplingParams
from pdlab.exercises import engine_runs as er
from pdlab.exercises.base import Exercise, Grader, Words, patched
from pdlab.exercises.bilingual import slip

BS = er.BLOCK_SIZE


def _slip(adjust: str = "", remove: str = "") -> str:
    """The solution with its ``- 1`` written as ``adjust``, or without the line ``remove``."""
    right = ("if request.num_computed_tokens == request.num_tokens:\n"
             "        request.num_computed_tokens = request.num_tokens - 1")  # fmt: skip
    text = slip("ex03_remote_kv", right, adjust or right)
    return text.replace(f"    {remove}\n", "") if remove else text


def _run(fn: Any, prompts: list[list[int]], g: Grader, delay: int = 0,
         fault: str | int | None = None, together: bool = False) -> dict[str, Any]:  # fmt: skip
    """Run ``prompts`` one after the other through a P/D pair with ``fn`` on D (the engine's
    own method when ``fn`` is None), or all at once when ``together`` (their receives then
    land in the same step), each read landing ``delay`` polls after it starts; ``fault``
    makes the first read fail whole (``"fail"``) or fail from that block index on (an int:
    the K/V arrive short of the prompt). What happened, and what it left."""
    transport = InProcessTransport()
    transport.delay_polls = delay
    pair = er.pair(transport=transport, kv_transfer_config=_RECOMPUTE)
    sched = pair.decode.scheduler
    if fault == "fail":
        transport.fault_once = "fail"
    elif fault is not None:
        er.fail_blocks_from(pair, fault)
    calls: list[tuple[int, int, int, int, bool]] = []

    def learner(self: Any, request: Any) -> bool:
        before = request.num_computed_tokens
        arrived = request.request_id in self.finished_recving_kv_req_ids
        others = (self.finished_recving_kv_req_ids | self.failed_recving_kv_req_ids) - {
            request.request_id}  # fmt: skip
        if fn is None:
            ready = type(self)._update_waiting_for_remote_kv(self, request)
        else:
            ready = g.returns(g.call(fn, self, request), bool)
        if ready and not arrived:
            g.fail(Words("ex03_false_while_are_still_arriving"), "True", "ready_too_early")
        lost = others - self.finished_recving_kv_req_ids - self.failed_recving_kv_req_ids
        if lost:
            g.fail(Words("ex03_others_stay", rid=request.request_id),
                   Words("ex03_others_gone", lost=sorted(lost)), "cleared_others")  # fmt: skip
        local = before - request.num_external_computed_tokens
        calls.append((before, request.num_computed_tokens, request.num_tokens, local, bool(ready)))
        return ready

    got: dict[str, Any] = {"calls": calls, "error": None, "tokens": [], "trace": pair.tracer}
    sp = SamplingParams(max_tokens=er.MAX_TOKENS)
    with patched(sched, "_update_waiting_for_remote_kv", types.MethodType(learner, sched)):
        try:
            if together:  # a request that never resumes must not keep the pair running
                outs = pair.generate(prompts, sp, max_steps=40 + 10 * delay)
                got["tokens"] = [o.output_token_ids for o in outs]
            for prompt in [] if together else prompts:
                got["tokens"].append(pair.generate(prompt, sp)[0].output_token_ids)
        except (RuntimeError, ValueError, IndexError, AssertionError) as e:
            got["error"] = f"{type(e).__name__}: {e}"
    got["left_in_set"] = sorted(sched.finished_recving_kv_req_ids)
    got["left_failed"] = sorted(sched.failed_recving_kv_req_ids)
    got["hits"] = [e["num_hit_tokens"] for e in pair.tracer.filter("prefix_hit", "D")]
    got["rows"] = [(r["req_id"], r["num_computed_tokens_before"], r["num_scheduled_tokens"])
                   for r in pair.tracer.step_rows("D")]  # fmt: skip
    got["free"] = sched.kv_cache_manager.block_pool.get_num_free_blocks()
    got["ready"] = [c for c in calls if c[4]]
    return got


@functools.lru_cache(maxsize=32)
def _reference(prompts: tuple[tuple[int, ...], ...], delay: int, fault: Any,
               together: bool = False) -> dict[str, Any]:  # fmt: skip
    """What the engine's own method does in this case (the same every time)."""
    return _run(None, [list(p) for p in prompts], Grader(0, "en"), delay, fault, together)


_RECOMPUTE = KVTransferConfig(kv_load_failure_policy="recompute")


def _cases(g: Grader) -> list[tuple[Words, list[list[int]], int, Any, bool]]:
    salt = g.seed % 7
    n = g.rng.randrange(5, 24)
    a = er.prompt_of(3 * BS + 1, salt=salt)
    b = a[: 2 * BS] + er.prompt_of(BS + 2, salt=salt + 1)
    c = er.prompt_of(2 * BS, salt=salt + 2)
    return [
        (Words("ex03_three_blocks_plus_one", v0=3 * BS + 1), [a], 0, None, False),
        (Words("ex03_exactly_blocks", v0=3 * BS), [a[: 3 * BS]], 0, None, False),
        (Words("ex03_exactly_one_block", BS=BS), [a[:BS]], 0, None, False),
        (Words("ex03_one_token_prompt"), [a[:1]], 0, None, False),
        (Words("ex03_random_length_slow_transfer_polls", n=n), [er.prompt_of(n, salt)], 3, None,
         False),
        (Words("ex03_local_prefix_hit_blocks_beside", v0=len(b)), [a, b], 0, None, False),
        (Words("ex03_short_prompt_blocks_and_on", v0=3 * BS + 1), [a], 0, 2, False),
        (Words("ex03_whole_load_failed_policy_recompute", v0=3 * BS + 1), [a], 0, "fail", False),
        (Words("ex03_same_prompt_twice_prefix_cache", v0=len(a)), [a, a], 0, None, False),
        (Words("ex03_two_receives_one_step", n1=len(a), n2=len(c)), [a, c], 0, None, True),
        *(_random_case(g, salt + 3 + i) for i in range(4)),
    ]  # fmt: skip


def _random_case(g: Grader, salt: int) -> tuple[Words, list[list[int]], int, Any, bool]:
    """A random case over the whole space: 1 to 3 prompts (lengths at the block edges, one
    token, or anything), sent one after the other or together (receives landing in one
    step), a slow read or not, a whole, short or failed load."""
    r = g.rng
    lengths = [r.choice((1, BS, 2 * BS, 2 * BS + 1, 3 * BS - 1, r.randrange(2, 6 * BS)))
               for _ in range(r.choice((1, 2, 2, 3)))]  # fmt: skip
    prompts = [er.prompt_of(n, salt=salt + i) for i, n in enumerate(lengths)]
    if len(prompts) > 1 and r.random() < 0.3:  # the second shares the first's blocks
        share = (min(lengths) - 1) // BS * BS
        prompts[1] = prompts[0][:share] + prompts[1][share:]
    together = len(prompts) > 1 and r.random() < 0.6
    delay = r.choice((0, 0, 1, 3))
    blocks = -(-lengths[0] // BS)
    fault = r.choice((None, None, "fail", r.randrange(0, blocks) if blocks > 1 else None))
    said = (Words("ex03_fault_none") if fault is None else Words("ex03_fault_fail")
            if fault == "fail" else Words("ex03_fault_from", i=fault))  # fmt: skip
    name = Words("ex03_random", lengths=lengths, delay=delay, fault=said,
                 together=Words("ex03_together" if together else "ex03_one_after"))  # fmt: skip
    return name, prompts, delay, fault, together


def grade(fn: Any, g: Grader) -> None:
    for name, prompts, delay, fault, together in _cases(g):
        with g.case(Words("ex03_pair_with_your_function_on", name=name)):  # fmt: skip
            want = _reference(tuple(map(tuple, prompts)), delay, fault, together)
            got = _run(fn, prompts, g, delay, fault, together)
            _judge(g, want, got)


def _judge(g: Grader, want: dict[str, Any], got: dict[str, Any]) -> None:
    table = er.table_text(got["trace"], "D", g.lang)
    for w, c in zip(want["ready"], got["ready"] + [None] * len(want["ready"])):
        after = None if c is None else c[1]
        if after == w[1] and got["error"] is None:
            continue
        before, right, num_tokens, local = w[0], w[1], w[2], w[3]
        mistake = None
        if after == num_tokens and right == num_tokens - 1:
            mistake = "no_minus_one"
        elif after is not None and after == right - 1 and right < num_tokens - 1:
            mistake = "unguarded_minus_one"
        elif after == num_tokens - 1 and right < num_tokens - 1:
            mistake = "always_n_minus_one"
        elif after is not None and after == right - 1:
            mistake = "minus_two"
        elif after == 0:
            mistake = "recompute_all"
        elif local and after == right - local:
            mistake = "external_only"
        g.fail(
            Words("ex03_num_computed_tokens_num_tokens", before=before, right=right,
                  num_tokens=num_tokens),
            f"num_computed_tokens {before} -> {after}"
            if got["error"] is None or after is None or after != num_tokens
            else Words("ex03_num_computed_tokens_step_has", before=before, after=after),
            mistake,
            _said(got["error"], g.lang) + "\n" + er.table_text(got["trace"], None, g.lang),
        )  # fmt: skip
    if got["left_in_set"]:
        g.fail(Words("ex03_finished_recving_kv_req_ids"),
               Words("ex03_still_holds", v0=got['left_in_set']),
               "kept_in_set", table)  # fmt: skip
    if got["left_failed"]:
        g.fail(Words("ex03_failed_recving_kv_req_ids"),
               Words("ex03_still_holds", v0=got['left_failed']),
               "kept_failed", table)  # fmt: skip
    g.expect(got["hits"], want["hits"], evidence=table)
    g.expect(got["rows"], want["rows"], evidence=table)
    g.expect(got["tokens"], want["tokens"], evidence=table)
    g.expect(got["free"], want["free"], evidence=table)


def _said(message: str | None, lang: str) -> str:
    """What stopped D, in the grader's words: the engine's own message for this (it says how
    to fix it) would answer the exercise."""
    if not message:
        return ""
    if "nothing is" in message:
        return _STOPPED.render(lang)
    return er.said(message, lang)


_STOPPED = Words("ex03_scheduler_stopped_request_came_back")


EXERCISE = Exercise(
    number=3, slug="ex03_remote_kv", function="_update_waiting_for_remote_kv",
    library="pdlab/engine/core/sched/scheduler.py (Scheduler._update_waiting_for_remote_kv)",
    own=("pdlab.engine.core.sched.scheduler:Scheduler._update_waiting_for_remote_kv",),
    notebook="05_pd_decode_side",
    title={"en": "D's scheduler: K/V arrived, and the - 1", "zh": "D 的调度器：K/V 到达，以及 - 1"},
    statement={
        "en": """\
Exercise 3: _update_waiting_for_remote_kv

On the decode instance D of a P/D pair, a request waits in WAITING_FOR_REMOTE_KVS while
P's blocks are copied into D's. The worker reports the receive finished by putting the
request id in self.finished_recving_kv_req_ids. Then D's scheduler calls this method.

Write it as a method of D's Scheduler: return False while the K/V are still arriving;
once they arrived, remove the id from that set, cache (hash) the request's blocks, set
request.num_computed_tokens to what D must treat as already computed, and return True.

A load can fail (kv_load_failure_policy="recompute"): then the id is also in
self.failed_recving_kv_req_ids (take it out too), and num_computed_tokens was already cut
to the tokens before the first failed block (0 if the whole load failed). Cache what is
left and let D compute the rest.

While the K/V arrive, request.num_computed_tokens already counts them (N for a prompt
of N tokens). Think about what P sent (each layer's keys and values) and what the first
output token's logits need.

The grader plugs your method into D's scheduler of a real P/D pair on the tiny model,
beside the engine's own: every step D schedules, the sets, the prefix hits of a later
request and the tokens must be the same, on whole, short and failed loads.""",
        "zh": """\
练习 3：_update_waiting_for_remote_kv

在 P/D 分离的解码实例 D 上，P 的块被拷进 D 的块期间，请求处于 WAITING_FOR_REMOTE_KVS。
worker 接收完成后，会把请求 id 放进 `self.finished_recving_kv_req_ids`，随后 D 的调度器
调用本方法。

请把它写成 D 的调度器类 `Scheduler` 的方法：K/V 还在路上时返回 False；到达后，把 id 从该集合里
移除，缓存（哈希）该请求的块，把 `request.num_computed_tokens` 设成 D 应当视为已算完的
数量，然后返回 True。

加载可能失败（kv_load_failure_policy="recompute"）：这时 id 也在
`self.failed_recving_kv_req_ids` 里（也要移除），num_computed_tokens 已被截到第一个失败块
之前的 token 数（整个加载失败则为 0）。缓存剩下的部分，其余由 D 自己计算。

K/V 传输期间 `request.num_computed_tokens` 已经把它们算进去了（N 个 token 的提示词即为 N）。
想一想 P 传来了什么（每一层的 key 和 value），第一个输出 token 的 logits 又需要什么。

评分时，你的方法被装进一个真实 P/D 对（tiny 模型）中 D 的调度器，与引擎自己的方法对照：
在完整、不足和失败的加载下，D 调度的每一步、两个集合、后续请求的前缀命中以及生成的
token 都必须相同。"""},
    hints={
        "en": (
            "The KV cache holds each layer's keys and values, not the final hidden state of "
            "any token. Which token's final hidden state do the first output logits need?",
            "The last prompt token (position N - 1) must run through every layer again, so it "
            "cannot count as computed: D's first step is one token over N - 1 cached ones.",
            "Only K/V that cover the whole prompt (num_computed_tokens == num_tokens) leave "
            "the last prompt token to run again; after a short or failed load it is still to "
            "compute anyway. Take only this request's id out of the sets: another receive may "
            "have landed in the same step."),
        "zh": (
            "KV 缓存保存的是每一层的 key 和 value，而不是任何 token 的最终隐藏状态。第一个输出"
            " token 的 logits 需要哪个 token 的最终隐藏状态？",
            "最后一个提示词 token（位置 N - 1）必须再跑一遍所有层，所以它不能算作已计算："
            "D 的第一步是在 N - 1 个已缓存 token 之上算 1 个 token。",
            "只有 K/V 覆盖了整个提示词（num_computed_tokens == num_tokens）时，最后一个提示词 "
            "token 才需要再跑一次；加载不足或失败时它本来就还要计算。只从集合里移除本请求的 id："
            "同一步里可能还有别的接收完成了。"),
    },
    mistakes={
        "no_minus_one": {
            "en": "forgetting the - 1: with all N tokens counted as computed, nothing is left "
            "to schedule, yet the first output token needs the last prompt token's final "
            "hidden state, which the transfer does not carry",
            "zh": "忘了 - 1：N 个 token 全算作已计算，就没有可调度的了，但第一个输出 token 需要"
            "最后一个提示词 token 的最终隐藏状态，而传输并不携带它"},
        "minus_two": {
            "en": "subtracting one too many: D recomputes two prompt tokens instead of one",
            "zh": "多减了一个：D 重算了两个提示词 token，而不是一个",
        },
        "recompute_all": {
            "en": "resetting num_computed_tokens to 0: D throws the transferred K/V away and "
            "prefills again what its own prefix cache does not hold (the symptom reported in "
            "vllm-project/vllm#26896)",
            "zh": "把 num_computed_tokens 置 0：D 丢掉传来的 K/V，把自己前缀缓存里没有的部分重新"
            "预填充（vllm-project/vllm#26896 报告的现象）"},
        "ready_too_early": {
            "en": "returning True before the K/V arrived: D would compute over blocks that "
            "do not hold P's keys and values yet",
            "zh": "K/V 还没到就返回了 True：D 会在还没有装入 P 的 key 和 value 的块上计算",
        },
        "kept_in_set": {"en": "not removing the id from finished_recving_kv_req_ids",
                        "zh": "没有把 id 从 finished_recving_kv_req_ids 中移除"},
        "unguarded_minus_one": {
            "en": "subtracting one whatever arrived: the - 1 is only for K/V that cover the "
            "whole prompt (num_computed_tokens == num_tokens); when they arrive short (a "
            "failed block, a partial load), the last prompt token is still to compute anyway, "
            "and D would recompute one cached token more",
            "zh": "不管到了多少都减一：- 1 只用于 K/V 覆盖了整个提示词的情况"
            "（num_computed_tokens == num_tokens）；K/V 不足时（有块加载失败、部分加载），最后一个"
            "提示词 token 本来就要计算，D 会多重算一个已缓存的 token"},
        "always_n_minus_one": {
            "en": "setting num_tokens - 1 whatever arrived: after a failed or partial load "
            "only the tokens before the first failed block hold K/V, and D would attend to "
            "blocks that hold none",
            "zh": "不管到了多少都设成 num_tokens - 1：加载失败或只加载了一部分时，只有第一个失败块"
            "之前的 token 有 K/V，D 会去关注没有 K/V 的块"},
        "kept_failed": {
            "en": "not removing the id from failed_recving_kv_req_ids after a failed load: "
            "the set keeps it for as long as D runs",
            "zh": "加载失败后没有把 id 从 failed_recving_kv_req_ids 中移除：只要 D 在运行，"
            "这个集合就一直留着它"},
        "cleared_others": {
            "en": "emptying the whole set (clear()) instead of removing this request's id: "
            "when two receives land in one step, the other request's id is gone and it waits "
            "in WAITING_FOR_REMOTE_KVS forever",
            "zh": "清空了整个集合（clear()），而不是只移除本请求的 id：两个接收在同一步完成时，"
            "另一个请求的 id 也没了，它会永远停在 WAITING_FOR_REMOTE_KVS"},
        "external_only": {
            "en": "counting only the transferred tokens (num_external_computed_tokens): the "
            "blocks D found in its own prefix cache are computed too",
            "zh": "只算了传来的 token（num_external_computed_tokens）：D 在自己前缀缓存里找到的"
            "块也是已计算的"},
    },
    grade=grade,
    slips={
        "no_minus_one": _slip(
            "if request.num_computed_tokens == request.num_tokens:\n        pass"
        ),
        "unguarded_minus_one": _slip(
            "request.num_computed_tokens = request.num_computed_tokens - 1"
        ),
        "always_n_minus_one": _slip("request.num_computed_tokens = request.num_tokens - 1"),
        "minus_two": _slip(
            "if request.num_computed_tokens == request.num_tokens:\n"
            "        request.num_computed_tokens = request.num_tokens - 2"
        ),
        "recompute_all": _slip("request.num_computed_tokens = 0"),
        "external_only": _slip(
            "request.num_computed_tokens = request.num_external_computed_tokens - 1"
        ),
        "kept_in_set": _slip(remove="self.finished_recving_kv_req_ids.remove(rid)"),
        "cleared_others": _slip().replace(
            "self.finished_recving_kv_req_ids.remove(rid)",
            "self.finished_recving_kv_req_ids.clear()",
        ),
        "kept_failed": _slip(remove="self.failed_recving_kv_req_ids.discard(rid)"),
        "ready_too_early": _slip(
            remove="if rid not in self.finished_recving_kv_req_ids:\n        return False"
        ).replace(".remove(rid)", ".discard(rid)"),
    },  # fmt: skip
)  # fmt: skip
