"""The notebooks' "check yourself" cells, graded: the learner writes predictions into a
dict and :func:`notebook_check` runs the engine (or the kernels, or the cost model) to
judge each one. The answers stay hidden until the learner has filled in every prediction,
or asks for them with ``solution=True``.

Each notebook's questions are computed here from pdlab itself, as the cells used to compute
them in the open: notebook 01 asks a ``KVCacheManager``, 02 an ``LLMEngine``'s trace, 03 the
cost model, 04 the kernels, 05 a P/D pair (``pdlab.demo.run_demo``) and 07 the P/D pair
under each first-token design and ``pdlab sim``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pdlab.catalog import check_lang, text
from pdlab.errors import PdlabValueError, Phrase, invalid
from pdlab.exercises.wrap import wrap80


@dataclass(frozen=True)
class Question:
    key: str
    text: dict[str, str]
    why: dict[str, str]


def _nb01() -> dict[str, Any]:
    from pdlab.engine.config import CacheConfig
    from pdlab.engine.core.kv_cache_manager import KVCacheManager
    from pdlab.engine.request import Request

    out = {}
    for n in (23, 24):
        mgr = KVCacheManager(CacheConfig(block_size=8, num_blocks=8), max_model_len=64)
        ids = list(range(100, 100 + n))
        mgr.allocate_slots(Request("cached", ids), n)
        _, reused = mgr.get_computed_blocks(Request("same", ids))
        out[f"reused_{n}"], out[f"computed_{n}"] = reused, n - reused
    return out


def _nb02() -> dict[str, Any]:
    from pdlab.engine.config import CacheConfig, ModelConfig, SchedulerConfig
    from pdlab.engine.llm_engine import LLMEngine
    from pdlab.engine.request import SamplingParams

    eng = LLMEngine(
        ModelConfig.tiny(), CacheConfig(block_size=4), SchedulerConfig(max_num_batched_tokens=16),
        backend="torch",
    )  # fmt: skip
    eng.generate([(7 * i) % 256 for i in range(50)], SamplingParams(max_tokens=3))
    return {
        "first_sample_step": eng.tracer.first("sample")["step"],
        "num_steps": len([e for e in eng.tracer.filter("step") if e["scheduled"]]),
    }


def _nb03() -> dict[str, Any]:
    from pdlab.engine.config import ModelConfig
    from pdlab.sim.kernel_costs import absorb_crossover_query_len as x

    tiny, lite, v3 = (ModelConfig.preset(p) for p in ("tiny", "deepseek-v2-lite", "deepseek-v3"))
    return {
        "crossover_tiny": round(x(tiny), 1),
        "crossover_v2_lite": round(x(lite), 1),
        "depends_on_heads": x(lite) != x(v3),
    }


def _nb04() -> dict[str, Any]:
    import torch

    from pdlab import kernels
    from pdlab.attention.reference import naive_attention
    from pdlab.kernels.merge import partial_attention

    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(3, 2, 8, generator=g) for _ in range(3))
    a, b = partial_attention(q, k[:1], v[:1], 8**-0.5), partial_attention(q, k[1:], v[1:], 8**-0.5)
    empty = (torch.zeros_like(a[0]), torch.full_like(a[1], float("-inf")))
    o1, l1 = kernels.merge_attn_states(*a, *empty, backend="torch")
    o2, _ = kernels.merge_attn_states(*b, *a, backend="torch")
    whole, _ = naive_attention(q, k, v, 8**-0.5, False)
    cache = torch.randn(2, 4, 24, generator=g)
    qd = torch.randn(1, 2, 24, generator=g)
    table, lens = torch.tensor([[1, 0]], dtype=torch.int32), torch.tensor([3], dtype=torch.int32)
    d1, d16 = (kernels.mla_decode(qd, cache, table, lens, 0.2, num_kv_splits=n, kv_lora_rank=16,
                                  backend="torch") for n in (1, 16))  # fmt: skip
    return {
        "empty_part_returns_the_other": bool(torch.equal(o1, a[0]) and torch.equal(l1, a[1])),
        "order_matters": not torch.allclose(o2, whole, rtol=1e-5, atol=1e-5),
        "more_splits_than_tokens_same": bool(torch.allclose(d16[0], d1[0], rtol=1e-5, atol=1e-5)),
    }


def _nb05() -> dict[str, Any]:
    from pdlab.demo import prompt_of_length, run_demo
    from pdlab.engine.config import CacheConfig, ModelConfig, SchedulerConfig
    from pdlab.engine.llm_engine import LLMEngine
    from pdlab.engine.request import SamplingParams

    n, bs = 37, 16
    check = run_demo(n, block_size=bs, pcp=2, max_tokens=3)
    step = check.d_first_step
    d_kernels = check.trace.filter("kernel", "D", step=step["step"], layer=0)
    gathered = [e["shapes"]["rows"] for e in d_kernels if e["name"] == "gather_cache"]
    local = LLMEngine(ModelConfig.tiny(), CacheConfig(block_size=bs), SchedulerConfig(),
                      backend="torch")  # fmt: skip
    local.generate([prompt_of_length(n)] * 2, SamplingParams(max_tokens=1))
    reused = [e["num_cached_tokens"] for e in local.tracer.filter("admit")]
    flash = run_demo(n, block_size=bs, mla_backend="flashmla", max_tokens=3)
    return {
        "a_num_computed_tokens": step["num_computed_tokens"],
        "b_forward": step["forward"],
        "c_rows_gathered": sum(gathered),
        "d_local_reuse": reused[1],
        "e_p_forward_flashmla": flash.trace.first("route", "P")["forward"],
    }


def _nb07() -> dict[str, Any]:
    from pdlab.disagg.designs import MODES
    from pdlab.disagg.pair import PDPair
    from pdlab.engine.config import CacheConfig, ModelConfig, ParallelConfig, SchedulerConfig
    from pdlab.engine.request import SamplingParams
    from pdlab.sim.profiles import device_profile
    from pdlab.sim.report import run_grid
    from pdlab.sim.simulator import SimConfig

    firsts = {}
    for mode in MODES:
        pair = PDPair(ModelConfig.tiny(), CacheConfig(block_size=4), SchedulerConfig(),
                      backend="torch", first_token=mode,
                      parallel_config=ParallelConfig(prefill_context_parallel_size=2))  # fmt: skip
        pair.generate([list(range(40, 49))], SamplingParams(max_tokens=2))
        firsts[mode] = pair.tracer.filter("route", "D")[0]
    _, runs = run_grid(SimConfig(), ModelConfig.deepseek_v3(), device_profile("H200"), "h200",
                       routings=("pcp",))  # fmt: skip
    return {
        "a_recompute_computed": firsts["recompute"]["num_computed_tokens"],
        "b_append_prompt_forward": firsts["append_prompt"]["forward"],
        "c_first_token_forward": firsts["first_token"]["forward"],
        "d_uniform_designs": sum(all(s.uniform_decode for s in r.steps) for r in runs.values()),
    }


def _q(key: str, en: str, zh: str, why_en: str, why_zh: str) -> Question:
    return Question(key, {"en": en, "zh": zh}, {"en": why_en, "zh": why_zh})


NOTEBOOKS: dict[str, tuple[Callable[[], dict[str, Any]], list[Question]]] = {
    "01": (_nb01, [
        _q("reused_23", "23 tokens: reused", "23 个 token：复用",
           "floor((N - 1) / B) * B = 16", "floor((N - 1) / B) * B = 16"),
        _q("computed_23", "23 tokens: computed", "23 个 token：计算", "23 - 16", "23 - 16"),
        _q("reused_24", "24 tokens: reused", "24 个 token：复用",
           "the N - 1 cap leaves the last block partly uncovered, and only whole blocks count",
           "N - 1 上限让最后一块不能整块命中，而只有整块才算"),
        _q("computed_24", "24 tokens: computed", "24 个 token：计算",
           "a whole block is recomputed when N is a multiple of B",
           "N 是 B 的倍数时，要重算整整一块"),
    ]),
    "02": (_nb02, [
        _q("first_sample_step", "the step that samples the first token", "采样出第一个 token 的步",
           "ceil(50 / 16) = 4 chunks of prefill; the last one samples",
           "ceil(50 / 16) = 4 个预填充分块；最后一块采样"),
        _q("num_steps", "steps in all", "总步数",
           "4 prefill steps, then one step per further token: 4 + 3 - 1",
           "4 个预填充步，然后每多一个 token 一步：4 + 3 - 1"),
    ]),
    "03": (_nb03, [
        _q("crossover_tiny", "the tiny model's crossover (one decimal)",
           "小模型的临界点（一位小数）",
           "`L (nope + v) / ((2 L + R) - (qk + v)) = 64 * 64 / 64`",
           "`L (nope + v) / ((2 L + R) - (qk + v)) = 64 * 64 / 64`"),
        _q("crossover_v2_lite", "DeepSeek-V2-Lite's crossover (one decimal)",
           "DeepSeek-V2-Lite 的临界点（一位小数）",
           "the same widths as V3, so the same 170.7", "宽度与 V3 相同，所以同为 170.7"),
        _q("depends_on_heads", "does it depend on the number of heads? (True/False)",
           "它和头数有关吗？（True/False）",
           "H appears on both sides and cancels", "H 出现在两边，约掉了"),
    ]),
    "04": (_nb04, [
        _q("empty_part_returns_the_other",
           "(a) merging with an empty part returns the other part unchanged? (True/False)",
           "(a) 与空部分合并，得到的是另一部分本身吗？（True/False）",
           "an empty part has weight exp(-inf) = 0", "空部分的权重是 `exp(-inf) = 0`"),
        _q("order_matters", "(b) does the order of the parts matter? (True/False)",
           "(b) 各部分的顺序有影响吗？（True/False）",
           "the merge is symmetric in its two parts", "合并对两部分是对称的"),
        _q("more_splits_than_tokens_same",
           "(c) 16 splits over 3 tokens: the same as 1 split? (True/False)",
           "(c) 3 个 token 切 16 份：和切 1 份结果相同吗？（True/False）",
           "empty splits weigh nothing in stage 2's merge", "空的切分在第二阶段的合并中权重为零"),
    ]),
    "05": (_nb05, [
        _q("a_num_computed_tokens", "(a) D's num_computed_tokens when it first computes",
           "(a) D 第一次计算时的 num_computed_tokens", "N - 1 = 36", "N - 1 = 36"),
        _q("b_forward", '(b) which forward runs ("forward_mqa" or "forward_mha")',
           "(b) 跑的是哪条前向路径（\"forward_mqa\" 或 \"forward_mha\"）",
           "under PCP the short extend is a prefill", "PCP 下短 extend 算作预填充"),
        _q("c_rows_gathered", "(c) latent rows gathered per layer",
           "(c) 每层 `gather` 的潜向量行数",
           "the whole context, N - 1 = 36 rows", "整个上下文：N - 1 = 36 行"),
        _q("d_local_reuse", "(d) tokens reused from a local prefix cache",
           "(d) 从本地前缀缓存复用的 token 数",
           "floor(36 / 16) * 16 = 32", "floor(36 / 16) * 16 = 32"),
        _q("e_p_forward_flashmla", "(e) P's first step under flashmla, without PCP",
           "(e) FlashMLA 配置、不开 PCP 时 P 的第一步",
           "FLASHMLA's threshold is 128, and a uniform batch of one 37-token prompt fits it",
           "FLASHMLA 的阈值是 128，只有一个 37 token 提示词的批次是统一的，也在阈值内"),
    ]),
    "07": (_nb07, [
        _q("a_recompute_computed", "(a) recompute: D's num_computed_tokens on its first step",
           "(a) recompute：D 第一步的 num_computed_tokens",
           "N - 1 = 8: position N-1 runs again", "N - 1 = 8：位置 N-1 再算一遍"),
        _q("b_append_prompt_forward", "(b) append_prompt under PCP: which forward",
           "(b) append_prompt 在 PCP 下：哪条前向路径",
           "one prompt token over N, still is_prefilling: a prefill row under PCP",
           "N 个之上的一个提示词 token，仍是 is_prefilling：PCP 下是 prefill 行"),
        _q("c_first_token_forward", "(c) first_token under PCP: which forward",
           "(c) first_token 在 PCP 下：哪条前向路径",
           "P's token decodes over N: a decode row everywhere",
           "P 的 token 在 N 个之上解码：到哪里都是 decode 行"),
        _q("d_uniform_designs", "(d) designs whose every PCP step stays a uniform decode batch",
           "(d) PCP 下每一步都保持均匀解码批次的设计有几个",
           "first_token and hidden_state: their first row is a decode",
           "first_token 与 hidden_state：它们的第一行就是解码"),
    ]),
}  # fmt: skip


@functools.lru_cache(maxsize=8)
def answers(notebook: str) -> dict[str, Any]:
    """What pdlab computes for ``notebook``'s questions (``"01"`` to ``"05"``, ``"07"``)."""
    if notebook not in NOTEBOOKS:
        raise invalid("notebook", notebook, Phrase("err_x_one_of", choices=tuple(NOTEBOOKS)))
    return NOTEBOOKS[notebook][0]()


