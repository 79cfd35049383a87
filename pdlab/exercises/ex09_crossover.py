"""Exercise 9: the absorb crossover from the cost formulas: when the absorbed form needs
fewer FLOPs, and that it never does for a fresh prompt.

Graded against ``pdlab.sim.kernel_costs.mla_forms_flops`` (the cost model the tour, the
notebooks and ``pdlab bench paths`` use) at the tiny, DeepSeek-V2-Lite and DeepSeek-V3
widths; then the consequences are read off the learner's own numbers: the query length at
which absorbing stops winning over a long context must be ``absorb_crossover_query_len``'s
(about 171 for V3), and no fresh prompt (no cached context) may come out cheaper absorbed.
"""

from __future__ import annotations

import functools
from typing import Any

from pdlab.engine.config import ModelConfig
from pdlab.exercises.base import Exercise, Grader, Words
from pdlab.exercises.bilingual import slip
from pdlab.sim import kernel_costs as cost

_PRESETS = ("tiny", "deepseek-v2-lite", "deepseek-v3")


def _wrong(cfg: ModelConfig, q: int, s: int) -> dict[str, tuple[float, float]]:
    h, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    n, v = cfg.qk_nope_head_dim, cfg.v_head_dim
    proj, naive, absorbed = 2.0 * L * h * (n + v), *cost.mla_forms_flops(cfg, q, s)
    causal = q * s + q * (q + 1) / 2
    full = q * (s + q)
    per_pair = 2.0 * h * (n + R + v), 2.0 * h * (2 * L + R)
    return {
        "context_only": (naive - q * proj, absorbed),
        "no_absorb_cost": (naive, absorbed - q * proj),
        "no_causal": (
            naive + (full - causal) * per_pair[0],
            absorbed + (full - causal) * per_pair[1],
        ),
        "latent_pair_width": (naive, absorbed - causal * 2.0 * h * L),
    }  # fmt: skip


_slip = functools.partial(slip, "ex09_crossover")


def grade(fn: Any, g: Grader) -> None:
    r = g.rng.randrange
    cases = [
        ("deepseek-v3", 1, 4096, Words("ex09_one_token_step_over_4096")),
        ("deepseek-v3", 4096, 0, Words("ex09_fresh_prompt_4096")),
        ("deepseek-v3", 1, 0, Words("ex09_one_token_prompt_empty_context")),
        ("deepseek-v2-lite", 64, 1024, Words("ex09_chunk_64_over_1024")),
        ("tiny", 13, 0, Words("ex09_tiny_model_fresh_prompt_13")),
        (_PRESETS[r(0, 3)], r(1, 400), r(0, 20000), Words("ex09_random")),
    ]
    for _ in range(12):  # random, biased to the edges: 1 query, no context, near 171
        q = g.rng.choice((1, 2, 170, 171, 172, r(1, 8193)))
        s = g.rng.choice((0, 0, 1, r(1, 10**6)))
        cases.append((_PRESETS[r(0, 3)], q, s, Words("ex09_random")))
    for preset, q, s, what in cases:
        cfg = ModelConfig.preset(preset)
        with g.case(Words("ex09_case", what=what, preset=preset, q=q, s=s)):
            got = tuple(g.returns(g.call(fn, cfg, q, s), (float, float)))
            g.expect(got, cost.mla_forms_flops(cfg, q, s), _wrong(cfg, q, s))
    cfg = ModelConfig.deepseek_v3()
    with g.case(Words("ex09_deepseek_v3_context_10_last")):
        wins = [q for q in range(1, 400) if fn(cfg, q, 10**7)[1] < fn(cfg, q, 10**7)[0]]
        g.expect(max(wins, default=0), int(cost.absorb_crossover_query_len(cfg)))
    with g.case(Words("ex09_no_fresh_prompt_is_cheaper")):
        for preset in _PRESETS:
            c = ModelConfig.preset(preset)
            cheaper = [q for q in (1, 2, 16, 171, 512, 4096) if fn(c, q, 0)[1] < fn(c, q, 0)[0]]
            g.expect(cheaper, [])


