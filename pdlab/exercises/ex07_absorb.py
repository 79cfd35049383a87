"""Exercise 7: the absorbed decode (``W_UK_T`` into the query, ``W_UV`` onto the output),
equal to the naive form.

Graded against the oracle's naive form (``mla_naive`` in ``pdlab/attention/reference.py``,
after DeepSeek-V3's ``attn_impl="naive"``), then inside the engine: the learner's function
replaces the attention of ``MLAAttention.forward_mqa``
(``pdlab/engine/attention/mla_attention.py``, upstream
``vllm/model_executor/layers/attention/mla_attention.py``) for every decode row, reading the row's
latent context from the paged cache, while a P/D pair and a colocated engine generate; the tokens
must be the unpatched engine's.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from pdlab.attention.reference import mla_naive
from pdlab.engine.attention.mla_attention import MLAAttention, _decode_rows
from pdlab.engine.request import SamplingParams
from pdlab.exercises import engine_runs as er
from pdlab.exercises.base import Exercise, Grader, Words, patched
from pdlab.exercises.bilingual import slip


def _inputs(g: Grader, t: int, s: int, h: int = 3, n: int = 8, r: int = 4, v: int = 6, L: int = 12):
    q = torch.randn(t, h, n + r, generator=g.gen)
    kv_c = torch.randn(s, L, generator=g.gen)
    k_pe = torch.randn(s, r, generator=g.gen)
    w = torch.randn(h * (n + v), L, generator=g.gen) / L**0.5
    return q, kv_c, k_pe, w, n, v, (n + r) ** -0.5


def _absorbed(q, kv_c, k_pe, w, n, v, scale, uv_first=False, softmax_dim=-1):
    """A known mistake's answer: ``kv_b_proj``'s rows read as ``[W_UV | W_UK]``, or the
    softmax taken over the heads."""
    h = q.shape[1]
    w = w.float().view(h, n + v, kv_c.shape[-1])
    w_uk, w_uv = (w[:, v:], w[:, :v]) if uv_first else (w[:, :n], w[:, n:])
    ql = torch.einsum("thn,hnl->thl", q[..., :n].float(), w_uk)
    s = torch.einsum("thl,sl->ths", ql, kv_c.float())
    s = s + torch.einsum("thr,sr->ths", q[..., n:].float(), k_pe.float())
    p = torch.softmax(s * scale, dim=softmax_dim)
    return torch.einsum("thl,hvl->thv", torch.einsum("ths,sl->thl", p, kv_c.float()), w_uv)


_slip = functools.partial(slip, "ex07_absorb")


def _engine(fn: Any, g: Grader, pd: bool):
    calls = []

    def forward_mqa(self, layer, q, kv_cache, m, ctx):
        cfg = layer.cfg
        tables, seq_lens = _decode_rows(m, q.shape[0], q.device)
        bs, L = kv_cache.shape[1], cfg.kv_lora_rank
        outs = []
        for i in range(q.shape[0]):
            pos = torch.arange(int(seq_lens[i]))
            rows = kv_cache[tables[i][pos // bs].long(), pos % bs]  # the row's latent context
            out = g.call(fn, q[i : i + 1], rows[:, :L], rows[:, L:], layer.kv_b_proj.weight,
                         cfg.qk_nope_head_dim, cfg.v_head_dim, cfg.softmax_scale)  # fmt: skip
            outs.append(out.to(q.dtype).reshape(1, cfg.num_attention_heads, cfg.v_head_dim))
        calls.append(len(outs))
        return torch.cat(outs)

    prompt = er.prompt_of(13)
    with patched(MLAAttention, "forward_mqa", forward_mqa):
        engine: Any = er.pair() if pd else er.colocated()
        out = er.tokens(engine.generate(prompt, SamplingParams(max_tokens=er.MAX_TOKENS)))
    return out, [er.colocated_tokens(tuple(prompt))], calls, engine.tracer if pd else None


def grade(fn: Any, g: Grader) -> None:
    rand = g.rng.randrange(2, 30)
    cases: list[tuple[Any, int, int, dict[str, int]]] = [
        (Words("ex07_random_one_query_over_cached", rand=rand), 1, rand, {}),
        (Words("ex07_one_cached_row"), 1, 1, {}),
        (Words("ex07_three_queries_over_rows"), 3, 9, {}),
    ]
    for _ in range(6):  # random shapes: every width its own, so nothing can be hard-coded
        dims = {k: g.rng.choice(c) for k, c in (("h", (1, 2, 3, 4)), ("n", (2, 8, 16)),
                ("r", (2, 4, 8)), ("v", (2, 6, 16)), ("L", (4, 12, 32)))}  # fmt: skip
        t, s = g.rng.choice((1, 1, 2, 5)), g.rng.choice((1, 2, g.rng.randrange(3, 64)))
        cases.append((Words("ex07_random", t=t, s=s, **dims), t, s, dims))
    for name, t, s, dims in cases:
        with g.case(name):
            q, kv_c, k_pe, w, n, v, scale = _inputs(g, t, s, **dims)
            want, _ = mla_naive(q, kv_c, k_pe, w, n, v, scale, causal=False)
            got = g.returns(g.call(fn, q, kv_c, k_pe, w, n, v, scale), torch.Tensor)
            latent = (kv_c.shape[-1] + k_pe.shape[-1]) ** -0.5
            wrong_scale, _ = mla_naive(q, kv_c, k_pe, w, n, v, latent, causal=False)
            q0 = q.clone()
            q0[..., n:] = 0
            no_rope, _ = mla_naive(q0, kv_c, k_pe, w, n, v, scale, causal=False)
            g.expect(got, want, {
                "latent_scale": wrong_scale, "no_rope": no_rope,
                "uv_first": _absorbed(q, kv_c, k_pe, w, n, v, scale, uv_first=True),
                "softmax_dim": _absorbed(q, kv_c, k_pe, w, n, v, scale, softmax_dim=1),
            })  # fmt: skip
    for pd in (True, False):
        label = Words("ex07_steps_pair_13") if pd else Words("ex07_colocated_engine_13")
        with g.case(Words("ex07_inside_forward_mqa", label=label)):
            out, want, calls, tracer = _engine(fn, g, pd)
            table = er.table_text(tracer, "D", g.lang) if tracer is not None else ""
            g.expect(out, want, evidence=table)
            if not calls:
                g.fail(
                    Words("ex07_forward_mqa_runs_decode_steps"), Words("ex07_no_decode_step_ran")
                )


EXERCISE = Exercise(
    number=7, slug="ex07_absorb", function="absorbed_decode",
    library="pdlab/engine/attention/mla_attention.py (forward_mqa), "
            "pdlab/attention/reference.py (mla_absorbed)",
    own=("pdlab.attention.reference:mla_absorbed",
         "pdlab.engine.attention.mla_attention:MLAAttention.forward_mqa"),
    notebook="03_mla_two_forms",
    title={"en": "The absorbed decode equals the naive form", "zh": "吸收形式的解码等于朴素形式"},
    statement={
        "en": """\
