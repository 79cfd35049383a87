"""DeepSeek-V3's MTP layer in the tiny model: names, shapes, the shared tensors, the
state-dict round trip with and without it, and ``propose_greedy`` against a loop written
here from the layer's definition."""

import pytest
import torch

from pdlab.engine.config import ModelConfig
from pdlab.engine.model_executor.model_loader import read_checkpoint, save_checkpoint
from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM
from pdlab.engine.model_executor.models.deepseek_mtp import DeepSeekMTP

RANDOM_MTP = ModelConfig.tiny(weights="random", num_nextn_predict_layers=1)
PLAIN = ModelConfig.tiny(weights="random", num_nextn_predict_layers=0)


def _model(seed=0, **kw):
    return DeepseekV2ForCausalLM(RANDOM_MTP.replace(seed=seed, **kw))


def test_mtp_checkpoint_names_are_deepseek_v3s():
    model = _model()
    n = model.config.num_hidden_layers
    names = set(model.hf_state_dict())
    for own in (
        "enorm.weight",
        "hnorm.weight",
        "eh_proj.weight",
        "shared_head.norm.weight",
        "shared_head.head.weight",
        "embed_tokens.weight",
        "self_attn.q_proj.weight",
        "self_attn.kv_a_proj_with_mqa.weight",
        "self_attn.kv_a_layernorm.weight",
        "self_attn.kv_b_proj.weight",
        "self_attn.o_proj.weight",
        "mlp.gate_proj.weight",
        "mlp.up_proj.weight",
        "mlp.down_proj.weight",
        "input_layernorm.weight",
        "post_attention_layernorm.weight",
    ):
        assert f"model.layers.{n}.{own}" in names
    assert not any("mtp" in k for k in names)  # pdlab's module names never reach a file
    assert {k for k in names if not k.startswith(f"model.layers.{n}.")} == set(
        DeepseekV2ForCausalLM(PLAIN).hf_state_dict()
    )


def test_mtp_shares_embedding_and_head_and_owns_the_next_cache_entry():
    model = _model()
    mtp = model.mtp
    assert isinstance(mtp, DeepSeekMTP)
    assert mtp.embed_tokens.weight is model.model.embed_tokens.weight
    assert mtp.shared_head.head.weight is model.lm_head.weight
    assert mtp.mtp_block.self_attn.layer_idx == model.config.num_hidden_layers == mtp.layer_idx
    assert DeepseekV2ForCausalLM(PLAIN).mtp is None
    own = sum(p.numel() for n, p in model.named_parameters() if n.startswith("mtp."))
    assert own == sum(p.numel() for p in mtp.parameters()) - 2 * 258 * 128


def test_forward_shapes_and_position_zero_embedding_is_masked():
    model = _model()
    t, d = 9, model.config.hidden_size
    ids = torch.arange(50, 50 + t)
    prev = torch.randn(t, d, generator=torch.Generator().manual_seed(1))
    out = model.mtp(ids, torch.arange(t), prev)
    assert out.shape == (t, d) and out.dtype == torch.float32
    logits = model.mtp.compute_logits(out)
    assert logits.shape == (t, model.config.vocab_size) and logits.dtype == torch.float32
    # As upstream, the token embedding at position 0 is zeroed: only the hidden state counts.
    other = ids.clone()
    other[0] = 7
    again = model.mtp(other, torch.arange(t), prev)
    torch.testing.assert_close(again, out, rtol=0, atol=0)
    assert not torch.equal(model.mtp(ids, torch.arange(1, t + 1), prev)[0], out[0])


def test_adding_mtp_leaves_the_target_and_the_global_rng_unchanged():
    torch.manual_seed(123)
    plain = DeepseekV2ForCausalLM(PLAIN)
    after_plain = torch.rand(3)
    torch.manual_seed(123)
    with_mtp = _model()
    assert torch.equal(torch.rand(3), after_plain)
    for k, v in plain.state_dict().items():
        assert torch.equal(v, with_mtp.state_dict()[k]), k
    ids = list(range(30, 70))
    torch.testing.assert_close(with_mtp.forward_full(ids), plain.forward_full(ids), rtol=0, atol=0)


