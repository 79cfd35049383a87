"""Bad input to the engine is refused at the door with one clear line, and a request whose
step raises ends with an error while the engine keeps serving the others."""

import re

import pytest

from pdlab.engine.config import CacheConfig, ModelConfig, SchedulerConfig
from pdlab.engine.llm_engine import LLMEngine
from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM
from pdlab.engine.request import SamplingParams

CFG = ModelConfig.tiny()
MODEL = DeepseekV2ForCausalLM(CFG)


def _engine(**kw):
    return LLMEngine(
        CFG, CacheConfig(block_size=4, num_blocks=64), model=MODEL, backend="torch", **kw
    )


@pytest.mark.parametrize(
    "kwargs, error, needle",
    [
        ({"prompt": 123}, TypeError, "prompt=123 is invalid"),
        ({"prompt": b"bytes"}, TypeError, "prompt=b'bytes' is invalid"),
        ({"prompt": ""}, ValueError, "prompt='' is invalid"),
        ({"prompt": []}, ValueError, "prompt=[] is invalid"),
        (
            {"prompt": [1, 258]},
            ValueError,
            "prompt[1]=258 is invalid: expected a token id in [0, 258)",
        ),
        ({"prompt": [1, -1]}, ValueError, "prompt[1]=-1 is invalid"),
        ({"prompt": [1, 2.0]}, TypeError, "prompt[1]=2.0 is invalid"),
        ({"prompt": [True]}, TypeError, "prompt[0]=True is invalid"),
        (
            {"prompt": list(range(10)) * 5},
            ValueError,
            "prompt has 50 tokens: expected fewer than max_model_len=32",
        ),
        ({"prompt": [1], "sampling_params": {"max_tokens": 2}}, TypeError, "sampling_params="),
        (
            {"prompt": [1], "sampling_params": SamplingParams(stop_token_ids=(300,))},
            ValueError,
            "stop_token_ids contains 300",
        ),
        ({"prompt": [1], "request_id": 7}, TypeError, "request_id=7 is invalid"),
        ({"prompt": [1], "kv_transfer_params": "P"}, TypeError, "kv_transfer_params='P'"),
    ],
)
def test_add_request_refuses_bad_input_and_queues_nothing(kwargs, error, needle):
    e = _engine(scheduler_config=SchedulerConfig(max_model_len=32))
    with pytest.raises(error, match=re.escape(needle)):
        e.add_request(**kwargs)
    assert not e.has_unfinished_requests() and e.scheduler.kv_cache_manager.num_free_blocks == 64
    # and the engine still serves a good request
    assert len(e.generate([1, 2, 3], SamplingParams(max_tokens=2))[0].output_token_ids) == 2


@pytest.mark.parametrize(
    "field, value, needle",
    [
        ("max_tokens", 0, "SamplingParams.max_tokens=0"),
        ("temperature", -1.0, "SamplingParams.temperature=-1.0"),
        ("temperature", float("nan"), "SamplingParams.temperature=nan"),
        ("seed", "x", "SamplingParams.seed='x'"),
        ("stop_token_ids", "ab", "SamplingParams.stop_token_ids='ab'"),
    ],
)
def test_bad_sampling_params_name_the_field(field, value, needle):
    with pytest.raises(ValueError, match=re.escape(needle)):
        SamplingParams(**{field: value})


def test_max_model_len_beyond_the_models_positions_is_refused():
    with pytest.raises(
        ValueError,
        match="max_model_len=5000 is invalid: expected at most max_position_embeddings=4096",
    ):
        _engine(scheduler_config=SchedulerConfig(max_model_len=5000))


def test_a_cache_that_cannot_be_allocated_is_one_clear_error():
    needle = "CacheConfig(num_blocks=1000000000000, block_size=4) is too large"
    with pytest.raises(ValueError, match=re.escape(needle)):
        LLMEngine(CFG, CacheConfig(block_size=4, num_blocks=10**12), model=MODEL, backend="torch")


def test_a_request_whose_step_raises_ends_with_error_and_the_others_carry_on(monkeypatch):
    """The model fails for any batch holding token 99 (a stand-in for any fault inside the
    forward). The batch is retried request by request: only the culprit fails."""
    e = _engine()
    embed = e.model.model.embed_tokens
    real = embed.forward

    def faulty(ids):
        if bool((ids == 99).any()):
            raise RuntimeError("injected fault for token 99")
        return real(ids)

    monkeypatch.setattr(embed, "forward", faulty)
    good = [[1, 2, 3, 4, 5], list(range(20, 33))]
    rids = [e.add_request(p, SamplingParams(max_tokens=3)) for p in (good[0], [7, 99, 8], good[1])]
    e.run_until_done(max_steps=50)
    bad = e.get_output(rids[1])
    assert bad.finished and bad.finish_reason == "error" and "injected fault" in bad.error
    assert e.tracer.first("request_error", req_id=rids[1])
    model = DeepseekV2ForCausalLM(CFG)
    for rid, p in zip((rids[0], rids[2]), good):
        assert e.get_output(rid).output_token_ids == model.greedy_generate(p, 3)
    assert e.scheduler.kv_cache_manager.num_free_blocks == 64
    # later requests are served as before
    assert e.generate(good[0], SamplingParams(max_tokens=3))[0].output_token_ids == (
        model.greedy_generate(good[0], 3)
    )
