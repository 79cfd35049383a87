"""Exercise 10: a misconception quiz built from real questions (vllm-project/vllm#28566,
vllm-project/vllm#26896, ai-dynamo/dynamo#850), each answer checked by running the engine:
a P/D pair by default, one under prefill context parallelism, one whose proxy drops P's
``kv_transfer_params``, and a colocated engine. The expected value is what the trace
recorded, never a stored string.
"""

from __future__ import annotations

import functools
from typing import Any

from pdlab.engine.request import SamplingParams
from pdlab.exercises import engine_runs as er
from pdlab.exercises.base import Exercise, Grader, Words
from pdlab.exercises.bilingual import slip

N = 13


@functools.lru_cache(maxsize=1)
def _facts() -> dict[str, Any]:
    """Each question's answer as the engine's trace records it."""
    prompt = er.prompt_of(N)
    sp = SamplingParams(max_tokens=er.MAX_TOKENS)
    runs = {}
    for pcp in (1, 2):
        pair = er.pair(pcp)
        runs[pcp] = (pair.tracer, pair.generate(prompt, sp)[0].output_token_ids)
    t, out = runs[1]
    route = t.first("route", "D")
    in_prompt = sum(min(r["num_scheduled_tokens"],
                        max(r["num_prompt_tokens"] - r["num_computed_tokens_before"], 0))
                    for r in t.step_rows("D"))  # fmt: skip
    facts = {
        "d_num_computed_tokens": t.first("remote_kv_ready", "D")["num_computed_tokens"],
        "d_prompt_tokens_computed": in_prompt,
        "d_is_prefilling": route["is_prefilling"],
        "d_forward_default": route["forward"],
        "d_forward_pcp2": runs[2][0].first("route", "D")["forward"],
    }
    # A proxy that forwards the request to D without P's kv_transfer_params.
    pair = er.pair()
    pair.decode.add_request(prompt, sp, "no-params")
    while pair.decode.has_unfinished_requests():
        pair.decode.step()
    first = [r for r in pair.tracer.step_rows("D")
             if r["num_computed_tokens_before"] < r["num_prompt_tokens"]]  # fmt: skip
    facts["d_prompt_tokens_computed_without_params"] = sum(r["num_scheduled_tokens"] for r in first)
    facts["same_tokens_as_colocated"] = out == er.colocated_tokens(tuple(prompt))
    return facts


def grade(fn: Any, g: Grader) -> None:
    with g.case(Words("ex10_answers_returns_dict_every_question")):
        got = fn()
        got = g.returns(got, dict)
        missing = [k for k in _QUESTIONS if k not in got]
        if missing:
            g.fail(Words("ex10_keys", v0=list(_QUESTIONS)), Words("ex10_missing", missing=missing))
    facts = _facts()
    for key, question in _QUESTIONS.items():
        with g.case(question[g.lang]):
            want = facts[key]
            answer = g.returns(got[key], type(want))
            same = answer.strip() == want if isinstance(want, str) else answer == want
            if not same:  # the engine's answer is never shown: it would be copied
                g.fail(Words("ex10_not_shown"), answer, key)


_QUESTIONS = {
    "d_num_computed_tokens": {
        "en": f"#28566: D's num_computed_tokens once the K/V of N = {N} arrived",
        "zh": f"#28566：N = {N} 的 K/V 到达后 D 的 num_computed_tokens",
    },
    "d_prompt_tokens_computed": {
        "en": "dynamo#850, 'D also prefills, is that normal?': prompt tokens D computes",
        "zh": "dynamo#850，“D 也在做预填充，正常吗？”：D 计算的提示词 token 数",
    },
    "d_is_prefilling": {"en": "#28566: is D's first step is_prefilling?",
                        "zh": "#28566：D 的第一步 is_prefilling 吗？"},
    "d_forward_default": {"en": "the MLA path of D's first step, default settings",
                          "zh": "默认设置下 D 第一步走的 MLA 路径"},
    "d_forward_pcp2": {"en": "the MLA path of D's first step, prefill_context_parallel_size = 2",
                       "zh": "prefill_context_parallel_size = 2 时 D 第一步走的 MLA 路径"},
    "d_prompt_tokens_computed_without_params": {
        "en": "#26896: prompt tokens D computes when the proxy drops kv_transfer_params",
        "zh": "#26896：代理丢掉 kv_transfer_params 时 D 计算的提示词 token 数",
    },
    "same_tokens_as_colocated": {"en": "does the P/D pair generate the colocated engine's tokens?",
                                 "zh": "P/D 对生成的 token 与非分离引擎相同吗？"},
}  # fmt: skip