def _same(mine: Any, right: Any) -> bool:
    if isinstance(right, bool):
        return isinstance(mine, bool) and mine == right
    if isinstance(right, float):
        return isinstance(mine, (int, float)) and abs(mine - right) <= 0.05
    if isinstance(right, str):
        return isinstance(mine, str) and mine.strip() == right
    return isinstance(mine, int) and not isinstance(mine, bool) and mine == right


def notebook_check(notebook: str, predictions: Mapping[str, Any], lang: str = "en",
                   solution: bool = False) -> bool:  # fmt: skip
    """Grade ``predictions`` for ``notebook``'s check-yourself questions and print the
    verdict; ``True`` when every one is right. While any prediction is None, nothing is
    revealed (unless ``solution``)."""
    check_lang(lang)
    right = answers(notebook)
    questions = NOTEBOOKS[notebook][1]
    keys = [q.key for q in questions]
    unknown = sorted(set(predictions) - set(keys))
    if unknown:
        raise PdlabValueError("err_predictions_unknown", unknown=unknown, keys=keys)
    missing = [key for key in keys if predictions.get(key) is None]
    if missing and not solution:
        print(wrap80(text(lang, "ex_nb_fill_in", keys=", ".join(missing))))
        return False
    ok, lines = True, []
    for q in questions:
        mine = predictions.get(q.key)
        good = mine is not None and _same(mine, right[q.key])
        ok = ok and good
        mark = "✓" if good else "·" if mine is None else "✗"
        lines.append(f"{mark} {q.text[lang]}: {right[q.key]!r}  ({q.why[lang]})")
        if not good and mine is not None:
            lines.append("  " + text(lang, "ex_nb_you_said", value=repr(mine)))
    done = "ex_nb_all_right" if ok else "ex_nb_solution" if missing else "ex_nb_some_wrong"
    lines.append(text(lang, done))
    print(wrap80("\n".join(lines)))
    return ok
