"""Exercise 3: ``_update_waiting_for_remote_kv``, and its ``- 1``.

The learner's method replaces ``Scheduler._update_waiting_for_remote_kv``
(``pdlab/sched/remote_kv.py``, upstream ``vllm/v1/core/sched/scheduler.py``) on D's scheduler
of a real P/D pair, for one run, and is put back afterwards. The pair must generate the
colocated tokens, D's first step must schedule one token over ``N - 1`` cached, and a second
request with the same prompt must find D's received blocks in its prefix cache.
"""

from __future__ import annotations

import types
from typing import Any

from pdlab.exercises import engine_runs as er
from pdlab.exercises.base import Exercise, Grader, patched
from pdlab.kv_transfer.transport import InProcessTransport
from pdlab.request import SamplingParams

BS = er.BLOCK_SIZE


def _run(
    fn: Any, prompt: list[int], g: Grader, twice: bool = False, delay: int = 0
) -> dict[str, Any]:
    """Run ``prompt`` through a P/D pair with ``fn`` on D (each read landing ``delay`` polls
    after it starts); what happened."""
    transport = InProcessTransport()
    transport.delay_polls = delay
    pair = er.pair(transport=transport)
    sched = pair.decode.scheduler
    calls: list[tuple[int, int, int, bool]] = []

    def learner(self: Any, request: Any) -> bool:
        before = request.num_computed_tokens
        arrived = request.request_id in self.finished_recving_kv_req_ids
        ready = g.call(fn, self, request)
        if ready and not arrived:
            g.fail(("False while the K/V are still arriving", "K/V 还在路上时返回 False"), "True",
                   "ready_too_early")  # fmt: skip
        calls.append((before, request.num_computed_tokens, request.num_tokens, bool(ready)))
        return ready

    got: dict[str, Any] = {"calls": calls, "error": None, "tokens": None, "trace": pair.tracer}
    sp = SamplingParams(max_tokens=er.MAX_TOKENS)
    with patched(sched, "_update_waiting_for_remote_kv", types.MethodType(learner, sched)):
        try:
            got["tokens"] = pair.generate(prompt, sp)[0].output_token_ids
            if twice:
                pair.generate(prompt, sp)
        except RuntimeError as e:
            got["error"] = f"{type(e).__name__}: {e}"
    got["left_in_set"] = sorted(sched.finished_recving_kv_req_ids)
    got["hits"] = [e["num_hit_tokens"] for e in pair.tracer.filter("prefix_hit", "D")]
    return got


def grade(fn: Any, g: Grader) -> None:
    lengths = [
        ((f"3 blocks + 1, N = {3 * BS + 1}", f"3 块 + 1，N = {3 * BS + 1}"), 3 * BS + 1, 0),
        ((f"exactly 3 blocks, N = {3 * BS}", f"正好 3 块，N = {3 * BS}"), 3 * BS, 0),
        ((f"exactly one block, N = {BS}", f"正好 1 块，N = {BS}"), BS, 0),
        (("one-token prompt, N = 1", "一 token 提示词，N = 1"), 1, 0),
    ]
    n = g.rng.randrange(5, 24)
    lengths.append(
        (
            (
                f"random length N = {n}, a slow transfer (3 polls)",
                f"随机长度 N = {n}，慢速传输（3 次轮询）",
            ),
            n,
            3,
        )
    )
    for name, n, delay in lengths:
        prompt = er.prompt_of(n, salt=g.seed % 7)
        with g.case(
            (
                f"{name[0]}: P/D pair with your function on D",
                f"{name[1]}：D 上装着你的函数的 P/D 对",
            )
        ):
            got = _run(fn, prompt, g, delay=delay)
            table = er.table_text(got["trace"], "D", g.lang)
            arrived = [c for c in got["calls"] if c[3]]
            after = arrived[0][1] if arrived else None
            if got["error"] is not None or after == n:
                g.fail(
                    (
                        f"num_computed_tokens = N - 1 = {n - 1}, then one token scheduled on D",
                        f"num_computed_tokens = N - 1 = {n - 1}，然后 D 上调度 1 个 token",
                    ),
                    (
                        f"num_computed_tokens = {after} of num_tokens = {n}",
                        f"num_computed_tokens = {after}，num_tokens = {n}",
                    ),
                    "no_minus_one" if after == n else None,
                    er.said(got["error"], g.lang)
                    + "\n"
                    + er.table_text(got["trace"], None, g.lang),
                )
            if got["left_in_set"]:
                g.fail(("finished_recving_kv_req_ids empty after the run",
                        "运行结束后 finished_recving_kv_req_ids 为空"),
                       (f"still holds {got['left_in_set']}", f"仍有 {got['left_in_set']}"),
                       "kept_in_set", table)  # fmt: skip
            first = er.first_d_step(got["trace"])
            want = (n - 1, 1)
            have = (first["num_computed_tokens_before"], first["num_scheduled_tokens"])
            if have != want:
                mistake = {0: "recompute_all", n - 2: "minus_two"}.get(after) if n > 1 else None
                g.fail(
                    (
                        f"D's first step: {n - 1} computed before, 1 scheduled",
                        f"D 的第一步：之前已算 {n - 1}，调度 1",
                    ),
                    (
                        f"{have[0]} computed before, {have[1]} scheduled",
                        f"之前已算 {have[0]}，调度 {have[1]}",
                    ),
                    mistake,
                    table,
                )
            g.expect(got["tokens"], er.colocated_tokens(tuple(prompt)), evidence=table)
    n = 3 * BS + 2
    with g.case(
        (
            f"the same prompt twice, N = {n}: D's prefix cache holds the received blocks",
            f"同一提示词两次，N = {n}：D 的前缀缓存里有收到的块",
        )
    ):
        got = _run(fn, er.prompt_of(n, salt=1), g, twice=True)
        want_hit = (n - 1) // BS * BS
        g.expect(got["hits"], [want_hit], evidence=er.table_text(got["trace"], "D", g.lang))


