"""Config presets, derived numbers and validation."""

import math

import pytest

from pdlab.engine.config import (
    AttentionConfig,
    CacheConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)


def test_v3_derived_numbers():
    cfg = ModelConfig.deepseek_v3()
    assert cfg.kv_cache_dim == 576
    assert cfg.qk_head_dim == 192
    assert cfg.mscale == pytest.approx(0.1 * math.log(40) + 1)
    assert cfg.softmax_scale == pytest.approx(0.13523, abs=5e-5)
    assert cfg.softmax_scale != pytest.approx(576**-0.5)


@pytest.mark.parametrize(
    "preset,dims",
    [
        ("tiny", (128, 2, 4, None, 64, 32, 16, 32, 80, 48)),
        ("deepseek_v2_lite", (2048, 27, 16, None, 512, 128, 64, 128, 576, 192)),
        ("deepseek_v2", (5120, 60, 128, 1536, 512, 128, 64, 128, 576, 192)),
        ("deepseek_v3", (7168, 61, 128, 1536, 512, 128, 64, 128, 576, 192)),
    ],
)
def test_preset_dims(preset, dims):
    c = getattr(ModelConfig, preset)()
    got = (
        c.hidden_size,
        c.num_hidden_layers,
        c.num_attention_heads,
        c.q_lora_rank,
        c.kv_lora_rank,
        c.qk_nope_head_dim,
        c.qk_rope_head_dim,
        c.v_head_dim,
        c.kv_cache_dim,
        c.qk_head_dim,
    )
    assert got == dims


def test_vocab_and_scaling():
    assert ModelConfig.deepseek_v3().vocab_size == 129280
    assert ModelConfig.deepseek_v2().vocab_size == 102400
    rs = ModelConfig.deepseek_v3().rope_scaling
    assert (
        rs["factor"],
        rs["mscale"],
        rs["mscale_all_dim"],
        rs["original_max_position_embeddings"],
    ) == (40, 1.0, 1.0, 4096)
    # V2's mscale_all_dim of 0.707 gives a smaller temperature correction than V3's 1.0.
    v2 = ModelConfig.deepseek_v2()
    assert v2.softmax_scale == pytest.approx(192**-0.5 * (0.0707 * math.log(40) + 1) ** 2)
    assert ModelConfig.tiny().softmax_scale == pytest.approx(48**-0.5)


def test_preset_by_name_and_from_hf():
    assert ModelConfig.preset("deepseek-v3") == ModelConfig.deepseek_v3()
    hf = {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "vocab_size": 129280,
        "intermediate_size": 18432,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000,
        "max_position_embeddings": 163840,
        "n_routed_experts": 256,
        "num_experts_per_tok": 8,
        "n_shared_experts": 1,
        "moe_intermediate_size": 2048,
        "first_k_dense_replace": 3,
        "rope_scaling": {
            "type": "yarn",
            "factor": 40,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32,
            "beta_slow": 1,
        },
    }
    cfg = ModelConfig.from_hf(hf)
    assert cfg.kv_cache_dim == 576 and cfg.softmax_scale == pytest.approx(0.13523, abs=5e-5)
    moe = ("n_routed_experts", "num_experts_per_tok", "n_shared_experts")
    moe += ("moe_intermediate_size", "first_k_dense_replace")
    v3 = ModelConfig.deepseek_v3()
    assert [getattr(cfg, k) for k in moe] == [getattr(v3, k) for k in moe]
    with pytest.raises(ValueError, match=r"missing \['kv_lora_rank'\]"):
        ModelConfig.from_hf({k: v for k, v in hf.items() if k != "kv_lora_rank"})
    with pytest.raises(ValueError, match="preset='gpt2' is invalid"):
        ModelConfig.preset("gpt2")


@pytest.mark.parametrize(
    "make,match",
    [
        (
            lambda: ModelConfig(hidden_size=0),
            r"ModelConfig.hidden_size=0 is invalid: expected an integer >= 1",
        ),
        (lambda: ModelConfig(num_attention_heads=2.5), r"num_attention_heads=2.5 .*integer >= 1"),
        (lambda: ModelConfig(qk_rope_head_dim=15), r"qk_rope_head_dim=15 .*even integer"),
        (lambda: ModelConfig(q_lora_rank=-3), r"q_lora_rank=-3 .*integer >= 1"),
        (lambda: ModelConfig(rms_norm_eps=0.0), r"rms_norm_eps=0.0 .*number > 0"),
        (lambda: ModelConfig(vocab_size=True), r"vocab_size=True .*integer"),
        (
            lambda: ModelConfig(rope_scaling={"type": "linear", "factor": 2}),
            r"rope_scaling.type='linear'",
        ),
        (
            lambda: ModelConfig(
                rope_scaling={
                    "type": "yarn",
                    "factor": 0.5,
                    "original_max_position_embeddings": 4096,
                }
            ),
            r"rope_scaling.factor=0.5 .*>= 1",
        ),
        (
            lambda: CacheConfig(block_size=0),
            r"CacheConfig.block_size=0 is invalid: expected an integer >= 1",
        ),
        (lambda: CacheConfig(num_blocks=-1), r"CacheConfig.num_blocks=-1"),
        (
            lambda: CacheConfig(enable_prefix_caching="yes"),
            r"enable_prefix_caching='yes' .*True or False",
        ),
        (
            lambda: ParallelConfig(prefill_context_parallel_size=0),
            r"ParallelConfig.prefill_context_parallel_size=0 is invalid: expected an integer >= 1",
        ),
        (
            lambda: AttentionConfig(backend="fast"),
            r"AttentionConfig.backend='fast' is invalid: expected one of \('cpu_mla', "
            r"'triton_mla', 'flashmla', 'flash_attn_mla', 'flashinfer_mla', 'cutlass_mla'\)",
        ),
        (lambda: SchedulerConfig(max_num_batched_tokens=0), r"max_num_batched_tokens=0"),
        (lambda: SchedulerConfig(max_num_seqs=0), r"max_num_seqs=0"),
        (
            lambda: SchedulerConfig(long_prefill_token_threshold=-1),
            r"long_prefill_token_threshold=-1 .*>= 0",
        ),
        (lambda: SchedulerConfig(kv_transfer_timeout_s=0), r"kv_transfer_timeout_s=0 .*number > 0"),
    ],
)
def test_validation_messages(make, match):
    with pytest.raises(ValueError, match=match):
        make()
