"""The tiny model: checkpoint names, state-dict round trip, rejection of mismatches."""

import pytest
import torch

from pdlab.engine.config import ModelConfig
from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM
from pdlab.engine.tokenizer import ByteTokenizer


def test_checkpoint_parameter_names():
    names = set(
        DeepseekV2ForCausalLM(ModelConfig.tiny(q_lora_rank=32, weights="random")).hf_state_dict()
    )
    for n in (
        "model.embed_tokens.weight",
        "model.layers.1.self_attn.q_a_proj.weight",
        "model.layers.1.self_attn.q_a_layernorm.weight",
        "model.layers.1.self_attn.q_b_proj.weight",
        "model.layers.0.self_attn.kv_a_proj_with_mqa.weight",
        "model.layers.0.self_attn.kv_a_layernorm.weight",
        "model.layers.0.self_attn.kv_b_proj.weight",
        "model.layers.0.self_attn.o_proj.weight",
        "model.layers.0.mlp.gate_proj.weight",
        "model.layers.0.mlp.up_proj.weight",
        "model.layers.0.mlp.down_proj.weight",
        "model.layers.0.input_layernorm.weight",
        "model.layers.0.post_attention_layernorm.weight",
        "model.norm.weight",
        "lm_head.weight",
    ):
        assert n in names
    assert "model.layers.0.self_attn.q_proj.weight" not in names


def test_state_dict_round_trip():
    cfg = ModelConfig.tiny(weights="random")
    src = DeepseekV2ForCausalLM(cfg.replace(seed=1))
    dst = DeepseekV2ForCausalLM(cfg.replace(seed=2))
    ids = list(range(30))
    assert not torch.allclose(src.forward_full(ids), dst.forward_full(ids))
    sd = dict(src.hf_state_dict())
    sd["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.zeros(8)  # HF buffers are ignored
    dst.load_hf_state_dict(sd)
    torch.testing.assert_close(src.forward_full(ids), dst.forward_full(ids), rtol=0, atol=0)


def test_mismatched_checkpoints_rejected():
    model = DeepseekV2ForCausalLM(ModelConfig.tiny())
    sd = dict(model.hf_state_dict())
    missing = {k: v for k, v in sd.items() if "kv_b_proj" not in k}
    with pytest.raises(ValueError, match=r"missing keys \[model.layers.0.self_attn.kv_b_proj"):
        model.load_hf_state_dict(missing)
    bad = dict(sd)
    bad["model.layers.1.self_attn.kv_a_proj_with_mqa.weight"] = torch.zeros(576, 128)
    with pytest.raises(
        ValueError,
        match=r"misshaped keys .*kv_a_proj_with_mqa.weight: "
        r"expected \(80, 128\), got \(576, 128\)",
    ):
        model.load_hf_state_dict(bad)
    moe = dict(sd)
    moe["model.layers.1.mlp.experts.0.up_proj.weight"] = torch.zeros(4, 4)
    with pytest.raises(ValueError, match="MoE layers are not supported"):
        model.load_hf_state_dict(moe)


def test_greedy_generate_is_deterministic_and_seeded():
    a = DeepseekV2ForCausalLM(ModelConfig.tiny()).greedy_generate([1, 2, 3], 5)
    b = DeepseekV2ForCausalLM(ModelConfig.tiny()).greedy_generate([1, 2, 3], 5)
    assert a == b and len(a) == 5
    with pytest.raises(ValueError, match="non-empty"):
        DeepseekV2ForCausalLM(ModelConfig.tiny()).forward_full([])


def test_byte_tokenizer_round_trip():
    tok = ByteTokenizer()
    text = "为什么 D 上要重算最后一个 token? é"
    ids = tok.encode(text)
    assert all(0 <= i < 256 for i in ids) and tok.decode(ids) == text
    assert tok.encode("hi", add_bos=True)[0] == tok.bos_token_id
    assert tok.decode([104, 105, tok.eos_token_id]) == "hi<eos>"
