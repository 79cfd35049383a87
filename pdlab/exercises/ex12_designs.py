"""Exercise 12: the four first-token designs, predicted and then run: what D's first step
schedules under ``recompute``, ``first_token``, ``append_prompt`` and ``hidden_state``
(``pdlab/disagg/designs.py``, chapter 7 and notebook 07).

``PREDICTIONS`` (read from the function's module) is graded against D's first step in a
live :class:`pdlab.disagg.pair.PDPair` of each design; ``hand_off`` replaces
:func:`pdlab.disagg.designs.hand_off` in pairs run beside pdlab's own: every step D
schedules, whether D is asked at all, and the tokens must agree. No vLLM 0.33.0
counterpart (its proxy forwards the request unchanged, the ``recompute`` design).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from typing import Any

import pdlab.disagg.pair as pair_module
from pdlab.disagg.designs import HandOff
from pdlab.engine.config import SchedulerConfig
from pdlab.engine.request import SamplingParams
from pdlab.exercises import engine_runs as er
from pdlab.exercises.base import Exercise, Grader, Words, patched
from pdlab.exercises.bilingual import slip
from pdlab.exercises.cases import Draw, diagnose_by, random_cases

N = 13
MODES = ("recompute", "first_token", "append_prompt", "hidden_state")


def _run(fn: Any, mode: str, max_tokens: int, stop_first: bool, g: Grader,
         max_model_len: int | None = None) -> dict[str, Any]:  # fmt: skip
    """A pair of ``mode`` generating the N-token prompt, ``fn`` as its proxy's hand_off
    (pdlab's own when None); ``stop_first`` makes the colocated first token a stop token,
    ``max_model_len`` leaves that much room."""
    prompt = er.prompt_of(N)
    stops = (er.colocated_tokens(tuple(prompt))[0],) if stop_first else ()
    sp = SamplingParams(max_tokens=max_tokens, stop_token_ids=stops)
    sched = SchedulerConfig(max_model_len=max_model_len)
    pair = er.pair(first_token=mode, scheduler_config=sched)
    real = pair_module.hand_off

    sent: list[tuple] = []

    def learner(*a: Any, **kw: Any) -> Any:
        h = real(*a, **kw) if fn is None else g.call(fn, *a, **kw)
        sent.append(_fields(h))
        return h

    out, error = [], None
    with patched(pair_module, "hand_off", learner):
        try:
            out = pair.generate(prompt, sp)[0].output_token_ids
        except (ValueError, RuntimeError) as e:  # the engine refused what it was sent
            error = f"{type(e).__name__}: {e}"
    rows = [(r["num_computed_tokens_before"], r["num_scheduled_tokens"], r["num_prompt_tokens"])
            for r in pair.tracer.step_rows("D")]  # fmt: skip
    routes = pair.tracer.filter("route", "D")
    first = (*rows[0][:2], bool(routes[0]["is_prefilling"])) if rows and routes else None
    return {"tokens": out, "rows": rows, "first": first, "trace": pair.tracer, "error": error,
            "sent": sent}  # fmt: skip


def _fields(h: Any) -> tuple:
    """What a hand-off sends, as the grader compares it: D's prompt length, its max_tokens,
    the names of the params (None: no K/V to pull), the prefix, done, finish_reason."""
    params = getattr(h, "kv_transfer_params", None)
    sp = getattr(h, "sampling_params", None)
    return (len(getattr(h, "prompt", ()) or ()), getattr(sp, "max_tokens", None),
            None if params is None else tuple(sorted(params)), list(getattr(h, "prefix", [])),
            bool(getattr(h, "done", False)), getattr(h, "finish_reason", None))  # fmt: skip


@functools.lru_cache(maxsize=16)
def _reference(mode: str, max_tokens: int, stop_first: bool,
               max_model_len: int | None = None) -> dict[str, Any]:  # fmt: skip
    return _run(None, mode, max_tokens, stop_first, Grader(0, "en"), max_model_len)


def grade(fn: Any, g: Grader) -> None:
    predictions = getattr(fn, "__globals__", {}).get("PREDICTIONS")
    for mode in MODES:
        with g.case(Words("ex12_your_prediction_first_step_under", mode=mode, N=N)):  # fmt: skip
            ref = _reference(mode, er.MAX_TOKENS, False)
            said = predictions.get(mode) if isinstance(predictions, dict) else None
            if said is None:
                g.fail(Words("ex12_predictions_mode_computed_before_scheduled"),
                       Words("ex12_no_prediction_written"))  # fmt: skip
            said = tuple(said) if isinstance(said, (tuple, list)) else said
            if said != ref["first"]:
                table = er.table_text(ref["trace"], None, g.lang)
                g.fail(ref["first"], said, f"predict_{mode}", table)
    _random(fn, g)
    cases = [(mode, er.MAX_TOKENS, False, None) for mode in MODES]
    cases += [(m, 1, False, None) for m in ("first_token", "append_prompt")]
    cases += [(m, er.MAX_TOKENS, True, None) for m in MODES]
    cases += [(m, er.MAX_TOKENS, False, N + 1) for m in ("append_prompt", "first_token")]
    for mode, max_tokens, stop_first, room in cases:
        what = (
            Words("ex12_token_is_stop_token") if stop_first
            else "max_tokens = 1" if max_tokens == 1
            else Words("ex12_max_model_len_room_for", room=room) if room
            else f"max_tokens = {max_tokens}"
        )  # fmt: skip
        with g.case(Words("ex12_live_pdpair_under_your_hand", mode=mode, N=N, what=what)):
            want = _reference(mode, max_tokens, stop_first, room)
            got = _run(fn, mode, max_tokens, stop_first, g, room)
            _judge(g, mode, want, got, room)


def _hand_off(variant: str, case: dict) -> HandOff:
    """pdlab's ``hand_off`` (``variant`` ""), or what a learner who made mistake
    ``variant`` returns, for the random ``case``."""
    mode, prompt, sp = case["mode"], list(case["prompt"]), case["sp"]
    params, p_tokens, p_step = case["params"], case["p_tokens"], case["p_step"]
    failed = params is None and variant != "failed_handoff_ignored"
    skips = {"hidden_state_sent_token": ("recompute",), "recompute_sent_token": ("hidden_state",)}
    skip = skips.get(variant, ("recompute", "hidden_state"))
    if failed or mode in skip or not p_tokens:
        return HandOff(prompt, sp, params)
    t = p_tokens[0]
    stops = sp.stop_token_ids[:1] if variant == "first_stop_only" else sp.stop_token_ids
    if t in stops and variant != "stop_ignored":
        return HandOff(prompt, sp, None, [t], True, "stop")
    room = len(prompt) + (2 if variant == "length_off_by_one" else 1) >= case["max_len"]
    if sp.max_tokens == 1 or (room and variant != "length_ignored"):
        return HandOff(prompt, sp, None, [t], True, "length")
    params = dict(params or {}, first_token_step=p_step)
    if mode in ("first_token", "recompute", "hidden_state"):
        again = [*prompt, t] if variant == "first_token_appended" else prompt
        return HandOff(again, sp, dict(params, first_token_ids=[t]))
    left = sp.max_tokens if variant == "max_tokens_kept" else sp.max_tokens - 1
    rest = dataclasses.replace(sp, max_tokens=left)
    return HandOff([*prompt, t], rest, params, [] if variant == "no_prefix" else [t])


_RANDOM_MISTAKES = ("failed_handoff_ignored", "first_stop_only", "length_off_by_one",
                    "stop_ignored", "length_ignored",
                    "hidden_state_sent_token", "recompute_sent_token", "first_token_appended",
                    "max_tokens_kept", "no_prefix")  # fmt: skip


def _draw(rng: Any) -> dict:
    """One hand-off, biased to the edges: a failed hand-off (no params), a 1-token prompt,
    max_model_len at, under and over the prompt and P's token, max_tokens 1 or 2, P's
    token a stop token first or second in the list."""
    n = rng.choice((1, 2, 4, N, rng.randrange(1, 40)))
    prompt = [rng.randrange(256) for _ in range(n)]
    t = rng.randrange(256)
    stops = rng.choice(((), (), (t,), ((t + 1) % 256, t), ((t + 1) % 256,)))
    sp = SamplingParams(max_tokens=rng.choice((1, 2, 3, rng.randrange(1, 20))),
                        stop_token_ids=stops)  # fmt: skip
    params = None if rng.random() < 0.25 else {
        "remote_block_ids": list(range(rng.randrange(1, 5))), "remote_engine_id": "P",
        "do_remote_prefill": True}  # fmt: skip
    return {"mode": rng.choice(MODES), "prompt": prompt, "sp": sp, "params": params,
            "p_tokens": [t] if rng.random() < 0.95 else [], "p_step": rng.randrange(1, 60),
            "max_len": rng.choice((n + 1, n + 2, n + 2, n + 3, 4096))}  # fmt: skip


def _shrink(case: dict) -> list[dict]:
    out = []
    if len(case["prompt"]) > 1:
        cut = len(case["prompt"]) - 1
        out.append(case | {"prompt": case["prompt"][:cut], "max_len": case["max_len"] - 1})
    if case["sp"].max_tokens > 2:
        out.append(case | {"sp": dataclasses.replace(case["sp"], max_tokens=2)})
    return out


def _features(case: dict) -> Words:
    n, sp = len(case["prompt"]), case["sp"]
    t = case["p_tokens"][0] if case["p_tokens"] else None
    stop = ("ex12_stop_first" if sp.stop_token_ids[:1] == (t,) else
            "ex12_stop_later" if t in sp.stop_token_ids else "ex12_stop_no")  # fmt: skip
    params = "ex12_failed_handoff" if case["params"] is None else "ex12_params_sent"
    return Words("ex12_random_features", mode=case["mode"], n=n, room=case["max_len"] - n,
                 max_tokens=sp.max_tokens, stop=Words(stop), params=Words(params))  # fmt: skip


def _shown(case: dict) -> str:
    return (f"hand_off({case['mode']!r}, prompt of {len(case['prompt'])}, {case['sp']}, "
            f"p_tokens={case['p_tokens']}, kv_transfer_params={case['params']}, "
            f"p_step={case['p_step']}, max_model_len={case['max_len']})")  # fmt: skip


def _as_tuple(h: Any) -> tuple:
    return (list(h.prompt), h.sampling_params, h.kv_transfer_params, list(h.prefix), h.done,
            h.finish_reason)  # fmt: skip


def _same_hand_off(a: Any, b: Any) -> bool:
    try:
        return _as_tuple(a) == _as_tuple(b)
    except (AttributeError, TypeError):
        return False


def _random(fn: Any, g: Grader) -> None:
    def learner(case: dict) -> Any:
        given = copy.deepcopy(case)
        got = g.call(fn, case["mode"], given["prompt"], given["sp"], given["p_tokens"],
                     given["params"], case["p_step"], case["max_len"])  # fmt: skip
        changed = [k for k in ("prompt", "p_tokens", "params") if given[k] != case[k]]
        if changed:
            what = Words("ex12_inputs_changed", what=", ".join(changed))
            g.fail(Words("ex12_inputs_as_they_were"), what, "mutated_input")
        return got

    def probes(case: dict) -> list[dict]:
        n, t = len(case["prompt"]), (case["p_tokens"] or [7])[0]
        out = [case | {"max_len": m} for m in (n + 1, n + 2, 4096)]
        out += [case | {"mode": m, "params": {"x": 1}, "p_tokens": [t], "max_len": 4096,
                        "sp": SamplingParams(max_tokens=5, stop_token_ids=stops)}
                for m in MODES for stops in ((), ((t + 1) % 256, t), (t,))]  # fmt: skip
        out += [case | {"params": None}]
        return out

    variants = {k: functools.partial(_hand_off, k) for k in _RANDOM_MISTAKES}
    by_variant = diagnose_by(variants, probes, _same_hand_off)

    def diagnose(case: dict, got: Any, ask: Any) -> str | None:
        want = _hand_off("", case)
        mine, right = dict(got.kv_transfer_params or {}), dict(want.kv_transfer_params or {})
        step = mine.pop("first_token_step", None), right.pop("first_token_step", None)
        if step[0] != step[1] and mine == right and _same_hand_off(
                dataclasses.replace(got, kv_transfer_params=None),
                dataclasses.replace(want, kv_transfer_params=None)):  # fmt: skip
            return "first_token_step"
        return by_variant(case, got, ask)

    random_cases(g, Draw(_draw, _shrink, _features, _shown), learner,
                 functools.partial(_hand_off, ""), count=200, diagnose=diagnose, spec=HandOff,
                 same=_same_hand_off)  # fmt: skip


def _names(sent: list[tuple]) -> set[str]:
    return {k for h in sent for k in (h[2] or ())}


def _sent(sent: list[tuple], common: set[str], shared: str) -> str:
    """The hand-offs in words (the field names as :class:`HandOff` has them), the params
    by the names the other side lacks or has besides ``common``."""

    def params(p: tuple | None) -> str:
        if p is None:
            return "None"
        own = [k for k in p if k not in common]
        return f"{{{len(p) - len(own)} {shared}{''.join(', ' + k for k in own)}}}"

    return "; ".join(
        f"prompt {n}, max_tokens {m}, kv_transfer_params {params(p)}, prefix {x}, done {d}"
        + (f", finish_reason {r!r}" if r else "")
        for n, m, p, x, d, r in sent
    )


def _judge(g: Grader, mode: str, want: dict[str, Any], got: dict[str, Any],
           room: int | None = None) -> None:  # fmt: skip
    table = er.table_text(got["trace"], None, g.lang)
    if got["error"] and not want["error"]:
        g.fail(want["tokens"], Words("ex12_refused_request"),
               "length_ignored" if room else None, er.said(got["error"], g.lang))  # fmt: skip
    if want["rows"] == [] and got["rows"]:
        g.fail(Words("ex12_never_asked_token_is_whole"),
               Words("ex12_ran_steps", v0=len(got['rows'])),
               "length_ignored" if room else "stop_ignored", table)  # fmt: skip
    if got["rows"] != want["rows"]:
        mistake = None
        if got["rows"] and want["rows"]:
            (c, _, p), (wc, _, wp) = got["rows"][0], want["rows"][0]
            if mode == "first_token" and p == wp + 1:
                mistake = "first_token_appended"
            elif mode == "recompute" and c == wc + 1:
                mistake = "recompute_sent_token"
            elif mode == "append_prompt" and len(got["rows"]) == len(want["rows"]) + 1:
                mistake = "max_tokens_kept"
        g.fail(want["rows"], got["rows"], mistake, table)
    wrong = {"no_prefix": want["tokens"][1:]} if mode == "append_prompt" else {}
    g.expect(got["tokens"], want["tokens"], wrong, table)
    if got["sent"] != want["sent"]:
        extra = [k for h in got["sent"] for k in (h[2] or ()) if k not in _names(want["sent"])]
        mistake = "hidden_state_sent_token" if mode == "hidden_state" and extra else None
        if any(w[4] and not h[4] for w, h in zip(want["sent"], got["sent"])):
            mistake = "length_ignored" if room else "stop_ignored"  # P's token was the answer
        common = _names(want["sent"]) & _names(got["sent"])
        shared = g.t(Words("ex12_shared"))
        g.fail(_sent(want["sent"], common, shared), _sent(got["sent"], common, shared), mistake,
               table)  # fmt: skip


_slip = functools.partial(slip, "ex12_designs")


EXERCISE = Exercise(
    number=12, slug="ex12_designs", function="hand_off",
    library="pdlab/disagg/designs.py (hand_off)", own=("pdlab.disagg.designs:hand_off",),
    notebook="07_pd_designs",
    title={"en": "Four first-token designs: predict, then run",
           "zh": "四种首 token 设计：先预测，再运行"},
    statement={
        "en": """\
Exercise 12: the first-token designs (pdlab pd --first-token)

P prefills the prompt and samples one token; D must produce the first output token and
continue. The four designs differ in what travels with the K/V:
  * recompute (vLLM 0.33.0): nothing; D computes token 1 itself;
  * first_token (SGLang, TensorRT-LLM): P's token, which D takes as its first output;
  * append_prompt: P's token appended to D's prompt (N + 1 tokens);
  * hidden_state: P's last hidden state; D computes lm_head(h) for token 1.

First predict, in PREDICTIONS, D's first step for an N = 13 prompt under each design:
(num_computed_tokens before the step, tokens scheduled, is_prefilling). Then write
hand_off, the proxy's step 2: what D is sent, and the tokens put before D's. P's token
can be the whole answer (a stop token, max_tokens = 1): then D is never asked.

The rules hand_off needs: kv_transfer_params is None when P could not hand over (then
the request goes to D as it came). P's token ends the request when it is any of the
stop_token_ids, when max_tokens is 1, or when the prompt and it leave no position for
D's token (len(prompt) + 1 >= max_model_len). p_step is the step P finished in: whenever
P's token travels, the params say so, first_token_step = p_step. Build new objects;
never change the prompt, p_tokens or params you are given.

The grader checks your predictions against D's first step in a live PDPair of each
design, then runs the pairs with your hand_off beside pdlab's own: every step D
schedules, whether D is asked, and the tokens must agree.""",
        "zh": """\
练习 12：首 token 设计（pdlab pd --first-token）

P 对提示词做预填充并采样一个 token；D 要给出第一个输出 token 并继续生成。四种设计的区别在于
随 K/V 一起传什么：
  * recompute（vLLM 0.33.0）：什么也不传；D 自己计算 token 1；
  * first_token（SGLang、TensorRT-LLM）：P 的 token，D 把它当作第一个输出；
  * append_prompt：把 P 的 token 追加到 D 的提示词后（N + 1 个 token）；
  * hidden_state：P 的最后隐藏状态；D 计算 lm_head(h) 得到 token 1。

先在 PREDICTIONS 里预测：N = 13 的提示词在每种设计下 D 的第一步是
（这一步之前的 num_computed_tokens，调度的 token 数，is_prefilling）。然后实现 hand_off，
即代理的第 2 步：发给 D 什么，以及放在 D 的 token 前面的 token。P 的 token 可能就是全部答案
（停止 token，max_tokens = 1）：这时根本不需要 D。

hand_off 需要的规则：P 无法交接时 kv_transfer_params 为 None（这时请求原样发给 D）。
P 的 token 是 stop_token_ids 中任何一个、max_tokens 为 1、或提示词加上它之后不再给 D 的
token 留位置（`len(prompt) + 1 >= max_model_len`）时，P 的 token 就结束了请求。p_step 是
P 完成的那一步：只要 P 的 token 随参数传出，参数就写明 first_token_step = p_step。请新建
对象，绝不修改传入的 `prompt`、`p_tokens` 或参数。

评分先把你的预测与每种设计下真实 PDPair 中 D 的第一步比较，再让这些 P/D 对用你的 hand_off
与 pdlab 自己的对照运行：D 调度的每一步、是否需要 D、以及生成的 token 都必须一致。"""},
    hints={
        "en": (
            "recompute: the K/V of all N tokens arrive, yet the logits need the last one's "
            "hidden state, so D runs position N - 1 again. append_prompt: D's prompt has "
            "N + 1 tokens and N are cached, so its one new token is still a prompt token.",
            "Ask in order: did P hand over at all (kv_transfer_params None: the request goes "
            "as it came)? Does the design send P's token? Is P's token already the whole "
            "answer (any stop token, max_tokens 1, no room for D's token)? Then build new "
            "objects, never change the ones given: first_token puts the token in the params, "
            "append_prompt in the prompt (D owes one token fewer; the token is the prefix)."),
        "zh": (
            "recompute：全部 N 个 token 的 K/V 都到了，但 logits 需要最后一个 token 的隐藏状态，"
            "所以 D 再算一遍位置 N - 1。append_prompt：D 的提示词有 N + 1 个 token、已缓存 N 个，"
            "所以它那一个新 token 仍是提示词 token。",
            "按顺序问：P 到底有没有交接（kv_transfer_params 为 None：请求原样发出）？这个设计"
            "传不传 P 的 token？P 的 token 是否已经是全部回答（任一停止 token、max_tokens 为 1、"
            "没有 D 的 token 的位置）？然后新建对象，绝不修改传入的：first_token 把 token 放进"
            "参数，append_prompt 放进提示词（D 少生成一个 token；这个 token 作为前缀）。"),
    },
    mistakes={
        "predict_recompute": {
            "en": "recompute's first step is one token over N - 1 = 12, still is_prefilling: "
            "the transfer carries every layer's K/V of the 13 prompt tokens but not the last "
            "one's final hidden state, and token 1's logits need it",
            "zh": "recompute 的第一步是在 N - 1 = 12 之上算 1 个 token，仍 is_prefilling："
            "传输带来了 13 个提示词 token 每一层的 K/V，却没有最后一个的最终隐藏状态，"
            "而 token 1 的 logits 需要它"},
        "predict_first_token": {
            "en": "under first_token D already holds token 1 (P's): its first step decodes "
            "token 2 over all 13 prompt tokens, a plain decode (not is_prefilling)",
            "zh": "first_token 下 D 已经有了 token 1（P 的）：它的第一步在全部 13 个提示词 token 之"
            "上解码 token 2，是普通 decode 行（不是 is_prefilling）"},
        "predict_append_prompt": {
            "en": "under append_prompt P's token is prompt token 14: D's first step is one "
            "token over the 13 cached, and it is still is_prefilling (13 < 14)",
            "zh": "append_prompt 下 P 的 token 是第 14 个提示词 token：D 的第一步在 13 个已缓存之上"
            "算 1 个，且仍 is_prefilling（13 < 14）"},
        "predict_hidden_state": {
            "en": "under hidden_state token 1 comes from lm_head(h) alone, no model step: D's "
            "first step decodes token 2 over all 13, not is_prefilling",
            "zh": "hidden_state 下 token 1 只由 lm_head(h) 得到，不需要模型步：D 的第一步在全部 13 "
            "个之上解码 token 2，不是 is_prefilling"},
        "stop_ignored": {
            "en": "asking D when P's token already ended the request (a stop token, "
            "max_tokens = 1, or no room left under max_model_len): the proxy answers with "
            "P's token alone and D never runs",
            "zh": "P 的 token 已经结束了请求（停止 token、max_tokens = 1，或 max_model_len 已无"
            "余地）却仍然请求 D：代理只用 P 的 token 作答，D 根本不运行"},
        "length_ignored": {
            "en": "asking D when the prompt and P's token fill max_model_len: there is no "
            "room for D's token, so P's token ends the request (finish_reason length)",
            "zh": "提示词加上 P 的 token 已经占满 max_model_len 却仍然请求 D：D 的 token 已无位置，"
            "所以 P 的 token 结束了请求（`finish_reason` 为 `length`）"},
        "hidden_state_sent_token": {
            "en": "sending P's token under hidden_state: what travels is P's last hidden "
            "state (already in the params); D computes token 1 from it with lm_head",
            "zh": "hidden_state 下发送了 P 的 token：传过去的是 P 的最后隐藏状态（已在参数里）；"
            "D 用 lm_head 由它算出 token 1"},
        "first_token_appended": {
            "en": "under first_token, appending P's token to D's prompt as well: D takes it "
            "as its first output token (first_token_ids); the prompt stays N tokens",
            "zh": "first_token 下还把 P 的 token 追加到了 D 的提示词后：D 把它作为第一个输出 token"
            "（first_token_ids）；提示词仍是 N 个 token"},
        "recompute_sent_token": {
            "en": "sending P's token under recompute: vLLM's design sends nothing but the "
            "K/V, and D recomputes position N - 1 for token 1",
            "zh": "recompute 下发送了 P 的 token：vLLM 的设计只传 K/V，D 重算位置 N - 1 "
            "得到 token 1"},
        "failed_handoff_ignored": {
            "en": "treating a failed hand-off (kv_transfer_params None: P could not hand "
            "over) as a sent one: there are no K/V to pull, so D gets the request as it "
            "came, params None, and computes it all",
            "zh": "把失败的交接（`kv_transfer_params` 为 None：P 无法交接）当成已发送的："
            "没有可拉取的 K/V，所以 D 原样收到请求、参数为 None，全部自己计算"},
        "first_stop_only": {
            "en": "testing P's token against the first stop token only: any of "
            "stop_token_ids ends the request",
            "zh": "只拿 P 的 token 和第一个停止 token 比较：stop_token_ids 中任何一个都会结束请求",
        },
        "length_off_by_one": {
            "en": "the max_model_len test one off: P's token ends the request only when the "
            "prompt and it leave no position for D's token, len(prompt) + 1 >= max_model_len; "
            "one earlier and the answer loses a token D had room for",
            "zh": "max_model_len 的判断差了一个：只有提示词加上 P 的 token 后不再给 D 的 token "
            "留位置，即 `len(prompt) + 1 >= max_model_len` 时，P 的 token 才结束请求；"
            "提前一个就会让回答少一个 D 本有位置生成的 token"},
        "first_token_step": {
            "en": "first_token_step missing or not p_step: whenever P's token travels, the "
            "params say the step P sampled it in, first_token_step = p_step (P's step count "
            "when it finished)",
            "zh": "first_token_step 缺失或不等于 p_step：只要 P 的 token 随参数传出，"
            "参数就要写明 P 是在哪一步采样出它的，即 first_token_step = p_step（P 完成时的步数）"},
        "mutated_input": {
            "en": "changing what you were given (the prompt, p_tokens or kv_transfer_params) "
            "in place: the proxy still holds them for the answer and for other requests; "
            "build new ones (list(prompt), dict(params, ...))",
            "zh": "就地修改了传入的对象（`prompt`、`p_tokens` 或 `kv_transfer_params`）："
            "代理作答和处理其他请求时还要用它们；请新建（`list(prompt)`、`dict(params, ...)`）"},
        "max_tokens_kept": {
            "en": "under append_prompt, keeping max_tokens: P's token is one of the answer's "
            "tokens, so D owes one fewer (max_tokens - 1)",
            "zh": "append_prompt 下没有改 max_tokens：P 的 token 算作答案的一个 token，所以 D 少生"
            "成一个（max_tokens - 1）"},
        "no_prefix": {
            "en": "under append_prompt, no prefix: D's prompt holds P's token, so D's output "
            "starts at token 2 and the proxy must put P's token in front",
            "zh": "append_prompt 下没有前缀：P 的 token 在 D 的提示词里，D 的输出从 token 2 开始，"
            "代理必须把 P 的 token 放在前面"},
    },
    grade=grade,
    slips={
        "predict_recompute": _slip('"recompute": (12, 1, True)', '"recompute": (13, 1, True)'),
        "predict_first_token": _slip('"first_token": (13, 1, False)',
                                     '"first_token": (12, 1, True)'),
        "predict_append_prompt": _slip('"append_prompt": (13, 1, True)',
                                       '"append_prompt": (13, 1, False)'),
        "predict_hidden_state": _slip('"hidden_state": (13, 1, False)',
                                      '"hidden_state": (12, 1, True)'),
        "stop_ignored": _slip('    if t in sp.stop_token_ids:\n        return HandOff(prompt, '
                              'sp, None, [t], True, "stop")\n', ""),
        "length_ignored": _slip("sp.max_tokens == 1 or len(prompt) + 1 >= max_model_len",
                                "sp.max_tokens == 1"),
        "first_token_appended": _slip("return HandOff(prompt, sp, dict(params, first_token_ids",
                                      "return HandOff([*prompt, t], sp, dict(params, "
                                      "first_token_ids"),
        "recompute_sent_token": _slip('mode in ("recompute", "hidden_state")',
                                      'mode == "hidden_state"')
        .replace('if mode == "first_token":', 'if mode in ("first_token", "recompute"):'),
        "hidden_state_sent_token": _slip('mode in ("recompute", "hidden_state")',
                                         'mode == "recompute"')
        .replace('if mode == "first_token":', 'if mode in ("first_token", "hidden_state"):'),
        "max_tokens_kept": _slip("max_tokens=sp.max_tokens - 1", "max_tokens=sp.max_tokens"),
        "first_stop_only": _slip("if t in sp.stop_token_ids:",
                                 "if sp.stop_token_ids and t == sp.stop_token_ids[0]:"),
        "length_off_by_one": _slip("len(prompt) + 1 >= max_model_len",
                                   "len(prompt) + 2 >= max_model_len"),
        "first_token_step": _slip("first_token_step=p_step)", "first_token_step=p_step + 1)"),
        "mutated_input": _slip("params = dict(kv_transfer_params, first_token_step=p_step)",
                               'kv_transfer_params["first_token_step"] = p_step\n'
                               "    params = kv_transfer_params"),
        "failed_handoff_ignored": _slip("if kv_transfer_params is None or mode", "if mode")
        .replace("dict(kv_transfer_params, first", "dict(kv_transfer_params or {}, first"),
        "no_prefix": _slip("return HandOff([*prompt, t], rest, params, [t])",
                           "return HandOff([*prompt, t], rest, params)"),
    },  # fmt: skip
)  # fmt: skip
