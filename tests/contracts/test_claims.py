"""Every number the texts state about upstream's cost and routing, recomputed from the cost
model and the profiles, so a text cannot drift from what the code computes. Each test names
where the number is written (tour chapters 4/5 in pdlab/catalog/__init__.py, notebooks 03 and 05/06,
the README)."""

import re

import pytest

from pdlab.catalog import TEXT
from pdlab.engine.config import MLA_BACKENDS, ModelConfig
from pdlab.sim.kernel_costs import (
    absorb_crossover_query_len,
    absorb_flops_per_key,
    decode_path_cost,
    gemm,
    mla_forms_flops,
    prefill_path_cost,
    shared_weight_bytes,
)

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


def test_h200_ridge_puts_a_one_token_mla_decode_on_the_compute_side():
    # Notebook 03: "On an H200 the ridge is about 206 (989 / 4.8)" and "about 240 FLOP per
    # byte" for one query token over 32K, "just under the H100/H800 ridge (about 295)".
    from pdlab.sim.kernel_costs import mla_decode_cost
    from pdlab.tools.measure import published_peak

    f200, b200 = published_peak("H200")
    f800, b800 = published_peak("H800")
    assert (round(f200 / 1e12), round(b200 / 1e12, 1)) == (989, 4.8)
    assert round(f200 / b200) == 206 and round(f800 / b800, -1) == 300
    ctx = 32768
    f, _ = mla_decode_cost([ctx], V3.num_attention_heads, V3.kv_cache_dim, V3.kv_lora_rank)
    b = 2.0 * (ctx * V3.kv_cache_dim + V3.num_attention_heads * (V3.kv_cache_dim + V3.kv_lora_rank))
    assert round(f / b, -1) == 240 and f200 / b200 < f / b < f800 / b800


def test_forward_mha_bytes_per_prefill_backend():
    # sim/kernel_costs.py: "Packed, about 147 KB per token and layer ... (82 KB without the V
    # copy)"; FA3/FA4 pass V strided, so the default (Hopper's FLASH_ATTN) has no V copy.
    from pdlab.sim.kernel_costs import PREFILL_BACKENDS, k_assembly_cost

    h, n, r, v = V3.num_attention_heads, V3.qk_nope_head_dim, V3.qk_rope_head_dim, V3.v_head_dim
    assert round(k_assembly_cost(1, h, n, r, v)[1] / 1e3) == 148  # "about 147 KB" (147.6)
    assert round(k_assembly_cost(1, h, n, r, v, v_copy="none")[1] / 1e3) == 82
    assert PREFILL_BACKENDS["flash_attn"] == ("none", "none")
    packed = prefill_path_cost(V3, 4096, prefill_backend="pdlab").bytes
    strided = prefill_path_cost(V3, 4096).bytes
    assert 1.2 < packed / strided < 1.3  # the V copy was about a fifth of the bytes
    assert (
        prefill_path_cost(V3, 4096).flops
        == prefill_path_cost(V3, 4096, prefill_backend="pdlab").flops
    )


def test_fp8_cache_backend_and_bytes():
    # Tour ch. 4, notebooks 03 and 05/06: "FLASH_ATTN_MLA refuses an fp8 cache, and vLLM then
    # picks FLASHMLA: 128, uniform"; an fp8 row is 576 bytes, half a bf16 one.
    from pdlab.disagg.designs import transfer_bytes
    from pdlab.engine.platforms import select_mla_backend

    for gpu in ("h100", "h200", "h800"):
        assert select_mla_backend(gpu).backend == "flash_attn_mla"
        assert select_mla_backend(gpu, "fp8").backend == "flashmla"
    fm = MLA_BACKENDS["flashmla"]
    assert (fm.reorder_batch_threshold, fm.query_len_support) == (128, "uniform")
    assert select_mla_backend("b200", "fp8").backend == "flashinfer_mla"
    with pytest.raises(ValueError, match="kv_cache_dtype='fp8'"):
        select_mla_backend("cpu", "fp8")
    assert V3.kv_cache_dim == 576
    bf16, fp8 = (
        transfer_bytes(V3, "recompute", 4096, 64),
        transfer_bytes(V3, "recompute", 4096, 64, kv_e=1),
    )
    assert bf16 == 2 * fp8 == 2 * 4096 * 576 * V3.num_hidden_layers
    for lang in ("en", "zh"):
        for key in ("ch4_fresh_decode", "ch4_fresh_prefill"):
            assert "fp8" in TEXT[key][lang] and "FLASHMLA" in TEXT[key][lang]


