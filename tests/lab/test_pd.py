"""Prefill/decode disaggregation in one process: P/D equals colocated, D's first step is
the one-token short extend, and faults lose nothing."""

import time

import pytest
from conftest import pair_all_free

from pdlab.disagg.pair import PDPair
from pdlab.engine.config import (
    CacheConfig,
    KVTransferConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from pdlab.engine.llm_engine import LLMEngine
from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM
from pdlab.engine.request import SamplingParams

CFG = ModelConfig.tiny()
MODEL = DeepseekV2ForCausalLM(CFG)
BS = 4


def _pair(pcp=1, **kw):
    return PDPair(
        CFG,
        CacheConfig(block_size=BS, num_blocks=64),
        SchedulerConfig(),
        backend="torch",
        parallel_config=ParallelConfig(prefill_context_parallel_size=pcp),
        **kw,
    )


def _colocated(prompt, n):
    e = LLMEngine(CFG, CacheConfig(block_size=BS, num_blocks=64), model=MODEL, backend="torch")
    return e.generate(prompt, SamplingParams(max_tokens=n))[0].output_token_ids


@pytest.mark.parametrize("pcp", [1, 2])
@pytest.mark.parametrize("n", [3, BS, 3 * BS, 3 * BS + 1])
def test_pd_equals_colocated_and_routes_the_short_extend(pcp, n):
    prompt = [(7 * i + n) % 256 for i in range(n)]
    pair = _pair(pcp)
    out = pair.generate(prompt, SamplingParams(max_tokens=5))[0]
    assert out.output_token_ids == _colocated(prompt, 5)
    t = pair.tracer
    ready = t.first("remote_kv_ready", "D")
    assert (ready["num_computed_tokens_before_adjust"], ready["num_computed_tokens"]) == (n, n - 1)
    first = [e for e in t.filter("step", "D") if e["scheduled"]][0]["scheduled"][0]
    assert first["num_computed_tokens_before"] == n - 1 and first["num_scheduled_tokens"] == 1
    route = t.first("route", "D")
    assert (route["query_len"], route["num_computed_tokens"], route["num_prompt_tokens"]) == (
        1,
        n - 1,
        n,
    )
    kernels = t.filter("kernel", "D", step=route["step"])
    if pcp > 1:
        assert route["forward"] == "forward_mha"
        gathered = [k for k in kernels if k["name"] == "gather_cache"]
        assert [k["shapes"]["rows"] for k in gathered] == [n - 1] * CFG.num_hidden_layers
        assert [k["layer"] for k in gathered] == list(range(CFG.num_hidden_layers))
        assert not [k for k in kernels if k["name"] == "mla_decode"]
    else:
        assert route["forward"] == "forward_mqa"
        dec = [k for k in kernels if k["name"] == "mla_decode"]
        assert dec and dec[0]["shapes"]["seq_lens"] == [n]
    moved = t.first("kv_transfer", "D")
    assert moved["ok"] and len(moved["local_block_ids"]) == -(-n // BS)
    pair_all_free(pair)


@pytest.mark.parametrize("pcp", [1, 2])
def test_local_prefix_hit_on_d_reads_only_the_tail(pcp):
    prompt = list(range(100, 100 + 3 * BS + 2))
    pair = _pair(pcp)
    # warm D's prefix cache with the first two blocks of the prompt
    pair.decode.generate(prompt[: 2 * BS + 1], SamplingParams(max_tokens=1))
    out = pair.generate(prompt, SamplingParams(max_tokens=4))[0]
    assert out.output_token_ids == _colocated(prompt, 4)
    moved = pair.tracer.first("kv_transfer", "D")
    assert len(moved["remote_block_ids"]) == 2  # blocks 2 and 3 of 4; 0 and 1 were cached
    assert pair.tracer.first("remote_kv_ready", "D")["num_computed_tokens"] == len(prompt) - 1
    pair_all_free(pair)


def test_several_prompts_interleaved():
    prompts = ["The cache holds K and V.", "Logits need h[N-1].", "x", "abcdefgh"]
    pair = _pair(2)
    outs = pair.generate(prompts, SamplingParams(max_tokens=4))
    for p, o in zip(prompts, outs):
        assert o.output_token_ids == _colocated(p, 4)
    pair_all_free(pair)


@pytest.mark.parametrize("fault", ["fail", "corrupt"])
def test_failed_or_corrupt_transfer_falls_back_to_recompute(fault):
    prompt = list(range(30, 30 + 2 * BS + 3))
    pair = _pair(2, kv_transfer_config=KVTransferConfig(kv_load_failure_policy="recompute"))
    pair.transport.fault_once = fault
    out = pair.generate(prompt, SamplingParams(max_tokens=4))[0]
    assert out.output_token_ids == _colocated(prompt, 4)
    moved = pair.tracer.first("kv_transfer", "D")
    assert not moved["ok"] and moved["reason"] in ("injected failure", "checksum mismatch")
    assert pair.tracer.filter("remote_kv_failed", "D")
    # D computed the whole prompt itself
    steps = [s for e in pair.tracer.filter("step", "D") for s in e["scheduled"]]
    assert sum(
        s["num_scheduled_tokens"] for s in steps if s["num_computed_tokens_before"] < len(prompt)
    ) == len(prompt)
    pair_all_free(pair)


def test_abort_while_d_reads_frees_both_sides():
    pair = _pair()
    pair.transport.delay_polls = 3  # the read stays in flight for a few steps
    rid = pair.add_request(list(range(20)), SamplingParams(max_tokens=4))
    pair.step()
    req = pair.decode.scheduler.get_request(rid)
    assert req is not None and req.status.name == "WAITING_FOR_REMOTE_KVS"
    assert pair.prefill.scheduler.kv_cache_manager.num_free_blocks < 64  # P holds blocks
    pair.abort_request(rid)
    # D keeps its blocks while the read still writes into them, then frees them
    assert pair.decode.scheduler.kv_cache_manager.num_free_blocks < 64
    for _ in range(6):
        pair.step()
    assert pair.decode.get_output(rid).finish_reason == "abort"
    pair_all_free(pair)


def test_abort_before_d_reads_releases_p():
    pair = _pair()
    p_rid = pair.prefill.add_request(
        list(range(20)), SamplingParams(max_tokens=1), "r", {"do_remote_decode": True}
    )
    pair.prefill.run_until_done()
    params = pair.prefill.get_output(p_rid).kv_transfer_params
    assert params["do_remote_prefill"] and params["remote_block_ids"]
    assert pair.prefill.scheduler.kv_cache_manager.num_free_blocks == 64 - 5
    pair.decode.add_request(list(range(20)), SamplingParams(max_tokens=4), "r", params)
    pair.decode.abort_request("r")
    pair.prefill.step()
    assert pair.tracer.filter("kv_release", "D")
    pair_all_free(pair)


def test_d_that_never_reads_does_not_leak_p_blocks():
    pair = PDPair(
        CFG,
        CacheConfig(block_size=BS, num_blocks=64),
        SchedulerConfig(kv_transfer_timeout_s=0.05),
        backend="torch",
    )
    for i, n in enumerate((15, 9)):
        pair.prefill.add_request(
            list(range(100 * i, 100 * i + n)),
            SamplingParams(max_tokens=1),
            f"r{i}",
            {"do_remote_decode": True},
        )
    pair.prefill.run_until_done()
    # P's requests finished with delay_free: their blocks wait for a D that never comes
    m = pair.prefill.scheduler.kv_cache_manager
    assert m.num_free_blocks == 64 - 4 - 3
    time.sleep(0.1)
    pair.prefill.step()
    pair.prefill.step()
    assert m.num_free_blocks == 64
    assert len(pair.tracer.filter("kv_send_timeout", "P")) == 2


def test_p_requests_hold_blocks_until_read():
    pair = _pair()
    rid = pair.add_request(list(range(17)), SamplingParams(max_tokens=2))
    pair.step()  # P prefills and finishes; D receives the request
    held = 64 - pair.prefill.scheduler.kv_cache_manager.num_free_blocks
    assert held == -(-17 // BS)
    while pair.has_unfinished_requests():
        pair.step()
    assert pair.decode.get_output(rid).finished
    pair_all_free(pair)


def test_without_the_minus_one_the_error_names_the_real_cause(monkeypatch):
    """Removing the ``- 1`` (a learner's experiment) must fail with the reason, not with a
    message about the connector."""
    from pdlab.engine.core.sched.scheduler import Scheduler

    orig = Scheduler._update_waiting_for_remote_kv

    def keep_every_token(self, request):
        n = request.num_computed_tokens
        ready = orig(self, request)
        if ready and n == request.num_tokens:
            request.num_computed_tokens = n
        return ready

    monkeypatch.setattr(Scheduler, "_update_waiting_for_remote_kv", keep_every_token)
    with pytest.raises(RuntimeError, match="which KV transfer does not carry"):
        _pair().generate(list(range(40, 51)), SamplingParams(max_tokens=2))


@pytest.mark.parametrize("spec", [None, 2], ids=["plain", "k2"])
def test_a_request_d_cannot_hold_is_refused_before_p_computes_it(spec):
    # Issue 42, item 4: D's pool is smaller than P's; the refusal comes from add_request,
    # before P runs, and the requests already queued by generate are taken back.
    from pdlab.engine.config import SpeculativeConfig

    pair = PDPair(
        CFG,
        CacheConfig(block_size=BS, num_blocks=64),
        SchedulerConfig(),
        backend="torch",
        decode_cache_config=CacheConfig(block_size=BS, num_blocks=6),
        speculative_config=SpeculativeConfig("ngram", spec) if spec else None,
    )
    with pytest.raises(ValueError, match=r"too small.*num_blocks=6"):
        pair.generate([list(range(8)), list(range(40))], SamplingParams(max_tokens=4))
    assert not pair.tracer.filter("step", "P")  # P computed nothing
    assert not pair.has_unfinished_requests()
    pair_all_free(pair)
    # The pair still serves a request D can hold.
    [out] = pair.generate(list(range(8)), SamplingParams(max_tokens=2))
    assert out.finish_reason == "length" and len(out.output_token_ids) == 2
    pair_all_free(pair)


def test_abort_after_p_prefilled_releases_p_at_once():
    # P has prefilled and holds its blocks for a D that has not read them: an abort on the
    # pair ends the hand-off now, not after kv_transfer_timeout_s (issue 42, item 4).
    pair = _pair()
    pair.prefill.add_request(
        list(range(20)), SamplingParams(max_tokens=1), "r", {"do_remote_decode": True}
    )
    pair.prefill.run_until_done()
    assert pair.prefill.scheduler.kv_cache_manager.num_free_blocks < 64  # held for D
    pair.abort_request("r")
    pair.step()
    assert not pair.has_unfinished_requests()
    pair_all_free(pair)