EXERCISE = Exercise(
    number=9, slug="ex09_crossover", function="mla_forms_flops",
    own=("pdlab.sim.kernel_costs:mla_forms_flops",), library="pdlab/sim/kernel_costs.py",
    notebook="03_mla_two_forms",
    title={"en": "When absorbing wins: the crossover", "zh": "吸收何时更省：临界点"},
    statement={
        "en": """\
Exercise 9: the absorb crossover

For q new tokens of one request over S cached tokens, one layer, count the FLOPs that
differ between MLA's two forms:
  * naive (forward_mha): kv_b_proj up-projects every key, cached and new, from the latent
    L to each head's nope key and v value; then each (query, key) pair costs a score of
    width qk_head_dim = nope + R and a weighted sum of width v, per head;
  * absorbed (forward_mqa): W_UK and W_UV are applied per query instead (the same
    matrices as kv_b_proj); each pair costs a score of width L + R and a weighted sum of
    width L, per head.
The pairs: every query sees all S cached keys, and the new tokens causally.

Return (naive, absorbed). The grader compares with the cost model, then reads from your
numbers where absorbing stops winning over a long context, and checks that no fresh
prompt is ever cheaper absorbed.""",
        "zh": """\
练习 9：吸收的临界点

对一个请求的 q 个新 token、S 个已缓存 token、单层，计算 MLA 两种形式之间不同的 FLOPs：
  * 朴素（forward_mha）：kv_b_proj 把每个 key（已缓存的和新的）从潜向量 L 上投影成每个头的
    `nope` key 和 v value；每个 (query, key) 对在每个头上要算宽度为 `qk_head_dim = nope + R` 的
    分数和宽度为 v 的加权和；
  * 吸收（forward_mqa）：改为对每个 query 施加 W_UK 和 W_UV（与 kv_b_proj 是同一组矩阵）；
    每个对在每个头上要算宽度为 L + R 的分数和宽度为 L 的加权和。
对数：每个 query 看见全部 S 个已缓存 key，新 token 之间是因果的。

返回 `(naive, absorbed)`。评分先与代价模型比较，再从你的数字读出长上下文下吸收不再更省的位置，
并检查全新的提示词吸收后永远不会更省。"""},
    hints={
        "en": (
            "kv_b_proj costs 2 * L * H * (nope + v) per token it is applied to: every key in "
            "the naive form, every query in the absorbed one.",
            "pairs = q * S + q * (q + 1) / 2; naive pair cost 2 H (nope + R + v); absorbed "
            "2 H ((L + R) + L). With S = 0 the projections match and every pair costs more "
            "absorbed."),
        "zh": (
            "kv_b_proj 每作用于一个 token 花费 `2 * L * H * (nope + v)`：朴素形式作用于每个 key，"
            "吸收形式作用于每个 query。",
            "对数 = q * S + q * (q + 1) / 2；朴素每对 `2 H (nope + R + v)`；吸收每对 "
            "`2 H ((L + R) + L)`。S = 0 时投影相同，而每一对吸收后都更贵。"),
    },
    mistakes={
        "context_only": {
            "en": "up-projecting only the cached keys: the new tokens' keys go through "
            "kv_b_proj too in the naive form",
            "zh": "只上投影了已缓存的 key：朴素形式里新 token 的 key 也要经过 kv_b_proj",
        },
        "no_absorb_cost": {
            "en": "leaving out W_UK and W_UV: absorbing moves the projection to the queries, "
            "it does not remove it",
            "zh": "漏了 W_UK 和 W_UV：吸收是把投影挪到 query 一侧，并没有去掉它",
        },
        "no_causal": {
            "en": "counting every (new, new) pair: the new tokens attend causally, "
            "q (q + 1) / 2 pairs",
            "zh": "把所有 (新, 新) 对都算上了：新 token 之间是因果注意力，只有 q (q + 1) / 2 对",
        },
        "latent_pair_width": {
            "en": "a weighted sum of width v in the absorbed form: there V is the latent "
            "row, L wide",
            "zh": "吸收形式中加权和的宽度写成了 v：那里 V 是潜向量行，宽度为 L",
        },
    },
    grade=grade,
    slips={
        "context_only": _slip("naive = (s + q) * proj", "naive = s * proj"),
        "no_absorb_cost": _slip("absorbed = q * proj", "absorbed = 0"),
        "no_causal": _slip("q * s + q * (q + 1) / 2", "q * (s + q)"),
        "latent_pair_width": _slip("* ((L + R) + L)", "* (L + R)"),
    },
)  # fmt: skip