def _by_hand(model, token_ids, hidden, k):
    """The MTP layer written out from DeepSeek-V3's definition, one full pass per draft."""
    m = model.mtp
    inputs, prev, drafts = list(token_ids[1:]), hidden.clone(), []
    for _ in range(k):
        pos = torch.arange(len(inputs))
        e = m.embed_tokens(torch.tensor(inputs))
        e[0] = 0.0  # position 0
        x = m.eh_proj(torch.cat([m.enorm(e), m.hnorm(prev)], dim=-1))
        x = m.mtp_block(pos, x)
        normed = m.shared_head.norm(x)
        drafts.append(int((normed[-1] @ model.lm_head.weight.T).argmax()))
        inputs.append(drafts[-1])
        prev = torch.cat([prev, normed[-1:]])  # the normed output is fed back
    return drafts


@pytest.mark.parametrize("seed", [0, 3])
def test_propose_greedy_equals_the_loop_by_hand(seed):
    model = _model(seed)
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 256, (24,), generator=g).tolist()
    with torch.no_grad():
        hidden = model(torch.tensor(tokens[:-1]), torch.arange(23))  # the target's output
        expected = _by_hand(model, tokens, hidden, 4)
    assert model.mtp.propose_greedy(tokens, hidden, 4) == expected
    assert model.mtp.propose_greedy(tokens, hidden, 1) == expected[:1]
    assert model.mtp.propose_greedy(tokens[:2], hidden[:1], 2) == _by_hand(
        model, tokens[:2], hidden[:1], 2
    )


@pytest.mark.parametrize(
    "args, match",
    [
        ((list(range(5)), 5, 1), r"token_ids must hold hidden.shape\[0\] \+ 1 = 6 tokens"),
        ((list(range(6)), 5, 0), r"k=0 is invalid: expected an integer >= 1"),
        ((list(range(6)), (5, 3), 1), r"hidden must be \[N, 128\]; got \(5, 3\)"),
    ],
)
def test_propose_greedy_bad_input_is_one_line(args, match):
    model = _model()
    ids, shape, k = args
    shape = shape if isinstance(shape, tuple) else (shape, 128)
    with pytest.raises(ValueError, match=match):
        model.mtp.propose_greedy(ids, torch.zeros(shape), k)


def test_state_dict_round_trip_with_mtp(tmp_path):
    src, dst = _model(seed=1), _model(seed=2)
    path = save_checkpoint(src, tmp_path / "mtp.safetensors")
    assert set(read_checkpoint(path)) == set(src.hf_state_dict())
    dst.load_hf_state_dict(read_checkpoint(path))
    ids = torch.arange(40, 60)
    hidden = src(ids, torch.arange(20)).detach()
    torch.testing.assert_close(
        dst.mtp(ids + 1, torch.arange(20), hidden), src.mtp(ids + 1, torch.arange(20), hidden)
    )
    by_path = DeepseekV2ForCausalLM(RANDOM_MTP.replace(weights=str(path)))
    assert by_path.mtp.propose_greedy(ids.tolist() + [3], hidden, 2) == src.mtp.propose_greedy(
        ids.tolist() + [3], hidden, 2
    )


def test_checkpoints_with_and_without_mtp_load_as_the_config_says(tmp_path):
    with_mtp = save_checkpoint(_model(seed=1), tmp_path / "with.safetensors")
    plain_model = DeepseekV2ForCausalLM(PLAIN.replace(seed=1))
    without = save_checkpoint(plain_model, tmp_path / "without.safetensors")
    ids = list(range(30))
    # No MTP asked for: the MTP layer in the file is skipped, as vLLM's target skips it.
    off = DeepseekV2ForCausalLM(PLAIN.replace(weights=str(with_mtp)))
    assert off.mtp is None
    torch.testing.assert_close(off.forward_full(ids), plain_model.forward_full(ids))
    assert DeepseekV2ForCausalLM(PLAIN.replace(weights=str(without))).mtp is None
    # Asked for and absent: one line naming the weights and the way out.
    with pytest.raises(ValueError) as e:
        DeepseekV2ForCausalLM(RANDOM_MTP.replace(weights=str(without)))
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"weights={str(without)!r} has no MTP layer (no model.layers.2.*")
    assert "num_nextn_predict_layers=0" in msg


