"""The engine against the model's cacheless full forward, token for token.

Tolerance: the first logits agree with the full forward within atol=rtol=1e-4 (fp32; the
paged path sums in another order). Greedy tokens must be identical.
"""

import random

import pytest
import torch

from pdlab.engine.config import (
    AttentionConfig,
    CacheConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from pdlab.engine.llm_engine import LLMEngine
from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM
from pdlab.engine.request import SamplingParams
from pdlab.sim.kernel_costs import kernel_event_cost

CFG = ModelConfig.tiny()
MODEL = DeepseekV2ForCausalLM(CFG)


def _oracle(prompt, n):
    return MODEL.greedy_generate(prompt, n)


def _prompts(seed, count, lo=1, hi=40):
    rng = random.Random(seed)
    return [[rng.randrange(256) for _ in range(rng.randint(lo, hi))] for _ in range(count)]


def _free_everything(engine):
    m = engine.scheduler.kv_cache_manager
    assert m.num_free_blocks == engine.cache_config.num_blocks, "blocks leaked"


# (MLA backend profile, prefill_context_parallel_size): the default; short extends as
# prefills; short prompts on the decode path with uniform (FlashMLA) and varlen queries.
ROUTINGS = [("triton_mla", 1), ("triton_mla", 2), ("flashmla", 1), ("flash_attn_mla", 1)]


@pytest.mark.parametrize("routing", ROUTINGS, ids=[f"{b}-pcp{p}" for b, p in ROUTINGS])
@pytest.mark.parametrize(
    ("sched", "seed"),
    [
        (SchedulerConfig(), 101),
        (SchedulerConfig(max_num_batched_tokens=7), 102),  # chunked prefill
        (SchedulerConfig(max_num_batched_tokens=64, long_prefill_token_threshold=5), 103),
    ],
    ids=["plain", "budget7", "threshold5"],
)
def test_greedy_equals_full_forward(routing, sched, seed):
    backend, pcp = routing
    engine = LLMEngine(
        CFG,
        CacheConfig(block_size=4, num_blocks=128),
        sched,
        model=MODEL,
        backend="torch",
        attention_config=AttentionConfig(backend),
        parallel_config=ParallelConfig(pcp),
    )
    engine.runner.keep_logits = True
    prompts = _prompts(seed, 4)  # the same prompts under every routing
    outs = engine.generate(prompts, SamplingParams(max_tokens=6))
    for p, o in zip(prompts, outs):
        assert o.output_token_ids == _oracle(p, 6)
        first = engine.runner.logits[o.request_id][0]
        torch.testing.assert_close(first, MODEL.forward_full(p)[-1], atol=1e-4, rtol=1e-4)
    _free_everything(engine)


@pytest.mark.parametrize("pcp", [1, 2])
def test_prefix_hits_and_the_local_short_extend(pcp):
    """A prompt of k*B + 1 tokens whose blocks are all cached: the hit is capped at N - 1,
    so the step is one token over N - 1 cached tokens, the same short extend as D's."""
    bs = 4
    engine = LLMEngine(
        CFG,
        CacheConfig(block_size=bs, num_blocks=64),
        SchedulerConfig(),
        model=MODEL,
        backend="torch",
        parallel_config=ParallelConfig(pcp),
    )
    prompt = list(range(50, 50 + 3 * bs + 1))
    first = engine.generate(prompt, SamplingParams(max_tokens=3))[0]
    second = engine.generate(prompt, SamplingParams(max_tokens=3))[0]
    assert first.output_token_ids == second.output_token_ids == _oracle(prompt, 3)
    assert second.num_cached_tokens == len(prompt) - 1
    rid = second.request_id
    r = engine.tracer.first("route", "local", req_id=rid)
    assert (r["query_len"], r["num_computed_tokens"], r["num_prompt_tokens"]) == (1, 12, 13)
    assert r["is_prefilling"] and r["region"] == "short_extend"
    assert r["forward"] == ("forward_mha" if pcp > 1 else "forward_mqa")
    kernels = [k["name"] for k in engine.tracer.filter("kernel", "local", step=r["step"])]
    if pcp > 1:
        assert "gather_cache" in kernels and "mla_decode" not in kernels
    else:
        assert "mla_decode" in kernels and "gather_cache" not in kernels
    # a fully cached prompt of N tokens reuses floor((N-1)/B)*B tokens
    p2 = prompt[: 2 * bs]
    o = engine.generate(p2, SamplingParams(max_tokens=2))[0]
    assert o.num_cached_tokens == (len(p2) - 1) // bs * bs
    assert o.output_token_ids == _oracle(p2, 2)
    _free_everything(engine)


def test_preemption_by_a_tiny_pool_gives_the_same_tokens():
    engine = LLMEngine(
        CFG,
        CacheConfig(block_size=2, num_blocks=14, enable_prefix_caching=False),
        SchedulerConfig(max_num_seqs=4),
        model=MODEL,
        backend="torch",
    )
    prompts = _prompts(7, 4, lo=5, hi=9)
    outs = engine.generate(prompts, SamplingParams(max_tokens=8))
    assert engine.tracer.filter("preempt"), "the pool was meant to force preemption"
    for p, o in zip(prompts, outs):
        assert o.output_token_ids == _oracle(p, 8)
    _free_everything(engine)


def test_flashmla_threshold_and_stop_tokens():
    """A 20-token prompt, alone in its batch, is a decode under FlashMLA's threshold (128)."""
    engine = LLMEngine(
        CFG,
        CacheConfig(block_size=4),
        SchedulerConfig(),
        model=MODEL,
        backend="torch",
        attention_config=AttentionConfig("flashmla"),
    )
    prompt = list(b"What is prefix cachi")  # 20 tokens; the trained model goes on "ng?"
    want = _oracle(prompt, 6)
    assert want[2] not in want[:2], "the stop token must first appear third"
    out = engine.generate(prompt, SamplingParams(max_tokens=6, stop_token_ids=[want[2]]))[0]
    assert out.output_token_ids == want[:3] and out.finish_reason == "stop"
    first = engine.tracer.filter("route", "local")[0]
    assert (first["query_len"], first["region"], first["path"]) == (20, "prefill", "decode")


def test_text_prompt_and_seeded_sampling():
    engine = LLMEngine(CFG, model=MODEL, backend="torch")
    a = engine.generate("hello", SamplingParams(max_tokens=5, temperature=0.8, seed=3))[0]
    b = engine.generate("hello", SamplingParams(max_tokens=5, temperature=0.8, seed=3))[0]
    assert a.output_token_ids == b.output_token_ids and len(a.output_token_ids) == 5
    assert a.prompt_token_ids == list(b"hello")
    with pytest.raises(ValueError, match="max_tokens"):
        engine.generate("x", SamplingParams(max_tokens=0))


def test_triton_backend_matches_oracle():
    from pdlab.kernels import backend

    if not backend.triton_installed():
        pytest.skip("triton is not installed")
    engine = LLMEngine(
        CFG,
        CacheConfig(block_size=4, num_blocks=64),
        SchedulerConfig(max_num_batched_tokens=9),
        model=MODEL,
        backend="triton",
    )
    prompts = _prompts(11, 2, lo=6, hi=14)
    outs = engine.generate(prompts, SamplingParams(max_tokens=3))
    for p, o in zip(prompts, outs):
        assert o.output_token_ids == _oracle(p, 3)
    assert {k["backend"] for k in engine.tracer.filter("kernel")} == {"triton"}


def test_trace_records_steps_and_kernel_costs():
    engine = LLMEngine(CFG, CacheConfig(block_size=4), model=MODEL, backend="torch")
    engine.generate(list(range(9)), SamplingParams(max_tokens=2))
    steps = engine.tracer.filter("step")
    s0 = steps[0]["scheduled"][0]
    assert (s0["num_computed_tokens_before"], s0["num_computed_tokens_after"]) == (0, 9)
    assert s0["block_ids"] and len(s0["block_ids"]) == 3
    ks = engine.tracer.filter("kernel")
    assert all(k["elem_bytes"] == 4 for k in ks)  # the tiny model runs in fp32
    assert all(f >= 0 and b > 0 for f, b in map(kernel_event_cost, ks))
    assert {"reshape_and_cache_mla", "flash_attn_varlen", "mla_decode"} <= {k["name"] for k in ks}


@pytest.mark.parametrize("workspace", [4, 8, 12])
def test_context_chunks_smaller_than_the_context_give_the_same_tokens(workspace):
    """Chunked prefill with a workspace of a few blocks: every later chunk's context is
    gathered in several workspace-sized pieces (split on page boundaries, continued in the
    next piece and merged by LSE), several requests share a piece, and the tokens still
    equal the cacheless forward."""
    engine = LLMEngine(
        CFG,
        CacheConfig(block_size=4, num_blocks=128),
        SchedulerConfig(max_num_batched_tokens=9),
        model=MODEL,
        backend="torch",
        workspace_tokens=workspace,
        parallel_config=ParallelConfig(2),
    )
    prompts = _prompts(200 + workspace, 3, lo=10, hi=30)
    outs = engine.generate(prompts, SamplingParams(max_tokens=3))
    for p, o in zip(prompts, outs):
        assert o.output_token_ids == _oracle(p, 3)
    gathers = [
        k for k in engine.tracer.filter("kernel", "local", layer=0) if k["name"] == "gather_cache"
    ]
    assert gathers and max(k["shapes"]["rows"] for k in gathers) <= workspace
    assert any(k["shapes"]["seq_starts"][0] > 0 for k in gathers)  # a continued context
    _free_everything(engine)