# Said of a wrong answer: a question that leads to the right one, never the answer itself
# (copying the grader's answers must not pass; ``pdlab exercises solution 10`` has them).
_WHY = {
    "d_num_computed_tokens": (
        "taking what P sent for all D needs: P sent the keys and values of every prompt "
        "token, in every layer; which token's final hidden state do the first output "
        "token's logits need, and did it travel with them?",
        "把 P 传来的当成了 D 需要的全部：P 传来了每个提示词 token 在每一层的 key 和 value；第一个输"
        "出 token 的 logits 需要哪个 token 的最终隐藏状态，它随 K/V 一起传来了吗？"),
    "d_prompt_tokens_computed": (
        "a count of D's prompt work that misses a step: after the K/V arrived, count "
        "the prompt tokens D's steps schedule while num_computed_tokens < "
        "num_prompt_tokens",
        "漏算了 D 在提示词上的某一步：K/V 到达后，数一数 num_computed_tokens < num_prompt_tokens 期"
        "间 D 的各步调度了多少个提示词 token"),
    "d_is_prefilling": (
        "judging D's row without its numbers: compare its num_computed_tokens once the "
        "K/V arrived with num_prompt_tokens",
        "没看数字就判断了 D 的那一行：把 K/V 到达后的 num_compu"
        "ted_tokens 与 num_prompt_tokens 比一比"),
    "d_forward_default": (
        "routing D's row by is_prefilling alone: it is read only when "
        "treat_short_extends_as_decodes is False, and the MLA builder passes not "
        "use_pcp; what is use_pcp by default?",
        "只凭 is_prefilling 给 D 的那一行选了路径：只有 treat_short_extends_as_decodes 为 False 时"
        "才读 is_prefilling，而 MLA builder 传入 not use_pcp；默认情况下 use_pcp 是什么？"),
    "d_forward_pcp2": (
        "routing under PCP as without it: the builder passes "
        "treat_short_extends_as_decodes = not use_pcp; what does a row still in its "
        "prompt count as then?",
        "把 PCP 下的路由当成了不开 PCP 时的：builder 传入"
        " treat_short_extends_as_decodes = not use_pcp；这时仍在提示词阶段的行算作什么？"),
    "d_prompt_tokens_computed_without_params": (
        "assuming D finds P's K/V on its own: without kv_transfer_params, what does D "
        "know of the K/V P holds for it?",
        "以为 D 自己能找到 P 的 K/V：没有 kv_transfer_pa"
        "rams 时，D 对 P 为它保存的 K/V 知道些什么？"),
    "same_tokens_as_colocated": (
        "doubting that the runs agree: P and D load the same weights and decode "
        "greedily; are MLA's two forms equal up to rounding?",
        "怀疑两次运行不一致：P 和 D 加载相同权重、贪心解码；MLA 的两种形式在舍入误差内相等吗？",
    ),
}  # fmt: skip

_slip = functools.partial(slip, "ex10_quiz")

EXERCISE = Exercise(
    number=10, slug="ex10_quiz", function="answers", notebook="05_pd_decode_side",
    title={"en": "Misconception quiz, checked by the engine", "zh": "误区测验（由引擎判分）"},
    statement={
        "en": """\
Exercise 10: a quiz from real questions (vllm-project/vllm#28566, vllm-project/vllm#26896,
ai-dynamo/dynamo#850)

People running P/D disaggregation asked: why is D's num_computed_tokens N - 1? Isn't D's
first step then a prefill? D also prefills, is that normal? Why did D prefill the whole
prompt again?

Fill in answers(). Every answer is checked by running the engine (a P/D pair on the tiny
model, block_size 4, a prompt of 13 tokens) and reading what its trace recorded. A wrong
answer gets a question to think about, never the engine's answer: run the pair yourself
(pdlab pd), or see pdlab exercises solution 10.""",
        "zh": """\
练习 10：来自真实问题的测验（vllm-project/vllm#28566、vllm-project/vllm#26896、
ai-dynamo/dynamo#850）

使用 P/D 分离的人问过：为什么 D 的 num_computed_tokens 是 N - 1？那 D 的第一步不就是
预填充吗？D 也在做预填充，正常吗？为什么 D 把整个提示词又预填充了一遍？

请填写 answers()。每个答案都通过运行引擎（tiny 模型的 P/D 对，block_size 4，13 个 token 的
提示词）并读取其 trace 来检查。答错时只会给出一个值得思考的问题，不会给出引擎的答案：
请自己运行 P/D 对（pdlab pd），或查看 pdlab exercises solution 10。"""},
    hints={
        "en": (
            "What did P send: each layer's keys and values, or also the last token's final "
            "hidden state?",
            "Two facts route a row: its query length against the threshold, and is_prefilling, "
            "which counts only when treat_short_extends_as_decodes = not use_pcp is False."),
        "zh": (
            "P 传来了什么：只是每一层的 key 和 value，还是也有最后一个 token 的最终隐藏状态？",
            "决定一行路由的有两点：query 长度与阈值的比较，以及 is_prefilling；后者只有在 "
            "treat_short_extends_as_decodes = not use_pcp 为 False 时才起作用。"),
    },
    mistakes={k: {"en": en, "zh": zh} for k, (en, zh) in _WHY.items()}, grade=grade,
    slips={  # the answers workshop learners give, one misconception each
        "d_num_computed_tokens": _slip(": 12,", ": 13,"),
        "d_prompt_tokens_computed": _slip(": 1,", ": 0,"),
        "d_is_prefilling": _slip('prefilling": True', 'prefilling": False'),
        "d_forward_default": _slip('"forward_mqa"', '"forward_mha"'),
        "d_forward_pcp2": _slip('pcp2": "forward_mha"', 'pcp2": "forward_mqa"'),
        "d_prompt_tokens_computed_without_params": _slip(": 13,", ": 1,"),
        "same_tokens_as_colocated": _slip('colocated": True', 'colocated": False'),
    },
)  # fmt: skip