def test_mismatched_mtp_tensors_are_rejected_by_name():
    model = _model()
    sd = dict(model.hf_state_dict())
    part = {k: v for k, v in sd.items() if k != "model.layers.2.eh_proj.weight"}
    with pytest.raises(ValueError, match=r"missing keys \[model.layers.2.eh_proj.weight\]"):
        model.load_hf_state_dict(part)
    differ = dict(sd)
    differ["model.layers.2.shared_head.head.weight"] = torch.zeros_like(sd["lm_head.weight"])
    with pytest.raises(ValueError, match=r"shared_head.head.weight unlike lm_head.weight"):
        model.load_hf_state_dict(differ)
    # The shared copies may be left out: the target's are the MTP layer's.
    lean = {
        k: v
        for k, v in sd.items()
        if "layers.2.embed" not in k and "layers.2.shared_head.h" not in k
    }
    _model(seed=4).load_hf_state_dict(lean)


def test_num_nextn_predict_layers_is_validated_and_read_from_a_config_json():
    for bad in (5, -1, True, "1"):
        with pytest.raises(ValueError, match=r"predict_layers=.* is invalid: expected an"):
            ModelConfig.tiny(weights="random", num_nextn_predict_layers=bad)
    with pytest.raises(ValueError, match=r"=2 is invalid: .* 0 to 1 with weights='trained'"):
        ModelConfig.tiny(num_nextn_predict_layers=2)
    hf = dict(
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        kv_lora_rank=64,
        qk_nope_head_dim=32,
        qk_rope_head_dim=16,
        v_head_dim=32,
        vocab_size=258,
    )
    assert ModelConfig.from_hf(hf).num_nextn_predict_layers == 0
    assert ModelConfig.from_hf({**hf, "num_nextn_predict_layers": 1}).num_nextn_predict_layers == 1
    assert ModelConfig.deepseek_v3().num_nextn_predict_layers == 1
    assert ModelConfig.deepseek_v2().num_nextn_predict_layers == 0


@pytest.mark.parametrize("weights", ["random", "trained"])
def test_draft_and_verify_equals_the_oracles_prefix_by_prefix(weights):
    """The batched measurement behind the acceptance rates: every row is what
    ``propose_greedy`` drafts from that prefix and what ``forward_full`` decodes greedily."""
    from pdlab.engine.model_executor.models.deepseek_mtp import draft_and_verify
    from pdlab.tools.train import corpus_ids

    model = DeepseekV2ForCausalLM(ModelConfig.tiny(weights=weights))
    line = corpus_ids()[5][:26]
    drafts, target = draft_and_verify(model, line, 3)
    assert drafts.shape == target.shape == (len(line) - 1, 3)
    with torch.no_grad():
        hidden = model(torch.tensor(line), torch.arange(len(line)))
    for r in range(len(line) - 1):
        proposed = model.mtp.propose_greedy(line[: r + 2], hidden[: r + 1], 3)
        assert drafts[r].tolist() == proposed, r
        seq, greedy = line[: r + 2], []
        for d in proposed:  # the target's token at each draft's place, given those before
            greedy.append(int(model.forward_full(seq)[-1].argmax()))
            seq = seq + [d]
        assert target[r].tolist() == greedy, r


def test_more_mtp_modules_are_checkpoint_layers_after_the_decoder():
    """Module j is DeepSeek's ``model.layers.{num_hidden_layers + j}``: its own weights and
    KV-cache entry, the target's embedding and head; module 0 is the one-module model's,
    unchanged. A one-module checkpoint does not fill a two-module model."""
    two = DeepseekV2ForCausalLM(RANDOM_MTP.replace(num_nextn_predict_layers=2))
    one = DeepseekV2ForCausalLM(RANDOM_MTP)
    assert [m.layer_idx for m in two.mtp_layers] == [2, 3]
    assert two.mtp1.embed_tokens is two.model.embed_tokens
    assert two.mtp1.shared_head.head is two.lm_head
    assert not torch.equal(two.mtp.eh_proj.weight, two.mtp1.eh_proj.weight)
    sd = two.hf_state_dict()
    assert {k: v for k, v in sd.items() if "layers.3." not in k}.keys() == (
        one.hf_state_dict().keys()
    )
    assert all(torch.equal(v, sd[k]) for k, v in one.hf_state_dict().items())
    assert "model.layers.3.self_attn.kv_b_proj.weight" in sd
    again = DeepseekV2ForCausalLM(RANDOM_MTP.replace(num_nextn_predict_layers=2, seed=9))
    again.load_hf_state_dict(sd)
    assert torch.equal(again.mtp1.eh_proj.weight, two.mtp1.eh_proj.weight)
    with pytest.raises(ValueError, match=r"missing keys \[model\.layers\.3\."):
        again.load_hf_state_dict(one.hf_state_dict())
