"""Request lifecycles with the numbers vLLM 0.33.0's scheduler produces.

The expected counts and block ids are derived by reading vLLM 0.33.0's
``vllm/v1/core/sched/scheduler.py``, ``vllm/v1/core/kv_cache_manager.py`` and
``vllm/v1/core/block_pool.py`` (the lifecycles its ``test_remote_prefill_lifecycle``,
``test_remote_decode_lifecycle`` and ``test_scheduler`` unit tests walk through), with
one shift: vLLM keeps block 0 as a null block, pdlab does not, so vLLM's block ``i + 1`` is
pdlab's block ``i``.
"""

import pytest
from conftest import all_free, events_of, free_queue_ids, make_scheduler, req, step
from doubles.fake_connector import FakeKVConnector

from pdlab.engine.request import Request, RequestStatus, SamplingParams

BS = 16  # vLLM's unit tests use 16-token blocks
NUM_BLOCKS = 40


def remote_prefill_request(rid, n, max_tokens=3, start=0):
    """A D-side request: P computed the prompt and holds it in ``cdiv(n, BS)`` blocks."""
    params = {
        "do_remote_prefill": True,
        "do_remote_decode": False,
        "remote_block_ids": list(range(-(-n // BS))),
        "remote_engine_id": "P",
        "remote_request_id": rid,
    }
    return Request(
        rid,
        [start + i for i in range(n)],
        SamplingParams(max_tokens=max_tokens),
        kv_transfer_params=params,
    )


def remote_decode_request(rid, n, **sp):
    """A P-side request: compute the prompt, sample one token, hand the blocks to D."""
    return Request(
        rid,
        list(range(n)),
        SamplingParams(max_tokens=16, **sp),
        kv_transfer_params={"do_remote_decode": True},
    )


def make(connector=None, **kw):
    kw.setdefault("block_size", BS)
    kw.setdefault("num_blocks", NUM_BLOCKS)
    kw.setdefault("budget", 2048)
    return make_scheduler(connector, **kw)


def hashed(sched, rid):
    return [b.block_hash is not None for b in sched.kv_cache_manager.get_blocks(rid)]


# ---- D side: remote prefill -------------------------------------------------------------
@pytest.mark.parametrize("recv_delay", [0, 2])
def test_remote_prefill_holds_the_external_count_then_schedules_one_token(recv_delay):
    n = int(BS * 2.5)  # 40 tokens: two full blocks and a partial one
    conn = FakeKVConnector(recv_delay_steps=recv_delay)
    sched, runner, events = make(conn)
    sched.add_request(remote_prefill_request("x", n))
    so, outs = step(sched, runner)
    x = sched.get_request("x")
    assert so.total_num_scheduled_tokens == 0 and not outs
    assert x.status == RequestStatus.WAITING_FOR_REMOTE_KVS
    # 0.33.0 already counts the K/V on their way: N, not 0.
    assert x.num_computed_tokens == n
    assert sched.kv_cache_manager.get_block_ids("x") == [0, 1, 2]
    assert sched.kv_cache_manager.num_free_blocks == NUM_BLOCKS - 3
    assert hashed(sched, "x") == [False, False, False]  # nothing cached before it lands
    assert list(sched.skipped_waiting) == [x] and not sched.waiting and not sched.running
    for _ in range(recv_delay):
        so, _ = step(sched, runner)
        assert so.total_num_scheduled_tokens == 0 and x.num_computed_tokens == n

    so, outs = step(sched, runner)  # received: N - 1 computed, the last token scheduled
    assert so.num_scheduled_tokens == {"x": 1}
    assert so.scheduled_new_reqs[0].num_computed_tokens == n - 1
    assert so.scheduled_new_reqs[0].block_ids == [0, 1, 2]
    assert hashed(sched, "x") == [True, True, False]
    assert outs[0].new_token_ids == [1] and x.status == RequestStatus.RUNNING
    while sched.has_requests():
        step(sched, runner)
    # The partial block (no hash) goes to the front, the cached ones to the back, tail first.
    assert free_queue_ids(sched) == [2] + list(range(3, NUM_BLOCKS)) + [1, 0]
    assert all_free(sched)


def test_remote_prefill_of_whole_blocks_caches_every_block():
    n = 2 * BS
    sched, runner, _ = make(FakeKVConnector())
    sched.add_request(remote_prefill_request("x", n))
    step(sched, runner)
    so, _ = step(sched, runner)
    assert so.scheduled_new_reqs[0].num_computed_tokens == n - 1
    # Cached at N (before the one is subtracted), so the last full block is cached too.
    assert hashed(sched, "x") == [True, True]
    assert sched.kv_cache_manager.num_cached_block["x"] == 2


def test_remote_prefill_blocks_are_not_hit_before_they_land():
    n = 3 * BS
    conn = FakeKVConnector(recv_delay_steps=3)
    sched, runner, events = make(conn)
    sched.add_request(remote_prefill_request("x", n))
    step(sched, runner)
    sched.add_request(req("local", n, max_tokens=1))  # the same prompt, computed here
    so, _ = step(sched, runner)
    assert so.num_scheduled_tokens == {"local": n}
    assert not events_of(events, "prefix_hit")
    assert sched.get_request("x").status == RequestStatus.WAITING_FOR_REMOTE_KVS


def test_remote_prefill_after_a_local_prefix_hit_loads_only_the_rest():
    n = int(BS * 2.5)
    sched, runner, events = make(FakeKVConnector(recv_delay_steps=1))
    sched.add_request(req("warm", 2 * BS + 1, max_tokens=1))
    step(sched, runner)  # caches blocks 0 and 1 (32 tokens); block 2 held one token
    assert free_queue_ids(sched)[0] == 2  # the freed partial block comes out first
    sched.add_request(remote_prefill_request("x", n))
    step(sched, runner)
    x = sched.get_request("x")
    wait = events_of(events, "waiting_for_remote_kvs")[0]
    assert (wait["num_local_tokens"], wait["num_external_tokens"]) == (2 * BS, n - 2 * BS)
    assert x.num_computed_tokens == n and wait["block_ids"] == [0, 1, 2]
    assert [r.local_block_ids for r in sched.connector.loaded] == [[0, 1, 2]]


def test_remote_prefill_that_does_not_fit_waits_without_blocks():
    sched, runner, _ = make(FakeKVConnector(), num_blocks=4)
    sched.add_request(req("big", 3 * BS, max_tokens=4))
    step(sched, runner)  # holds 3 of the 4 blocks
    sched.add_request(remote_prefill_request("x", 2 * BS))
    so, _ = step(sched, runner)
    x = sched.get_request("x")
    assert x.status == RequestStatus.WAITING and x.num_computed_tokens == 0
    assert sched.kv_cache_manager.get_block_ids("x") == [] and list(sched.waiting) == [x]
    while sched.has_requests():
        step(sched, runner)
    assert all_free(sched)


# ---- P side: remote decode --------------------------------------------------------------
@pytest.mark.parametrize("stop", [False, True])
def test_remote_decode_holds_blocks_until_sent_then_frees_them(stop):
    n = int(BS * 2.5)
    conn = FakeKVConnector(engine_id="P", send_delay_steps=1)
    sched, runner, events = make(conn)
    sched.add_request(remote_decode_request("x", n, stop_token_ids=[1] if stop else []))
    so, (out,) = step(sched, runner)
    assert so.num_scheduled_tokens == {"x": n}
    assert out.finish_reason == ("stop" if stop else "length")
    assert out.kv_transfer_params["remote_block_ids"] == [0, 1, 2]
    assert sched.kv_cache_manager.num_free_blocks == NUM_BLOCKS - 3
    assert not sched.has_unfinished_requests() and sched.has_requests()
    # An abort of a request already finished changes nothing: the send still owns its blocks.
    assert sched.finish_requests("x", RequestStatus.FINISHED_ABORTED) == []
    while sched.has_requests():
        step(sched, runner)
    assert free_queue_ids(sched) == [2] + list(range(3, NUM_BLOCKS)) + [1, 0]
    assert all_free(sched)


# ---- failed KV loads ---------------------------------------------------------------------
@pytest.mark.parametrize("how", ["request", "blocks"])
def test_failed_load_ends_the_request_with_an_error_by_default(how):
    n = int(BS * 2.5)
    if how == "request":
        conn = FakeKVConnector(fail_recv_req_ids={"x"})
    else:
        conn = FakeKVConnector(invalid_block_from={"x": 1})
    sched, runner, events = make(conn)
    assert sched.kv_transfer_config.kv_load_failure_policy == "fail"
    sched.add_request(remote_prefill_request("x", n))
    so, outs = step(sched, runner)
    assert [(o.req_id, o.new_token_ids, o.finish_reason) for o in outs] == [("x", [], "error")]
    assert conn.finished == [("x", RequestStatus.FINISHED_ERROR)]
    assert sched.get_request("x") is None and not sched.has_unfinished_requests()
    assert sched.finished_req_ids == {"x"}  # the runner hears of it at the next step
    assert not events_of(events, "remote_kv_failed")
    # Nothing was cached: all three blocks are reused first, tail first.
    assert free_queue_ids(sched)[:3] == [2, 1, 0] and all_free(sched)


@pytest.mark.parametrize("policy", ["fail", "recompute"])
@pytest.mark.parametrize("how,first_bad", [("request", None), ("blocks", 1), ("blocks", 2)])
def test_failed_load_trims_the_count_as_upstream(policy, how, first_bad):
    # vLLM 0.33.0: a block-level failure trims num_computed_tokens to the valid prefix
    # under either policy (_update_requests_with_invalid_blocks); a failed receive as a
    # whole resets it only under "recompute" (_handle_failed_recving).
    n = int(BS * 2.5)
    if how == "request":
        conn = FakeKVConnector(fail_recv_req_ids={"x"})
    else:
        conn = FakeKVConnector(invalid_block_from={"x": first_bad})
    sched, runner, _ = make(conn, kv_load_failure_policy=policy)
    r = remote_prefill_request("x", n)
    sched.add_request(r)
    step(sched, runner)
    if how == "blocks":
        expect = first_bad * BS
    else:
        expect = 0 if policy == "recompute" else n
    assert r.num_computed_tokens == expect


def test_failed_load_under_recompute_computes_the_prompt_locally():
    n = int(BS * 2.5)
    conn = FakeKVConnector(fail_recv_req_ids={"x"})
    sched, runner, events = make(conn, kv_load_failure_policy="recompute")
    sched.add_request(remote_prefill_request("x", n))
    step(sched, runner)
    so, outs = step(sched, runner)
    assert so.num_scheduled_tokens == {"x": n}
    assert so.scheduled_new_reqs[0].num_computed_tokens == 0
    # Its blocks were freed (tail first, to the front) and taken again in the same order.
    assert so.scheduled_new_reqs[0].block_ids == [2, 1, 0]
    assert outs[0].new_token_ids == [1]


# ---- admission ---------------------------------------------------------------------------
@pytest.mark.parametrize("reserve", [True, False])
def test_admission_needs_the_whole_prompt_to_fit(reserve):
    # 8 blocks of 4. a (12 tokens) runs; b (24 tokens = 6 blocks) arrives with 4 free.
    sched, runner, events = make(block_size=4, num_blocks=8, budget=8, reserve_full_isl=reserve)
    sched.add_request(req("a", 12, max_tokens=10))
    step(sched, runner)
    step(sched, runner)
    sched.add_request(req("b", 24, max_tokens=1, start=100))
    so, _ = step(sched, runner)  # a decodes one token; 7 left of the budget
    assert sched.kv_cache_manager.num_free_blocks == (4 if reserve else 2)
    if reserve:
        assert so.num_scheduled_tokens == {"a": 1} and sched.get_request("b") in sched.waiting
    else:  # an older vLLM's rule: the first chunk fits, so b is admitted
        assert so.num_scheduled_tokens == {"a": 1, "b": 7}
    while sched.has_requests():
        step(sched, runner)
    assert bool(events_of(events, "preempt")) != reserve
    assert all_free(sched)


def test_async_load_keeps_back_what_inflight_prefills_still_need():
    # 10 blocks of 4. With two requests the cap of 4 tokens a step applies: "long" (24
    # tokens, 6 blocks) is admitted with 1 block and still needs 5. "x" would load 20
    # tokens (5 blocks): 9 are free, but 9 - 5 reserved < 5, so it is not admitted.
    conn = FakeKVConnector()
    sched, runner, events = make(conn, block_size=4, num_blocks=10, threshold=4)
    sched.add_request(req("long", 24, max_tokens=1, start=100))
    x = remote_prefill_request("x", 20)
    x.kv_transfer_params["remote_block_ids"] = [0, 1, 2, 3, 4]
    sched.add_request(x)
    so, _ = step(sched, runner)
    assert so.num_scheduled_tokens == {"long": 4}
    assert sched.kv_cache_manager.num_free_blocks == 9
    assert sched._inflight_prefill_reserved_blocks() == 5
    assert x.status == RequestStatus.WAITING and not events_of(events, "waiting_for_remote_kvs")
    admitted_at = None
    for i in range(2, 12):
        step(sched, runner)
        if x.status == RequestStatus.WAITING_FOR_REMOTE_KVS or x.status.name == "RUNNING":
            admitted_at = i
            break
    # long's prefill ends at step 6 and it finishes there; only then does x fit.
    assert admitted_at == 7
    while sched.has_requests():
        step(sched, runner)
    assert all_free(sched)


# ---- limits ------------------------------------------------------------------------------
def test_prompt_must_leave_room_for_one_output_token():
    sched, runner, _ = make(block_size=4, max_model_len=16, budget=4)
    with pytest.raises(ValueError, match="16 tokens: expected fewer than max_model_len=16"):
        sched.add_request(req("a", 16))
    sched.add_request(req("b", 15, max_tokens=8))
    sizes, outs = [], []
    while sched.has_requests():
        so, out = step(sched, runner)
        sizes.append(so.num_scheduled_tokens.get("b", 0))
        outs += out
    # 15 prompt tokens in chunks, one token sampled at position 15: max_model_len reached.
    assert sizes == [4, 4, 4, 3, 0] and [o.finish_reason for o in outs] == ["length"]
    assert all_free(sched)


def test_prefix_cache_stats_count_resumed_lookups_apart():
    sched, runner, _ = make(block_size=4, num_blocks=5, budget=64)
    sched.add_request(req("a", 8, max_tokens=6))
    sched.add_request(req("b", 8, max_tokens=6, start=50))
    while sched.has_requests():
        step(sched, runner)
    stats = sched.kv_cache_manager.prefix_cache_stats
    assert (stats.requests, stats.queries, stats.hits) == (2, 16, 0)
    assert stats.preempted_requests >= 1
    assert stats.preempted_queries > 0 and stats.preempted_hits > 0


def test_removing_the_minus_one_names_the_real_cause(monkeypatch):
    # What the learner sees if the "- 1" after a receive is taken out: a clear error about
    # the resumed request, not about the connector.
    from pdlab.engine.core.sched.scheduler import Scheduler

    def no_minus_one(self, request):
        rid = request.request_id
        if rid not in self.finished_recving_kv_req_ids:
            return False
        self.finished_recving_kv_req_ids.remove(rid)
        self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)
        return True

    monkeypatch.setattr(Scheduler, "_update_waiting_for_remote_kv", no_minus_one)
    sched, runner, _ = make(FakeKVConnector())
    sched.add_request(remote_prefill_request("x", 20))
    step(sched, runner)
    with pytest.raises(RuntimeError, match=r"num_computed_tokens=20 = num_tokens: nothing"):
        sched.schedule()


def test_kv_transfer_config_and_admission_switch_are_validated():
    from pdlab.engine.config import CacheConfig, KVTransferConfig, SchedulerConfig
    from pdlab.engine.core.sched.scheduler import Scheduler

    with pytest.raises(ValueError, match=r"kv_load_failure_policy='retry' is invalid: expected"):
        KVTransferConfig(kv_load_failure_policy="retry")
    with pytest.raises(ValueError, match=r"scheduler_reserve_full_isl=1 is invalid: expected"):
        SchedulerConfig(scheduler_reserve_full_isl=1)
    with pytest.raises(ValueError, match=r"kv_transfer_config='fail' is invalid"):
        Scheduler(SchedulerConfig(), CacheConfig(), 64, kv_transfer_config="fail")
    assert KVTransferConfig().kv_load_failure_policy == "fail"
    assert SchedulerConfig().scheduler_reserve_full_isl is True
