"""Exercise 10: a misconception quiz built from real questions (vllm-project/vllm#28566,
vllm-project/vllm#26896, ai-dynamo/dynamo#850), each answer checked by running the engine:
a P/D pair by default, one under prefill context parallelism, one whose proxy drops P's
``kv_transfer_params``, and a colocated engine. The expected value is what the trace
recorded, never a stored string; a wrong answer is shown D's step table.
"""

from __future__ import annotations

import functools
from typing import Any

from pdlab.exercises import engine_runs as er
from pdlab.exercises.base import Exercise, Grader, Words
from pdlab.request import SamplingParams
from pdlab.trace import Tracer

N = 13


@functools.lru_cache(maxsize=1)
def _facts() -> dict[str, tuple[Any, Tracer]]:
    """Each question's answer as the engine gives it, with the trace it came from."""
    prompt = er.prompt_of(N)
    sp = SamplingParams(max_tokens=er.MAX_TOKENS)
    facts: dict[str, tuple[Any, Tracer]] = {}
    runs = {}
    for pcp in (1, 2):
        pair = er.pair(pcp)
        out = pair.generate(prompt, sp)[0].output_token_ids
        runs[pcp] = (pair.tracer, out)
    t, out = runs[1]
    table = t
    ready = t.first("remote_kv_ready", "D")
    rows = t.step_rows("D")
    in_prompt = sum(
        min(
            r["num_scheduled_tokens"],
            max(r["num_prompt_tokens"] - r["num_computed_tokens_before"], 0),
        )
        for r in rows
    )
    route = t.first("route", "D")
    facts["d_num_computed_tokens"] = (ready["num_computed_tokens"], table)
    facts["d_prompt_tokens_computed"] = (in_prompt, table)
    facts["d_is_prefilling"] = (route["is_prefilling"], table)
    facts["d_forward_default"] = (route["forward"], table)
    t2 = runs[2][0]
    facts["d_forward_pcp2"] = (t2.first("route", "D")["forward"], t2)
    # A proxy that forwards the request to D without P's kv_transfer_params.
    pair = er.pair()
    pair.decode.add_request(prompt, sp, "no-params")
    while pair.decode.has_unfinished_requests():
        pair.decode.step()
    rows = pair.tracer.step_rows("D")
    first = [r for r in rows if r["num_computed_tokens_before"] < r["num_prompt_tokens"]]
    facts["d_prompt_tokens_computed_without_params"] = (
        sum(r["num_scheduled_tokens"] for r in first),
        pair.tracer,
    )
    facts["same_tokens_as_colocated"] = (out == er.colocated_tokens(tuple(prompt)), table)
    return facts


def grade(fn: Any, g: Grader) -> None:
    with g.case(Words("ex10_answers_returns_dict_every_question")):
        got = fn()
        if not isinstance(got, dict):
            g.fail(Words("ex10_dict"), type(got).__name__)
        missing = [k for k in _QUESTIONS if k not in got]
        if missing:
            g.fail(Words("ex10_keys", v0=list(_QUESTIONS)),
                   Words("ex10_missing", missing=missing))  # fmt: skip
    facts = _facts()
    for key, question in _QUESTIONS.items():
        with g.case(question[g.lang]):
            want, tracer = facts[key]
            answer = got[key]
            same = answer == want and type(answer) is type(want)
            if isinstance(want, str):
                same = isinstance(answer, str) and answer.strip() == want
            if not same:
                g.fail(want, answer, key, er.table_text(tracer, "D", g.lang))


# What the engine answers (the grader reads each from a trace; these only build the slips).
_RIGHT = {
    "d_num_computed_tokens": N - 1,
    "d_prompt_tokens_computed": 1,
    "d_is_prefilling": True,
    "d_forward_default": "forward_mqa",
    "d_forward_pcp2": "forward_mha",
    "same_tokens_as_colocated": True,
    "d_prompt_tokens_computed_without_params": N,
}

_QUESTIONS = {
    "d_num_computed_tokens": {
        "en": f"#28566: D's num_computed_tokens once the K/V of N = {N} arrived",
        "zh": f"#28566：N = {N} 的 K/V 到达后 D 的 num_computed_tokens",
    },
    "d_prompt_tokens_computed": {
        "en": "dynamo#850, 'D also prefills, is that normal?': prompt tokens D computes",
        "zh": "dynamo#850，“D 也在做预填充，正常吗？”：D 计算的提示词 token 数",
    },
    "d_is_prefilling": {
        "en": "#28566: is D's first step is_prefilling?",
        "zh": "#28566：D 的第一步 is_prefilling 吗？",
    },
    "d_forward_default": {
        "en": "the MLA path of D's first step, default settings",
        "zh": "默认设置下 D 第一步走的 MLA 路径",
    },
    "d_forward_pcp2": {
        "en": "the MLA path of D's first step, prefill_context_parallel_size = 2",
        "zh": "prefill_context_parallel_size = 2 时 D 第一步走的 MLA 路径",
    },
    "d_prompt_tokens_computed_without_params": {
        "en": "#26896: prompt tokens D computes when the proxy drops kv_transfer_params",
        "zh": "#26896：代理丢掉 kv_transfer_params 时 D 计算的提示词 token 数",
    },
    "same_tokens_as_colocated": {
        "en": "does the P/D pair generate the colocated engine's tokens?",
        "zh": "P/D 对生成的 token 与非分离引擎相同吗？",
    },
}

