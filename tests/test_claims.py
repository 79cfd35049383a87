"""Every number the texts state about upstream's cost and routing, recomputed from the cost
model and the profiles, so a text cannot drift from what the code computes. Each test names
where the number is written (tour chapters 4/5 in pdlab/ui/text.py, notebooks 03 and 05/06,
the README)."""

import re

import pytest

from pdlab.attention.cost import (
    absorb_crossover_query_len,
    absorb_flops_per_key,
    decode_path_cost,
    gemm,
    mla_forms_flops,
    prefill_path_cost,
    shared_weight_bytes,
)
from pdlab.config import MLA_BACKENDS, ModelConfig
from pdlab.ui.text import TEXT

V3 = ModelConfig.preset("deepseek-v3")


def test_up_projection_per_context_token_is_33_6_mflop():
    # "about 33.6 MFLOP per context token per layer" (tour ch. 5, notebooks 05/06).
    h, n, v, L = V3.num_attention_heads, V3.qk_nope_head_dim, V3.v_head_dim, V3.kv_lora_rank
    per_token = gemm(1, h * (n + v), L)[0]
    assert round(per_token / 1e6, 1) == 33.6
    # W_UK and W_UV cost per query what kv_b_proj costs per key.
    naive, absorbed = mla_forms_flops(V3, 1, 0)
    pairs = 1
    assert absorbed - pairs * 2 * h * (2 * L + V3.qk_rope_head_dim) == pytest.approx(per_token)


def test_pair_widths_and_the_crossover():
    # "(576 + 512) instead of (192 + 128) per head"; "about 171 query tokens".
    L, R = V3.kv_lora_rank, V3.qk_rope_head_dim
    assert (L + R, L, V3.qk_head_dim, V3.v_head_dim) == (576, 512, 192, 128)
    assert round(absorb_crossover_query_len(V3)) == 171
    # It is the limit for a context much longer than the query: absorbing wins just below
    # it and loses just above it when S is large.
    for q in (150, 170):
        n, a = mla_forms_flops(V3, q, 10**8)
        assert a < n
    for q in (172, 200):
        n, a = mla_forms_flops(V3, q, 10**8)
        assert a > n


@pytest.mark.parametrize("preset", ["tiny", "deepseek-v2-lite", "deepseek-v2", "deepseek-v3"])
def test_a_fresh_prompt_is_never_cheaper_absorbed(preset):
    cfg = ModelConfig.preset(preset)
    for q in range(1, 2049):
        naive, absorbed = mla_forms_flops(cfg, q, 0)
        assert absorbed > naive, q


def test_fresh_prompt_ratios_in_chapter_5():
    # The tour prints these ratios for 29, 128 and 512 tokens (rounded to one decimal).
    got = [round(a / n, 1) for n, a in (mla_forms_flops(V3, q, 0) for q in (29, 128, 512))]
    assert got == [1.1, 1.3, 1.9]


def test_decode_absorbs_about_120_times_fewer_flops_per_key():
    # Notebook 03: "absorbing does about 120 times fewer FLOPs per cached token".
    naive, absorbed = absorb_flops_per_key(V3, 1)
    assert 110 < naive / absorbed < 130


def test_absorbed_weights_are_about_17_mb_each_and_33_5_mb_together():
    # Notebook 03 (17 MB each per layer, bf16), notebooks 05/06 (34 MB), README (67 MB in
    # fp32, 34 MB in bf16).
    w = shared_weight_bytes(V3, "decode", 1024, e=2)
    assert round(w / 2 / 1e6) == 17 and round(w / 1e6, 1) == 33.6
    assert round(shared_weight_bytes(V3, "decode", 1024, e=4) / 1e6) == 67


def test_d_step_ratios_grow_past_100x():
    # Tour ch. 5 and notebooks 05/06: the prefill path does more than 100 times the FLOPs.
    for ctx in (1024, 4096, 16384, 65536):
        assert prefill_path_cost(V3, ctx).flops > 100 * decode_path_cost(V3, ctx).flops


def test_thresholds_the_texts_name():
    # "1 for TRITON_MLA, FLASHINFER_MLA, CUTLASS_MLA and CPU_MLA, 128 for FLASHMLA, 512 for
    # FLASH_ATTN_MLA" (tour ch. 5, notebooks 05/06).
    th = {p.name: p.reorder_batch_threshold for p in MLA_BACKENDS.values()}
    assert th == {
        "CPU_MLA": 1,
        "TRITON_MLA": 1,
        "FLASHMLA": 128,
        "FLASH_ATTN_MLA": 512,
        "FLASHINFER_MLA": 1,
        "CUTLASS_MLA": 1,
    }
    en = TEXT["ch5_upstream"]["en"]
    for name, t in th.items():
        assert re.search(rf"{t} for [^;]*{name}", en), name


def test_no_text_gives_the_crossover_as_the_reason_for_the_thresholds():
    # The wrong claim issue 18 removed: "below about 171 query tokens absorbing costs fewer
    # FLOPs" as why FLASHMLA/FLASH_ATTN_MLA send short prompts down the decode path.
    for key, entry in TEXT.items():
        for lang, words in entry.items():
            assert not re.search(r"because below about \d+ query tokens", words), (key, lang)
            assert "总是传 False" not in words, key  # the old Mamba/GDN claim