def test_texts_say_what_upstream_does_not_give_a_reason_for():
    # Item 7 of issue 28: the 512 is upstream's, its reason pdlab's inference, and each text
    # says so. Issue 40: PCP's routing has its reason in upstream's code (V2's comment, the
    # PCP manager's order, the K/V write past num_decode_tokens), which the text cites.
    for lang, infer in (("en", "inference"), ("zh", "推断")):
        why = TEXT["ch4_why_pcp"][lang]
        assert "_prefilling" in why and infer not in why and "must take" not in why
        assert "rank 0" in why and "PCP partitions prefill rows" in why
        assert "num_decode_tokens" in why and "_reorder_segments" in why
        fresh = TEXT["ch4_fresh_decode"][lang]
        assert "process small prefills with decode pathway" in fresh and infer in fresh
    for lang in ("en", "zh"):
        assert "ExampleHiddenStatesConnector" in TEXT["ch3_explain"][lang]
        assert "move KV only" not in TEXT["ch3_explain"][lang]
        assert "25373" in TEXT["ch7_intro"][lang]
        assert "MetadataBuffers" in TEXT["dz_note"][lang]


def test_readme_sim_figures_are_the_simulators():
    # README, "Measured here": the figures of `pdlab sim` with its defaults and with K = 1.
    from pathlib import Path

    from pdlab.sim.profiles import device_profile
    from pdlab.sim.report import run_grid
    from pdlab.sim.simulator import SimConfig
    from pdlab.ui.tour_designs import MTP_BASE, MTP_ROUTINGS, answer_values

    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())
    v3, h200 = ModelConfig.deepseek_v3(), device_profile("H200")
    rows, _ = run_grid(SimConfig(), v3, h200, "h200")
    mtp, _ = run_grid(MTP_BASE, v3, h200, "h200", routings=MTP_ROUTINGS)
    v = {k: str(x).replace(" ms", "") for k, x in answer_values(rows, mtp).items()}
    for phrase in (
        f"{v['steps']} steps",
        f"TPOT p50/p99 {v['v2_p50']} / {v['v2_p99']} ms under V2",
        f"on {v['pcp_mixed']} of the steps",
        f"TPOT p99 rises to {v['pcp_p99']} ms",
        f"stay at {v['ft_pcp_p99']} ms",
        f"p50 {v['rc_ttft']} ms for recompute ({v['pcp_ttft']} ms under PCP)",
        f"{v['hs_ttft']} ms for hidden_state",
        f"a step takes {v['mtp_step']} ms, a row emits {v['mtp_tokens']} tokens",
        f"TPOT p50 {v['mtp_p50']} ms",
    ):
        assert phrase in readme, phrase
    assert v["ft_pcp_p99"] == v["hs_pcp_p99"]  # "first_token and hidden_state stay at"


def test_a_latent_row_is_1152_bytes_in_bf16_and_576_in_fp8():
    # Tour ch. 4 ("a 576-value latent row is 1,152 bytes; an fp8 KV cache makes it 576").
    assert V3.kv_cache_dim * 2 == 1152 and V3.kv_cache_dim * 1 == 576
    for lang in ("en", "zh"):
        assert "1,152" in TEXT["ch4_dtype"][lang] and "576" in TEXT["ch4_dtype"][lang]