Exercise 7: the absorbed decode (MLA's forward_mqa)

MLA caches one latent row per token: kv_c (L values) and k_pe (R values, RoPE applied).
The naive form up-projects every cached row through kv_b_proj into per-head keys
[k_nope | k_pe] and values v. kv_b_proj.weight viewed as [H, nope + v, L] splits into
W_UK (the first nope rows of each head) and W_UV (the rest).

The absorbed form moves the projections to the query side: q_nope @ W_UK gives a latent
query per head, attention runs over the latent rows themselves (V = kv_c), and W_UV maps
each head's latent output to v values. Same numbers, no cached row up-projected.

Write absorbed_decode. The grader compares it with the naive form, then lets forward_mqa
use it for every decode row of a P/D pair and of a colocated engine.""",
        "zh": """\
练习 7：吸收形式的解码（MLA 的 forward_mqa）

MLA 每个 token 缓存一行潜向量：kv_c（L 个值）和 k_pe（R 个值，已施加 RoPE）。朴素形式把每一行
缓存经 kv_b_proj 上投影成每个头的 key `[k_nope | k_pe]` 和 value v。`kv_b_proj.weight` 视为
`[H, nope + v, L]` 后，可拆成 W_UK（每个头的前 `nope` 行）和 W_UV（其余行）。

吸收形式把投影挪到 query 一侧：q_nope @ W_UK 得到每个头的潜向量 query，注意力直接在潜向量
行上计算（V = kv_c），再由 W_UV 把每个头的潜向量输出映射成 v 个值。数值相同，缓存行一行都不用
上投影。

请实现 absorbed_decode。评分先与朴素形式比较，再让 forward_mqa 在一个 P/D 对和一个非分离引擎
的每个 decode 行上使用它。"""},
    hints={
        "en": (
            "w_kv_b.view(H, nope + v, L): [:, :nope] is W_UK, [:, nope:] is W_UV. A score is "
            "q_nope . k_nope + q_pe . k_pe, and q_nope . (W_UK kv_c) = (q_nope W_UK) . kv_c.",
            "Keep the scale you are given (qk_head_dim ** -0.5, from nope + rope), not "
            "(L + R) ** -0.5: absorbing changes the widths, not the scores."),
        "zh": (
            "`w_kv_b.view(H, nope + v, L)`：`[:, :nope]` 是 W_UK，`[:, nope:]` 是 W_UV。分数是 "
            "`q_nope · k_nope + q_pe · k_pe`，而 `q_nope · (W_UK kv_c) = (q_nope W_UK) · kv_c`。",
            "用给定的 `scale`（`qk_head_dim ** -0.5`，来自 `nope + rope`），不要用 (L + R) ** -0.5"
            "：吸收改变的是宽度，不是分数。"),
    },
    mistakes={
        "latent_scale": {
            "en": "scaling by the latent width ((L + R) ** -0.5): the softmax scale is "
            "qk_head_dim ** -0.5 in both forms",
            "zh": "按潜向量宽度缩放（(L + R) ** -0.5）：两种形式的 softmax `scale` 都是 "
            "qk_head_dim ** -0.5"},
        "no_rope": {
            "en": "leaving out the RoPE part: the score adds q_pe . k_pe to the latent term",
            "zh": "漏了 RoPE 部分：分数要在潜向量项上加 q_pe · k_pe",
        },
        "uv_first": {
            "en": "reading kv_b_proj's rows as [W_UV | W_UK]: each head's rows are its "
            "qk_nope_head_dim rows of W_UK first, then its v_head_dim rows of W_UV",
            "zh": "把 kv_b_proj 的行读成了 [W_UV | W_UK]：每个头的行先是 W_UK 的 "
            "qk_nope_head_dim 行，然后才是 W_UV 的 v_head_dim 行"},
        "softmax_dim": {
            "en": "the softmax over the heads: each head's weights are a softmax over the "
            "cached rows (the last axis of the scores)",
            "zh": "softmax 取在了头的维度上：每个头的权重是对缓存行（分数的最后一维）做 softmax",
        },
    },
    grade=grade,
    slips={
        "latent_scale": _slip("* scale", "* (kv_c.shape[-1] + k_pe.shape[-1]) ** -0.5"),
        "no_rope": _slip(' + torch.einsum("thr,sr->ths", q[..., n:], k_pe.float())', ""),
        "uv_first": _slip("w[:, :n], w[:, n:]", "w[:, v_head_dim:], w[:, :v_head_dim]"),
        "softmax_dim": _slip("dim=-1", "dim=1"),
    },
)  # fmt: skip
