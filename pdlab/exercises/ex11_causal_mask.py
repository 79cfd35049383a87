"""Exercise 11: the causal mask of a chunk over its context, aligned bottom-right.

Graded against the oracle's ``causal_mask`` (``pdlab/attention/reference.py``; the alignment
FlashAttention and ``flash_attn_varlen`` use, ``kernels/flash_attn.py``), then inside the
engine: ``MLAAttention.forward_mha`` is replaced, for the run, by its textbook form, one
attention of the new tokens over every cached and new row with the learner's mask (vLLM
splits this into a context part and a causal part joined by ``merge_attn_states``, which
needs no mask of this shape). A colocated engine running chunked prefill and D's one-token
step under prefill context parallelism must then give the unpatched tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from pdlab.attention.reference import causal_mask
from pdlab.engine.attention.mla_attention import MLAAttention
from pdlab.exercises import engine_runs as er
from pdlab.exercises.base import Exercise, Grader, Words, patched


def _wrong(q: int, k: int) -> dict[str, torch.Tensor]:
    i, j = torch.arange(q)[:, None], torch.arange(k)[None, :]
    right = j <= k - q + i
    return {"top_left": j <= i, "no_self": j < k - q + i, "inverted": ~right, "transposed": right.T}


def _engine(fn: Any, g: Grader, pd: bool):
    original = MLAAttention.forward_mha
    calls: list[tuple[torch.Tensor, torch.Tensor]] = []

    def forward_mha(self, layer, q, kv_c, k_pe, kv_cache, m, ctx):
        cfg, bs = layer.cfg, kv_cache.shape[1]
        h, n, dv = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.v_head_dim
        L = cfg.kv_lora_rank
        out = q.new_empty(q.shape[0], h, dv)
        qsl = (m.query_start_loc[m.num_decodes :] - m.query_start_loc[m.num_decodes]).tolist()
        for r in range(m.num_prefills):
            row = m.num_decodes + r
            seq = int(m.seq_lens[row])
            pos = torch.arange(seq)
            rows = kv_cache[m.block_table[row][pos // bs].long(), pos % bs]  # cached and new
            kv = layer.kv_b_proj(rows[:, :L].to(q.dtype)).view(seq, h, n + dv)
            k = torch.cat([kv[..., :n], rows[:, None, L:].to(q.dtype).expand(-1, h, -1)], -1)
            qr = q[qsl[r] : qsl[r + 1]].float()
            mask = g.call(fn, qr.shape[0], seq)
            scores = torch.einsum("qhd,khd->hqk", qr, k.float()) * cfg.softmax_scale
            scores = scores.masked_fill(~torch.as_tensor(mask, dtype=torch.bool), float("-inf"))
            probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            out[qsl[r] : qsl[r + 1]] = torch.einsum("hqk,khd->qhd", probs, kv[..., n:].float())
        quiet = dataclasses.replace(ctx, emit=None)  # the real path, for comparison
        calls.append((out, original(self, layer, q, kv_c, k_pe, kv_cache, m, quiet)))
        return out

    with patched(MLAAttention, "forward_mha", forward_mha):
        return (*er.pcp_or_chunked(pd), calls)


def _random_sizes(g: Grader) -> list[tuple[Words, int, int]]:
    """Random chunks over the whole space, biased to the edges: one query, as many keys as
    queries (a fresh prompt), one key more, a long context."""
    out = []
    for _ in range(10):
        q = g.rng.choice((1, 1, 2, g.rng.randrange(1, 20)))
        k = q + g.rng.choice((0, 0, 1, g.rng.randrange(0, 40)))
        out.append((Words("ex11_random_queries_keys", q=q, k=k), q, k))
    return out


def grade(fn: Any, g: Grader) -> None:
    q = g.rng.randrange(1, 6)
    k = q + g.rng.randrange(0, 9)
    for name, ql, kl in (
        (Words("ex11_fresh_prompt_queries_keys"), 5, 5),
        (Words("ex11_later_chunk_new_tokens_after"), 3, 7),
        (Words("ex11_step_query_over_12_cached"), 1, 13),
        (Words("ex11_random_queries_keys", q=q, k=k), q, k),
        *_random_sizes(g),
    ):
        with g.case(name):
            got = g.returns(g.call(fn, ql, kl), torch.Tensor)
            if got.dtype != torch.bool:
                g.fail(Words("ex11_bool_tensor"), f"tensor of {got.dtype}")
            g.expect(got, causal_mask(ql, kl), _wrong(ql, kl))
    for pd, label in (
        (False, Words("ex11_colocated_engine_chunked_prefill_budget")),
        (True, Words("ex11_one_token_step_under_pcp")),
    ):
        with g.case(Words("ex11_inside_forward_mha_one_attention", label=label)):
            got, want, tracer, calls = _engine(fn, g, pd)
            table = er.table_text(tracer, "D" if pd else None, g.lang)
            for out, right in calls:  # each call's attention output, as the real path's
                g.expect(out, right, evidence=table)
            g.expect(got, want, evidence=table)


EXERCISE = Exercise(
    number=11, slug="ex11_causal_mask", function="causal_mask",
    library="pdlab/attention/reference.py (causal_mask), kernels/flash_attn.py",
    own=("pdlab.attention.reference:causal_mask",), notebook="04_kernels",
    title={"en": "The causal mask of a chunk, bottom-right", "zh": "分块的因果掩码：右下对齐"},
    statement={
        "en": """\