_WHY = {
    "d_num_computed_tokens": (
        "N - 1: the K/V of every prompt token arrived, but not the last token's final hidden "
        "state, and the first output token's logits need it",
        "N - 1：所有提示词 token 的 K/V 都到了，但最后一个 token 的最终隐藏状态没有，而第一个输出"
        " token 的 logits 需要它",
    ),
    "d_prompt_tokens_computed": (
        "yes, D computes one prompt token, the last, again: a one-token step over N - 1 "
        "cached tokens that yields the first output token's logits",
        "是的，D 会把一个提示词 token（最后一个）再算一遍：在 N - 1 个已缓存 token 之上的一 token "
        "步骤，产出第一个输出 token 的 logits",
    ),
    "d_is_prefilling": (
        "num_computed_tokens (N - 1) < num_prompt_tokens (N): the row is still prefilling, a "
        "short extend",
        "num_computed_tokens (N - 1) < num_prompt_tokens (N)：这一行仍在预填充，是一个短 extend",
    ),
    "d_forward_default": (
        "is_prefilling is read only when treat_short_extends_as_decodes is False; the MLA "
        "builder passes not use_pcp, so by default the short extend is a decode (forward_mqa)",
        "只有 treat_short_extends_as_decodes 为 False 时才读 is_prefilling；MLA builder 传入 "
        "not use_pcp，所以默认情况下短 extend 是解码（forward_mqa）",
    ),
    "d_forward_pcp2": (
        "under PCP the builder passes treat_short_extends_as_decodes=False: a row still in its "
        "prompt is a prefill, and forward_mha gathers and up-projects the whole context",
        "PCP 下 builder 传入 treat_short_extends_as_decodes=False：仍在提示词阶段的行算作预填充，"
        "forward_mha 会收集并上投影整个上下文",
    ),
    "d_prompt_tokens_computed_without_params": (
        "without kv_transfer_params D knows of no remote K/V and prefills the whole prompt "
        "itself (the transfer is wasted)",
        "没有 kv_transfer_params，D 不知道有远端 K/V，会自己把整个提示词预填充一遍（传输白做了）",
    ),
    "same_tokens_as_colocated": (
        "P and D load the same weights and decode greedily; MLA's two forms are equal up to "
        "rounding, so the tokens are the colocated engine's",
        "P 和 D 加载相同权重、贪心解码；MLA 两种形式在舍入误差内相等，所以 token 与非分离引擎相同",
    ),
}

EXERCISE = Exercise(
    number=10,
    slug="ex10_quiz",
    function="answers",
    notebook="05_pd_decode_side",
    title={"en": "Misconception quiz, checked by the engine", "zh": "误区测验（由引擎判分）"},
    statement={
        "en": """\
Exercise 10: a quiz from real questions (vllm-project/vllm#28566, vllm-project/vllm#26896,
ai-dynamo/dynamo#850)

People running P/D disaggregation asked: why is D's num_computed_tokens N - 1? Isn't D's
first step then a prefill? D also prefills, is that normal? Why did D prefill the whole
prompt again?

Fill in answers(). Every answer is checked by running the engine (a P/D pair on the tiny
model, block_size 4, a prompt of 13 tokens) and reading what its trace recorded; a
wrong answer is shown what the engine did.""",
        "zh": """\
练习 10：来自真实问题的测验（vllm-project/vllm#28566、vllm-project/vllm#26896、
ai-dynamo/dynamo#850）

使用 P/D 分离的人问过：为什么 D 的 num_computed_tokens 是 N - 1？那 D 的第一步不就是
预填充吗？D 也在做预填充，正常吗？为什么 D 把整个提示词又预填充了一遍？

请填写 answers()。每个答案都通过运行引擎（tiny 模型的 P/D 对，block_size 4，13 个 token 的
提示词）并读取其 trace 来检查；答错时会展示引擎实际做了什么。""",
    },
    hints={
        "en": (
            "What did P send: each layer's keys and values, or also the last token's final "
            "hidden state?",
            "Two facts route a row: its query length against the threshold, and is_prefilling, "
            "which counts only when treat_short_extends_as_decodes = not use_pcp is False.",
        ),
        "zh": (
            "P 传来了什么：只是每一层的 key 和 value，还是也有最后一个 token 的最终隐藏状态？",
            "决定一行路由的有两点：query 长度与阈值的比较，以及 is_prefilling；后者只有在 "
            "treat_short_extends_as_decodes = not use_pcp 为 False 时才起作用。",
        ),
    },
    mistakes={k: {"en": en, "zh": zh} for k, (en, zh) in _WHY.items()},
    grade=grade,
    slips={  # the answers workshop learners give, one misconception each
        key: "def answers():\n    return " + repr({**_RIGHT, key: value}) + "\n"
        for key, value in {
            "d_num_computed_tokens": N,
            "d_prompt_tokens_computed": 0,
            "d_is_prefilling": False,
            "d_forward_default": "forward_mha",
            "d_forward_pcp2": "forward_mqa",
            "d_prompt_tokens_computed_without_params": 1,
            "same_tokens_as_colocated": False,
        }.items()
    },
)