EXERCISE = Exercise(
    number=3,
    slug="ex03_remote_kv",
    function="_update_waiting_for_remote_kv",
    notebook="05_pd_decode_side",
    title={"en": "D's scheduler: K/V arrived, and the - 1", "zh": "D 的调度器：K/V 到达，以及 - 1"},
    statement={
        "en": """\
Exercise 3: _update_waiting_for_remote_kv (pdlab/sched/remote_kv.py)

On the decode instance D of a P/D pair, a request waits in WAITING_FOR_REMOTE_KVS while
P's blocks are copied into D's. The worker reports the receive finished by putting the
request id in self.finished_recving_kv_req_ids. Then D's scheduler calls this method.

Write it as a method of D's Scheduler: return False while the K/V are still arriving;
once they arrived, remove the id from that set, cache (hash) the request's blocks, set
request.num_computed_tokens to what D must treat as already computed, and return True.

While the K/V arrive, request.num_computed_tokens already counts them (N for a prompt
of N tokens). Think about what P sent (each layer's keys and values) and what the first
output token's logits need.

The grader plugs your method into D's scheduler of a real P/D pair on the tiny model:
the pair must produce the colocated engine's tokens, and D's first step must be what
vLLM 0.33.0 does.""",
        "zh": """\
练习 3：_update_waiting_for_remote_kv（pdlab/sched/remote_kv.py）

在 P/D 分离的解码实例 D 上，P 的块被拷进 D 的块期间，请求处于 WAITING_FOR_REMOTE_KVS。
worker 接收完成后，会把请求 id 放进 self.finished_recving_kv_req_ids，随后 D 的调度器
调用本方法。

请把它写成 D 的调度器类 `Scheduler` 的方法：K/V 还在路上时返回 False；到达后，把 id 从该集合里
移除，缓存（哈希）该请求的块，把 request.num_computed_tokens 设成 D 应当视为已算完的
数量，然后返回 True。

K/V 传输期间 request.num_computed_tokens 已经把它们算进去了（N 个 token 的提示词即为 N）。
想一想 P 传来了什么（每一层的 key 和 value），第一个输出 token 的 logits 又需要什么。

评分时，你的方法被装进一个真实 P/D 对（tiny 模型）中 D 的调度器：生成的 token 必须与
非分离引擎一致，D 的第一步也必须与 vLLM 0.33.0 相同。""",
    },
    hints={
        "en": (
            "The KV cache holds each layer's keys and values, not the final hidden state of "
            "any token. Which token's final hidden state do the first output logits need?",
            "The last prompt token (position N - 1) must run through every layer again, so it "
            "cannot count as computed: D's first step is one token over N - 1 cached ones.",
            "if request.num_computed_tokens == request.num_tokens: "
            "request.num_computed_tokens = request.num_tokens - 1",
        ),
        "zh": (
            "KV 缓存保存的是每一层的 key 和 value，而不是任何 token 的最终隐藏状态。第一个输出"
            " token 的 logits 需要哪个 token 的最终隐藏状态？",
            "最后一个提示词 token（位置 N - 1）必须再跑一遍所有层，所以它不能算作已计算："
            "D 的第一步是在 N - 1 个已缓存 token 之上算 1 个 token。",
            "if request.num_computed_tokens == request.num_tokens: "
            "request.num_computed_tokens = request.num_tokens - 1",
        ),
    },
    mistakes={
        "no_minus_one": {
            "en": "forgetting the - 1: with all N tokens counted as computed, nothing is left "
            "to schedule, yet the first output token needs the last prompt token's final "
            "hidden state, which the transfer does not carry",
            "zh": "忘了 - 1：N 个 token 全算作已计算，就没有可调度的了，但第一个输出 token 需要"
            "最后一个提示词 token 的最终隐藏状态，而传输并不携带它",
        },
        "minus_two": {
            "en": "subtracting one too many: D recomputes two prompt tokens instead of one",
            "zh": "多减了一个：D 重算了两个提示词 token，而不是一个",
        },
        "recompute_all": {
            "en": "resetting num_computed_tokens to 0: D throws the transferred K/V away and "
            "prefills again what its own prefix cache does not hold (the symptom reported in "
            "vllm-project/vllm#26896)",
            "zh": "把 num_computed_tokens 置 0：D 丢掉传来的 K/V，把自己前缀缓存里没有的部分重新"
            "预填充（vllm-project/vllm#26896 报告的现象）",
        },
        "ready_too_early": {
            "en": "returning True before the K/V arrived: D would compute over blocks that "
            "do not hold P's keys and values yet",
            "zh": "K/V 还没到就返回了 True：D 会在还没有装入 P 的 key 和 value 的块上计算",
        },
        "kept_in_set": {
            "en": "not removing the id from finished_recving_kv_req_ids",
            "zh": "没有把 id 从 finished_recving_kv_req_ids 中移除",
        },
    },
    grade=grade,
)