Exercise 11: the causal mask of a chunk (the attention kernels' causal flag)

With chunked prefill, or on D's one-token step, the new tokens are the LAST q_len tokens
of a sequence of k_len: they attend to every cached token before them, and causally to
each other. The mask is aligned bottom-right, as FlashAttention aligns it.

Write causal_mask(q_len, k_len): bool[q_len, k_len], True where query i may attend to
key j. The grader compares it with the oracle, then runs the prefill path as one attention
over all cached and new rows with your mask, in chunked prefill and on D under PCP.""",
        "zh": """\
练习 11：分块的因果掩码（注意力算子的 `causal` 参数）

在分块预填充中，或在 D 的一 token 步骤上，新 token 是长度为 k_len 的序列中的最后 q_len 个
token：它们看见之前所有已缓存的 token，彼此之间是因果的。掩码右下对齐，与 FlashAttention
一致。

请实现 causal_mask(q_len, k_len)：bool[q_len, k_len]，query i 可以关注 key j 处为 True。
评分先与参考实现比较，再把 prefill 路径改成用你的掩码对全部已缓存行和新行做一次注意力，
在分块预填充中以及 PCP 下的 D 上运行。"""},
    hints={
        "en": (
            "Query i is token k_len - q_len + i of the sequence.",
            "mask[i, j] = j <= k_len - q_len + i. With q_len == k_len this is the usual "
            "lower triangle; with q_len == 1 the one query sees every key."),
        "zh": (
            "query i 是序列中的第 k_len - q_len + i 个 token。",
            "mask[i, j] = j <= k_len - q_len + i。q_len == k_len 时就是通常的下三角；"
            "q_len == 1 时唯一的 query 看见所有 key。"),
    },
    mistakes={
        "top_left": {
            "en": "top-left causal alignment (j <= i): right only when q_len == k_len; a "
            "later chunk's queries lose their context, and D's one token sees only key 0",
            "zh": "左上对齐（j <= i）：只在 q_len == k_len 时正确；后续分块的 query 看不到上下文，"
            "D 的那一个 token 只能看见 key 0"},
        "no_self": {"en": "leaving out the diagonal: a token attends to itself too",
                    "zh": "漏了对角线：token 也要关注它自己"},
        "inverted": {
            "en": "the mask inverted: True marks a key the query may see (the engine fills "
            "the False entries with -inf), not one it must not",
            "zh": "掩码反了：True 表示 query 可以看见的 key（引擎把 False 的位置填成 `-inf`），"
            "而不是不能看见的"},
        "transposed": {
            "en": "a [k_len, q_len] mask: one row per query, one column per key, [q_len, k_len]",
            "zh": "掩码形状成了 [k_len, q_len]：每个 query 一行、每个 key 一列，"
            "应为 [q_len, k_len]"},
    },
    grade=grade,
    slips={
        key: "import torch\n\n\ndef causal_mask(q_len, k_len):\n"
        "    i = torch.arange(q_len)[:, None]\n    j = torch.arange(k_len)[None, :]\n"
        f"    return {mask}\n"
        for key, mask in {
            "top_left": "j <= i",
            "no_self": "j < k_len - q_len + i",
            "inverted": "j > k_len - q_len + i",
            "transposed": "(j <= k_len - q_len + i).T",
        }.items()
    },
)  # fmt: skip
