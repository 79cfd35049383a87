"""Scheduler with a KV connector: the P and D sides of a prefill/decode pair."""

import pytest
from conftest import all_free, events_of, make_scheduler, step
from doubles.fake_connector import FakeKVConnector

from pdlab.engine.config import CacheConfig, SchedulerConfig
from pdlab.engine.core.sched.scheduler import Scheduler
from pdlab.engine.distributed.kv_transfer.base import validate_kv_transfer_params
from pdlab.engine.request import Request, RequestStatus, SamplingParams

B = 4


def make(connector, num_blocks=32, budget=64, caching=True, **kw):
    return make_scheduler(connector, num_blocks=num_blocks, budget=budget, caching=caching, **kw)


def d_params(n_blocks=2):
    return {
        "do_remote_prefill": True,
        "do_remote_decode": False,
        "remote_block_ids": list(range(n_blocks)),
        "remote_engine_id": "P",
        "remote_host": "localhost",
        "remote_port": 5600,
        "remote_request_id": "x",
    }


def d_request(rid, n, max_tokens=3, start=0):
    return Request(
        rid,
        [start + i for i in range(n)],
        SamplingParams(max_tokens=max_tokens),
        kv_transfer_params=d_params(),
    )


@pytest.mark.parametrize("n", [3, 8, 9, 1, 4, 5])  # below a block, k blocks, k blocks + 1
def test_decode_side_recomputes_exactly_the_last_prompt_token(n):
    conn = FakeKVConnector(recv_delay_steps=1)
    sched, runner, events = make(conn)
    sched.add_request(d_request("x", n))
    so, _ = step(sched, runner)
    x = sched.get_request("x")
    # Blocks for the whole prompt, not yet hashed, nothing scheduled.
    assert so.total_num_scheduled_tokens == 0 and x.status == RequestStatus.WAITING_FOR_REMOTE_KVS
    block_ids = sched.kv_cache_manager.get_block_ids("x")
    assert len(block_ids) == -(-n // B)
    assert all(b.block_hash is None for b in sched.kv_cache_manager.get_blocks("x"))
    wait = events_of(events, "waiting_for_remote_kvs")[0]
    assert wait["num_external_tokens"] == n and wait["block_ids"] == block_ids
    assert conn.loaded[0].local_block_ids == block_ids
    assert conn.loaded[0].remote_block_ids == [0, 1]

    so, _ = step(sched, runner)  # the receive completes during this step
    assert so.total_num_scheduled_tokens == 0
    so, outs = step(sched, runner)  # now it runs: one token over N - 1 cached
    assert so.num_scheduled_tokens == {"x": 1}
    new = so.scheduled_new_reqs[0]
    assert new.num_computed_tokens == n - 1 and new.block_ids == block_ids
    assert outs[0].new_token_ids == [1] and outs[0].num_cached_tokens == n - 1
    ready = events_of(events, "remote_kv_ready")[0]
    assert ready["num_computed_tokens_before_adjust"] == n
    assert ready["num_computed_tokens"] == n - 1 and ready["num_tokens"] == n
    assert ready["block_ids"] == block_ids
    # Once received, the full blocks are cached; a partial one never is.
    hashed = [b.block_hash is not None for b in sched.kv_cache_manager.get_blocks("x")]
    assert hashed == [i < n // B for i in range(len(block_ids))]
    while sched.has_requests():
        step(sched, runner)
    assert all_free(sched)


def test_decode_side_with_a_local_prefix_hit():
    conn = FakeKVConnector()
    sched, runner, events = make(conn)
    sched.add_request(Request("warm", list(range(8)) + [50, 51], SamplingParams(max_tokens=1)))
    step(sched, runner)  # caches blocks [0..3], [4..7]
    sched.add_request(d_request("x", 14))
    step(sched, runner)
    wait = events_of(events, "waiting_for_remote_kvs")[0]
    assert wait["num_local_tokens"] == 8 and wait["num_external_tokens"] == 6
    blocks = sched.kv_cache_manager.get_blocks("x")
    assert [b.block_hash is not None for b in blocks] == [True, True, False, False]
    so, _ = step(sched, runner)
    assert so.num_scheduled_tokens == {"x": 1}
    assert so.scheduled_new_reqs[0].num_computed_tokens == 13


def test_prefill_side_holds_blocks_until_sent():
    conn = FakeKVConnector(engine_id="P", send_delay_steps=2)
    sched, runner, events = make(conn)
    sched.add_request(
        Request(
            "x",
            list(range(10)),
            SamplingParams(max_tokens=8),
            kv_transfer_params={"do_remote_decode": True},
        )
    )
    so, outs = step(sched, runner)
    assert so.num_scheduled_tokens == {"x": 10}
    (out,) = outs
    assert out.finish_reason == "length" and out.new_token_ids == [1]
    p = out.kv_transfer_params
    assert p["do_remote_prefill"] is True and p["do_remote_decode"] is False
    assert p["remote_block_ids"] == [0, 1, 2] and p["remote_engine_id"] == "P"
    assert p["remote_request_id"] == "x" and "remote_host" in p and "remote_port" in p
    validate_kv_transfer_params(p)
    assert events_of(events, "finish")[0]["delay_free"] is True
    assert not sched.has_unfinished_requests() and sched.has_requests()
    held = []
    while sched.has_requests():
        held.append(sched.kv_cache_manager.get_block_ids("x"))
        step(sched, runner)
    # Sent in the step after it finished, reported 2 steps later, then freed.
    assert held == [[0, 1, 2]] * 3
    assert events_of(events, "free") == [{"req_id": "x", "block_ids": [0, 1, 2]}]
    assert all_free(sched) and not conn.timed_out


def test_prefill_side_frees_after_the_send_times_out():
    conn = FakeKVConnector(send_delay_steps=None, send_timeout_steps=3)
    sched, runner, _ = make(conn)
    sched.add_request(Request("x", [1, 2, 3], kv_transfer_params={"do_remote_decode": True}))
    steps = 0
    while sched.has_requests():
        step(sched, runner)
        steps += 1
    assert conn.timed_out == {"x"} and steps == 5 and all_free(sched)


@pytest.mark.parametrize("stop", [True, False])
def test_prefill_side_hands_off_after_a_stop_token_as_after_the_length_cap(stop):
    # NixlConnector hands P's blocks to D for FINISHED_STOPPED as for FINISHED_LENGTH_CAPPED.
    conn = FakeKVConnector(engine_id="P")
    sched, runner, events = make(conn)
    sp = SamplingParams(stop_token_ids=[1] if stop else [])
    sched.add_request(
        Request("x", [1, 2, 3, 4, 5], sp, kv_transfer_params={"do_remote_decode": True})
    )
    _, (out,) = step(sched, runner)
    assert out.finish_reason == ("stop" if stop else "length")
    assert out.kv_transfer_params["remote_block_ids"] == [0, 1]
    assert events_of(events, "finish")[0]["delay_free"] is True
    assert sched.kv_cache_manager.get_block_ids("x") == [0, 1]
    while sched.has_requests():
        step(sched, runner)
    assert all_free(sched)


def test_prefill_side_aborted_hands_off_nothing():
    conn = FakeKVConnector(engine_id="P")
    sched, runner, _ = make(conn)
    sched.add_request(Request("x", list(range(9)), kv_transfer_params={"do_remote_decode": True}))
    sched.schedule()
    assert sched.finish_requests("x", RequestStatus.FINISHED_ABORTED) == ["x"]
    assert all_free(sched) and sched.get_request("x") is None and not conn._reqs_need_send


def test_abort_while_waiting_for_kvs_frees_blocks_once_the_receive_ends():
    conn = FakeKVConnector(recv_delay_steps=2)
    sched, runner, events = make(conn)
    sched.add_request(d_request("x", 9))
    step(sched, runner)
    assert sched.get_request("x").status == RequestStatus.WAITING_FOR_REMOTE_KVS
    assert sched.finish_requests("x", RequestStatus.FINISHED_ABORTED) == ["x"]
    assert conn.finished == [("x", RequestStatus.FINISHED_ABORTED)]
    assert not sched.has_unfinished_requests()
    # The worker may still be writing into the blocks: held until it reports the receive.
    assert sched.kv_cache_manager.get_block_ids("x") == [0, 1, 2]
    assert events_of(events, "finish")[0]["delay_free"] is True
    while sched.has_requests():
        step(sched, runner)
    assert all_free(sched)
    assert events_of(events, "free") == [{"req_id": "x", "block_ids": [0, 1, 2]}]


def test_abort_after_the_receive_finished_frees_at_once():
    conn = FakeKVConnector(recv_delay_steps=0)
    sched, runner, _ = make(conn)
    sched.add_request(d_request("x", 9))
    step(sched, runner)  # allocated, receive reported done
    assert "x" in sched.finished_recving_kv_req_ids
    sched.finish_requests("x", RequestStatus.FINISHED_ABORTED)
    assert all_free(sched) and sched.get_request("x") is None
    assert not sched.finished_recving_kv_req_ids


def test_failed_receive_falls_back_to_local_recompute():
    conn = FakeKVConnector(fail_recv_req_ids={"x"})
    sched, runner, events = make(conn, kv_load_failure_policy="recompute")
    sched.add_request(d_request("x", 9))
    step(sched, runner)
    so, outs = step(sched, runner)
    failed = events_of(events, "remote_kv_failed")[0]
    assert failed["num_computed_tokens"] == 0 and failed["block_ids"] == [0, 1, 2]
    # The whole prompt is computed locally; the connector is not asked to load again.
    assert so.num_scheduled_tokens == {"x": 9}
    assert so.scheduled_new_reqs[0].num_computed_tokens == 0
    assert outs[0].new_token_ids == [1] and len(conn.loaded) == 1
    while sched.has_requests():
        step(sched, runner)
    assert all_free(sched)


def test_partly_failed_receive_keeps_the_blocks_before_the_first_bad_one():
    conn = FakeKVConnector(invalid_block_from={"x": 1})
    sched, runner, events = make(conn, kv_load_failure_policy="recompute")
    sched.add_request(d_request("x", 10))
    step(sched, runner)
    so, _ = step(sched, runner)
    assert events_of(events, "remote_kv_failed")[0]["num_computed_tokens"] == 4
    assert so.num_scheduled_tokens == {"x": 6}
    assert so.scheduled_new_reqs[0].num_computed_tokens == 4
    assert so.scheduled_new_reqs[0].block_ids == [0, 1, 2]


def test_partly_failed_receive_under_fail_hands_on_only_the_blocks_before_the_bad_one():
    """Under "fail", as vLLM 0.33.0 (``_update_requests_with_invalid_blocks`` trims the
    count whatever the policy), the request keeps only the tokens before the first failed
    block before it ends with an error, so the connector is given those blocks only.
    tests/upstream found pdlab keeping all ten tokens here."""
    given = []

    class Recording(FakeKVConnector):
        def request_finished(self, request, block_ids):
            given.append((request.request_id, request.num_computed_tokens, list(block_ids)))
            return super().request_finished(request, block_ids)

    sched, runner, _ = make(Recording(invalid_block_from={"x": 1}))
    sched.add_request(d_request("x", 10))
    _, outs = step(sched, runner)
    assert [(o.req_id, o.finish_reason) for o in outs] == [("x", "error")]
    assert given == [("x", 4, [0])]


def test_synchronous_load_schedules_the_rest_at_once():
    conn = FakeKVConnector(load_async=False)
    sched, runner, events = make(conn)
    sched.add_request(d_request("x", 9))
    so, outs = step(sched, runner)
    assert so.num_scheduled_tokens == {"x": 1}
    assert so.scheduled_new_reqs[0].num_computed_tokens == 8
    assert sched.get_request("x").num_external_computed_tokens == 8
    assert conn.loaded[0].load_async is False and outs[0].new_token_ids == [1]
    assert not events_of(events, "waiting_for_remote_kvs")


def test_synchronous_load_must_leave_a_token():
    sched, runner, _ = make(FakeKVConnector(load_async=False, num_matched_tokens=9))
    sched.add_request(d_request("x", 9))
    with pytest.raises(RuntimeError, match="must leave the last token"):
        sched.schedule()


def test_connector_that_cannot_tell_yet_is_asked_again():
    class Undecided(FakeKVConnector):
        calls = 0

        def get_num_new_matched_tokens(self, request, num_computed_tokens):
            self.calls += 1
            if self.calls == 1:
                return None, False
            return super().get_num_new_matched_tokens(request, num_computed_tokens)

    conn = Undecided()
    sched, runner, _ = make(conn)
    sched.add_request(d_request("x", 5))
    sched.add_request(Request("y", [7, 7]))
    so, _ = step(sched, runner)
    assert so.num_scheduled_tokens == {"y": 2} and sched.waiting[0].request_id == "x"
    assert not sched.skipped_waiting
    step(sched, runner)
    assert sched.get_request("x").status == RequestStatus.WAITING_FOR_REMOTE_KVS


def test_ready_requests_keep_their_place_in_the_queue():
    conn = FakeKVConnector(recv_delay_steps=3)
    sched, runner, events = make(conn, budget=4)
    for rid in ("x1", "x2"):
        sched.add_request(d_request(rid, 5, start=10 * len(sched.requests)))
    sched.add_request(Request("y", list(range(20, 32)), SamplingParams(max_tokens=2)))
    sched.add_request(Request("z", list(range(40, 52)), SamplingParams(max_tokens=2)))
    for _ in range(3):
        step(sched, runner)
        # Requests passed over stay in arrival order, ahead of z (waiting for the budget).
        assert [r.request_id for r in sched.skipped_waiting] == ["x1", "x2"]
        assert [r.request_id for r in sched.waiting] == ["z"]
    while sched.has_requests():
        step(sched, runner)
    admitted = [f["req_id"] for f in events_of(events, "admit")]
    assert admitted.index("x1") < admitted.index("x2")


@pytest.mark.parametrize(
    "params, key",
    [
        ({"do_remote_prefill": "yes"}, "do_remote_prefill"),
        ({"do_remote_decode": 1}, "do_remote_decode"),
        ({"do_remote_prefill": True, "remote_engine_id": "P"}, "remote_block_ids"),
        (
            {"do_remote_prefill": True, "remote_block_ids": [], "remote_engine_id": "P"},
            "remote_block_ids",
        ),
        (
            {"do_remote_prefill": True, "remote_block_ids": [0, -1], "remote_engine_id": "P"},
            "remote_block_ids",
        ),
        (
            {"do_remote_prefill": True, "remote_block_ids": "0,1", "remote_engine_id": "P"},
            "remote_block_ids",
        ),
        ({"do_remote_prefill": True, "remote_block_ids": [0]}, "remote_engine_id"),
        (
            {
                "do_remote_prefill": True,
                "remote_block_ids": [0],
                "remote_engine_id": "P",
                "remote_port": "80",
            },
            "remote_port",
        ),
        (
            {
                "do_remote_prefill": True,
                "remote_block_ids": [0],
                "remote_engine_id": "P",
                "remote_host": 1,
            },
            "remote_host",
        ),
        (
            {
                "do_remote_prefill": True,
                "do_remote_decode": True,
                "remote_block_ids": [0],
                "remote_engine_id": "P",
            },
            "do_remote_decode",
        ),
    ],
)
def test_malformed_kv_transfer_params_are_rejected(params, key):
    sched, runner, _ = make(FakeKVConnector())
    with pytest.raises(ValueError, match=f"kv_transfer_params\\[{key!r}\\]=.*expected"):
        sched.add_request(Request("x", [1, 2], kv_transfer_params=params))
    assert not sched.requests and all_free(sched)


def test_connector_type_is_checked():
    with pytest.raises(ValueError, match="connector=.*KVConnectorBase"):
        Scheduler(SchedulerConfig(), CacheConfig(), 64, connector=object())


def test_pd_pair_whose_p_token_is_a_stop_token_still_hands_off():
    """End to end on the tiny model: P's one token is a stop token; D still reads P's blocks
    (no recompute of the prompt), samples that token itself and stops, as colocated."""
    from pdlab.disagg.pair import PDPair
    from pdlab.engine.config import ModelConfig
    from pdlab.engine.llm_engine import LLMEngine

    cfg, cache = ModelConfig.tiny(), CacheConfig(block_size=B, num_blocks=32)
    prompt = [(5 * i + 3) % 256 for i in range(2 * B + 3)]
    local = LLMEngine(cfg, cache, backend="torch")
    first = local.generate(prompt, SamplingParams(max_tokens=1))[0].output_token_ids[0]
    sp = SamplingParams(max_tokens=6, stop_token_ids=[first])
    colocated = LLMEngine(cfg, cache, backend="torch").generate(prompt, sp)[0]
    pair = PDPair(cfg, cache, backend="torch")
    out = pair.generate(prompt, sp)[0]
    assert (out.output_token_ids, out.finish_reason) == ([first], "stop")
    assert (colocated.output_token_ids, colocated.finish_reason) == ([first], "stop")
    t = pair.tracer
    assert t.first("finish", "P")["status"] == "FINISHED_STOPPED"
    assert t.first("kv_transfer", "D")["ok"]
    ready = t.first("remote_kv_ready", "D")
    assert (ready["num_computed_tokens_before_adjust"], ready["num_computed_tokens"]) == (
        len(prompt),
        len(prompt) - 1,
    )
    scheduled = [r for e in t.filter("step", "D") for r in e["scheduled"]]
    assert sum(r["num_scheduled_tokens"] for r in scheduled) == 1  # no prompt recompute
    for eng in (pair.prefill, pair.decode):
        assert eng.scheduler.kv_cache_manager.num_free_blocks == cache.num_blocks
