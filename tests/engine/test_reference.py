"""The oracle: naive attention against PyTorch's SDPA, MLA's two forms against each other."""

import pytest
import torch
import torch.nn.functional as F

from pdlab.attention.reference import causal_mask, mla_absorbed, mla_naive, naive_attention
from pdlab.engine.config import ModelConfig
from pdlab.engine.model_executor.rotary_embedding import apply_rope, rope_cos_sin, rope_inv_freq


def _sdpa(q, k, v, scale, causal):
    # SDPA's is_causal aligns top-left; pass the bottom-right mask explicitly instead.
    mask = causal_mask(q.shape[0], k.shape[0]) if causal else None
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask, scale=scale
    )
    return out.transpose(0, 1)


@pytest.mark.parametrize(
    "tq,tk,causal", [(7, 7, True), (3, 11, True), (1, 9, True), (5, 13, False), (1, 1, True)]
)
def test_naive_attention_matches_sdpa(tq, tk, causal):
    g = torch.Generator().manual_seed(tq * 100 + tk)
    h, d, dv = 3, 24, 16
    q, k = torch.randn(tq, h, d, generator=g), torch.randn(tk, h, d, generator=g)
    v = torch.randn(tk, h, dv, generator=g)
    out, lse = naive_attention(q, k, v, 0.3, causal)
    torch.testing.assert_close(out, _sdpa(q, k, v, 0.3, causal), atol=1e-5, rtol=1e-5)
    # LSE by definition, from the masked scores.
    s = torch.einsum("qhd,khd->qhk", q, k) * 0.3
    if causal:
        s = s.masked_fill(~causal_mask(tq, tk)[:, None, :], float("-inf"))
    torch.testing.assert_close(lse, torch.logsumexp(s, -1), atol=1e-5, rtol=1e-5)


def test_bottom_right_alignment_and_empty_rows():
    m = causal_mask(2, 4)
    assert m.tolist() == [[True, True, True, False], [True, True, True, True]]
    q, k, v = torch.randn(4, 1, 8), torch.randn(2, 1, 8), torch.randn(2, 1, 8)
    out, lse = naive_attention(q, k, v, 1.0, causal=True)
    assert torch.isinf(lse[:2]).all() and (out[:2] == 0).all()
    assert torch.isfinite(lse[2:]).all()


def test_mqa_broadcast_equals_repeated_heads():
    q, k, v = torch.randn(5, 4, 8), torch.randn(6, 1, 8), torch.randn(6, 1, 3)
    a = naive_attention(q, k, v, 0.5, True)
    b = naive_attention(q, k.expand(-1, 4, -1), v.expand(-1, 4, -1), 0.5, True)
    torch.testing.assert_close(a, b)


def _mla_inputs(cfg: ModelConfig, t: int, s: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    h = cfg.num_attention_heads
    q = torch.randn(t, h, cfg.qk_head_dim, generator=g)
    kv_c = torch.randn(s, cfg.kv_lora_rank, generator=g)
    k_pe = torch.randn(s, cfg.qk_rope_head_dim, generator=g)
    w = (
        torch.randn(h * (cfg.qk_nope_head_dim + cfg.v_head_dim), cfg.kv_lora_rank, generator=g)
        * cfg.kv_lora_rank**-0.5
    )
    return q, kv_c, k_pe, w


@pytest.mark.parametrize(
    "cfg",
    [
        ModelConfig.tiny(),
        ModelConfig.tiny(q_lora_rank=48, weights="random"),
        ModelConfig.deepseek_v3(num_attention_heads=4),
        ModelConfig.deepseek_v2_lite(num_attention_heads=2),
    ],
    ids=["tiny", "tiny-qlora", "v3", "v2-lite"],
)
@pytest.mark.parametrize("t,s", [(6, 6), (1, 9), (3, 17)])
def test_mla_naive_equals_absorbed(cfg, t, s):
    q, kv_c, k_pe, w = _mla_inputs(cfg, t, s, seed=t + s)
    a = mla_naive(q, kv_c, k_pe, w, cfg.qk_nope_head_dim, cfg.v_head_dim, cfg.softmax_scale)
    b = mla_absorbed(q, kv_c, k_pe, w, cfg.qk_nope_head_dim, cfg.v_head_dim, cfg.softmax_scale)
    torch.testing.assert_close(a[0], b[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a[1], b[1], atol=1e-5, rtol=1e-5)
    assert a[0].shape == (t, cfg.num_attention_heads, cfg.v_head_dim)


@pytest.mark.parametrize("qlora", [None, 24])
def test_model_attention_forms_agree_end_to_end(qlora):
    """With and without q_lora_rank, the whole tiny model gives the same logits either way."""
    from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM

    model = DeepseekV2ForCausalLM(
        ModelConfig.tiny(q_lora_rank=qlora, weights="random" if qlora else "trained")
    )
    ids = list(range(40, 61))
    torch.testing.assert_close(
        model.forward_full(ids, "naive"), model.forward_full(ids, "absorb"), atol=1e-5, rtol=1e-5
    )


def test_rope_is_interleaved_pairs_and_relative():
    cfg = ModelConfig.tiny()
    x = torch.randn(1, 1, cfg.qk_rope_head_dim)
    cos, sin = rope_cos_sin(cfg, torch.tensor([1]))
    y = apply_rope(x, cos, sin)
    # pair (0, 1) rotates by the first frequency (1.0 rad at position 1)
    c, s_ = torch.cos(torch.tensor(1.0)), torch.sin(torch.tensor(1.0))
    torch.testing.assert_close(
        y[0, 0, :2],
        torch.stack([x[0, 0, 0] * c - x[0, 0, 1] * s_, x[0, 0, 0] * s_ + x[0, 0, 1] * c]),
    )
    # scores depend only on the distance between positions
    q, k = torch.randn(1, 1, 16), torch.randn(1, 1, 16)

    def score(pq, pk):
        cq, sq = rope_cos_sin(cfg, torch.tensor([pq]))
        ck, sk = rope_cos_sin(cfg, torch.tensor([pk]))
        return (apply_rope(q, cq, sq) * apply_rope(k, ck, sk)).sum()

    torch.testing.assert_close(score(5, 2), score(103, 100), atol=1e-4, rtol=1e-4)


def test_yarn_interpolates_low_frequencies_only():
    base = rope_inv_freq(ModelConfig.deepseek_v3(rope_scaling=None))
    yarn = rope_inv_freq(ModelConfig.deepseek_v3())
    torch.testing.assert_close(yarn[0], base[0])  # fastest pair untouched
    torch.testing.assert_close(yarn[-1], base[-1] / 40)  # slowest pair divided by factor
