"""Faults of a P/D pair in one process: a late read after P's timeout, bad block ids, a
mismatched pair. Each ends in correct tokens (recompute) or a clear error, with nothing
held. Time is driven through the connector's clock, never slept."""

import pytest
from conftest import pair_all_free

from pdlab.catalog import text
from pdlab.disagg.pair import PDPair
from pdlab.engine.config import CacheConfig, ModelConfig, SchedulerConfig
from pdlab.engine.llm_engine import LLMEngine
from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM
from pdlab.engine.request import SamplingParams
from pdlab.errors import parse

try:  # added by the scheduler's kv_load_failure_policy work; until it lands D recomputes
    from pdlab.engine.config import KVTransferConfig
except ImportError:  # pragma: no cover - depends on the merge order
    KVTransferConfig = None

CFG = ModelConfig.tiny()
MODEL = DeepseekV2ForCausalLM(CFG)
BS = 4


def _recompute_kwargs():
    if KVTransferConfig is None:
        return {}
    return {"kv_transfer_config": KVTransferConfig(kv_load_failure_policy="recompute")}


def _pair(num_blocks=64, timeout_s=5.0, **kw):
    return PDPair(
        CFG,
        CacheConfig(block_size=BS, num_blocks=num_blocks),
        SchedulerConfig(kv_transfer_timeout_s=timeout_s),
        backend="torch",
        decode_cache_config=CacheConfig(block_size=BS, num_blocks=64),
        **kw,
    )


def _colocated(prompt, n):
    e = LLMEngine(CFG, CacheConfig(block_size=BS, num_blocks=64), model=MODEL, backend="torch")
    return e.generate(prompt, SamplingParams(max_tokens=n))[0].output_token_ids


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _late_read(pair):
    """A's read is held in flight; P's timeout passes and P frees A's blocks; B's prefill
    overwrites them; only then does A's read reach P."""
    clock = Clock()
    pair.p_connector.clock = clock
    pair.transport.delay_polls = 4
    a = list(range(40, 51))  # 11 tokens: 3 blocks
    b = list(range(120, 120 + 6 * BS + 2))  # all 7 of P's blocks, so A's are reused
    rid_a = pair.add_request(a, SamplingParams(max_tokens=4))
    pair.step()  # P prefills A and holds its blocks; D allocates and starts the read
    assert pair.decode.scheduler.get_request(rid_a).status.name == "WAITING_FOR_REMOTE_KVS"
    held = pair.tracer.first("finish", "P", req_id=rid_a)["kv_transfer_params"]
    clock.now += 10.0  # past kv_transfer_timeout_s=5
    rid_b = pair.add_request(b, SamplingParams(max_tokens=2))
    pair.step()  # P reports A's send timed out and frees its blocks
    assert pair.tracer.filter("kv_send_timeout", "P")
    pair.step()  # P prefills B into the same blocks
    reused = pair.tracer.first("finish", "P", req_id=rid_b)["kv_transfer_params"]
    assert set(held["remote_block_ids"]) <= set(reused["remote_block_ids"])
    for _ in range(200):
        if not pair.has_unfinished_requests():
            break
        pair.step()
    return a, b, rid_a, rid_b


def test_read_after_p_timeout_with_blocks_reused_recomputes_same_tokens():
    pair = _pair(num_blocks=7, **_recompute_kwargs())
    a, b, rid_a, rid_b = _late_read(pair)
    moved = pair.tracer.first("kv_transfer", "D", req_id=rid_a)
    assert not moved["ok"] and "no blocks" in moved["reason"]
    assert pair.tracer.first("remote_kv_failed", "D", req_id=rid_a)
    assert pair.decode.get_output(rid_a).output_token_ids == _colocated(a, 4)
    assert pair.decode.get_output(rid_b).output_token_ids == _colocated(b, 2)
    pair_all_free(pair)


@pytest.mark.skipif(KVTransferConfig is None, reason="needs KVTransferConfig (scheduler work)")
def test_read_after_p_timeout_fails_the_request_under_fail_policy():
    pair = _pair(num_blocks=7, kv_transfer_config=KVTransferConfig(kv_load_failure_policy="fail"))
    a, b, rid_a, rid_b = _late_read(pair)
    out = pair.decode.get_output(rid_a)
    assert out.finished and out.finish_reason == "error" and out.output_token_ids == []
    assert pair.decode.get_output(rid_b).output_token_ids == _colocated(b, 2)
    pair_all_free(pair)


def test_second_read_of_one_transfer_is_refused():
    pair = _pair()
    pair.prefill.add_request(
        list(range(9)), SamplingParams(max_tokens=1), "r", {"do_remote_decode": True}
    )
    pair.prefill.run_until_done()
    params = pair.prefill.get_output("r").kv_transfer_params
    ids = params["remote_block_ids"]
    claim = pair.p_connector.claim_read
    tid = params["remote_transfer_id"]
    stale, foreign = claim("r", "P-999", ids), claim("r", tid, [63])
    assert stale.startswith("transfer_id='P-999' is stale")
    assert foreign.endswith(text("en", "err_claim_foreign", block=63, tid=tid))
    assert claim("r", tid, ids) is None
    again = claim("r", tid, ids)
    assert "already read" in again
    # Each reason is a catalog message: read back from its English, it has its Chinese.
    reasons = [stale, foreign, again]
    keys = [parse(why).key for why in reasons]
    assert keys == ["err_claim_stale", "err_claim_foreign", "err_claim_read"]
    assert all(parse(why).render("zh") != why for why in reasons)


@pytest.mark.parametrize(
    "remote_block_ids, needle",
    [
        ([0, 1, 2, 3, 999], "remote_block_ids contains 999"),  # beyond P's cache
        ([5, 6, 7, 8, 9], "P holds no blocks"),  # in range, but no transfer of P's
        ([0], "remote blocks for"),  # too few blocks for the prompt
    ],
)
def test_read_with_bad_remote_block_ids_fails_once_and_recomputes(remote_block_ids, needle):
    pair = _pair(**_recompute_kwargs())
    prompt = list(range(60, 77))  # 17 tokens: 5 blocks
    pair.decode.add_request(
        prompt,
        SamplingParams(max_tokens=3),
        "x",
        {
            "do_remote_prefill": True,
            "remote_block_ids": remote_block_ids,
            "remote_engine_id": "P",
            "remote_request_id": "x",
            "remote_transfer_id": "P-1",
        },
    )
    pair.decode.run_until_done(max_steps=50)
    moved = pair.tracer.filter("kv_transfer", "D")
    assert len(moved) == 1 and not moved[0]["ok"] and needle in moved[0]["reason"]
    assert pair.decode.get_output("x").output_token_ids == _colocated(prompt, 3)
    pair_all_free(pair)


def test_pair_with_different_block_sizes_is_refused_before_any_request():
    with pytest.raises(ValueError, match=r"decode_cache_config.block_size=8 .*expected 4"):
        PDPair(
            CFG,
            CacheConfig(block_size=4),
            decode_cache_config=CacheConfig(block_size=8),
            backend="torch",
        )


def test_duplicate_request_id_in_a_pair_is_refused():
    pair = _pair()
    pair.add_request([1, 2, 3], SamplingParams(max_tokens=2), "dup")
    with pytest.raises(ValueError, match="request_id='dup'"):
        pair.add_request([4, 5, 6], SamplingParams(max_tokens=2), "dup")
