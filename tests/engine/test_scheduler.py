"""Scheduler without P/D (pdlab/engine/core/sched/scheduler.py): budget, chunking,
preemption, stops."""

import pytest
from conftest import all_free, make_scheduler, req, step

from pdlab.engine.core.sched.output import ModelRunnerOutput
from pdlab.engine.request import Request, RequestStatus, SamplingParams


def make(**kw):
    return make_scheduler(**kw)


def test_chunked_prefill_under_a_small_budget():
    sched, runner, _ = make(budget=8)
    sched.add_request(req("a", 20, max_tokens=2))
    chunks, sampled = [], []
    while sched.has_requests():
        so, outs = step(sched, runner)
        chunks.append(so.num_scheduled_tokens.get("a"))
        sampled.append([o.new_token_ids for o in outs])
    # 8 + 8 + 4 prompt tokens, then one decode step; no token until the prompt is done.
    assert chunks == [8, 8, 4, 1, None]
    assert sampled == [[], [], [[1]], [[1]], []]
    assert all_free(sched)


def test_first_output_carries_old_num_computed_and_new_blocks():
    sched, runner, _ = make(budget=8, block_size=4)
    sched.add_request(req("a", 10))
    so, _ = step(sched, runner)
    new = so.scheduled_new_reqs[0]
    assert (new.req_id, new.num_computed_tokens, new.block_ids) == ("a", 0, [0, 1])
    assert new.prompt_token_ids == list(range(10)) and new.all_token_ids == list(range(10))
    so, _ = step(sched, runner)
    c = so.scheduled_cached_reqs
    assert c.req_ids == ["a"] and c.num_computed_tokens == [8] and c.new_block_ids == [[2]]
    assert c.new_token_ids == [[8, 9]] and c.resumed_from_preemption == [False]
    assert sched.get_request("a").num_computed_tokens == 10


def test_long_prefill_token_threshold_caps_each_chunk_while_others_wait():
    sched, runner, _ = make(budget=100, threshold=3)
    sched.add_request(req("a", 10, max_tokens=1))
    sched.add_request(req("b", 4, max_tokens=1, start=50))
    sizes = []
    while sched.has_unfinished_requests():
        so, _ = step(sched, runner)
        sizes.append(so.num_scheduled_tokens)
    # Capped while both are there; once b has finished, a alone takes all it needs.
    assert sizes == [{"a": 3, "b": 3}, {"a": 3, "b": 1}, {"a": 4}]


def test_long_prefill_token_threshold_spares_a_lone_request():
    sched, runner, _ = make(budget=100, threshold=3)
    sched.add_request(req("a", 10, max_tokens=2))
    so, _ = step(sched, runner)
    assert so.num_scheduled_tokens == {"a": 10}


def test_running_first_then_waiting_within_the_budget():
    sched, runner, _ = make(budget=10)
    sched.add_request(req("a", 6))
    sched.add_request(req("b", 9, start=100))
    so, _ = step(sched, runner)
    assert so.num_scheduled_tokens == {"a": 6, "b": 4}
    so, _ = step(sched, runner)
    assert so.num_scheduled_tokens == {"a": 1, "b": 5}  # a decodes first, b finishes prompt
    assert list(so.num_scheduled_tokens) == ["a", "b"]


def test_max_num_seqs_limits_running_requests():
    sched, runner, _ = make(max_seqs=2)
    for i in range(3):
        sched.add_request(req(f"r{i}", 4, max_tokens=2, start=10 * i))
    so, _ = step(sched, runner)
    assert set(so.num_scheduled_tokens) == {"r0", "r1"}
    assert [r.request_id for r in sched.waiting] == ["r2"]
    step(sched, runner)  # r0 and r1 finish (2 tokens each)
    so, _ = step(sched, runner)
    assert set(so.num_scheduled_tokens) == {"r2"}
    assert so.finished_req_ids == {"r0", "r1"}


def test_prefix_hit_on_admission():
    sched, runner, events = make(block_size=4)
    sched.add_request(req("a", 10, max_tokens=1))
    step(sched, runner)
    sched.add_request(req("b", 10, max_tokens=1))
    so, _ = step(sched, runner)
    assert so.scheduled_new_reqs[0].num_computed_tokens == 8
    assert so.num_scheduled_tokens == {"b": 2}
    assert sched.get_request("b") is None  # finished and freed
    admit = [f for k, f in events if k == "admit" and f["req_id"] == "b"][0]
    assert admit["num_computed_tokens"] == 8 and admit["num_cached_tokens"] == 8
    hit = [f for k, f in events if k == "prefix_hit"][0]
    assert hit["num_hit_tokens"] == 8 and hit["block_ids"] == [0, 1]
    stats = sched.kv_cache_manager.prefix_cache_stats
    assert (stats.requests, stats.queries, stats.hits) == (2, 20, 8)


def test_preemption_keeps_outputs_and_recomputes():
    # 8 blocks of 2 tokens; a and b each grow to 4 + 8 - 1 = 11 tokens (6 blocks).
    tokens = iter(range(1000, 2000))
    sched, runner, events = make(block_size=2, num_blocks=8, sample=lambda rid, pos: next(tokens))
    sched.add_request(req("a", 4, max_tokens=8))
    sched.add_request(req("b", 4, max_tokens=8, start=50))
    preempted_at = None
    outputs = {"a": [], "b": []}
    steps = 0
    while sched.has_requests():
        so, outs = step(sched, runner)
        steps += 1
        for o in outs:
            outputs[o.req_id] += o.new_token_ids
        if so.preempted_req_ids and preempted_at is None:
            preempted_at = steps
            assert so.preempted_req_ids == {"b"}  # the most recently admitted
            b = sched.get_request("b")
            assert b.status == RequestStatus.PREEMPTED and b.num_computed_tokens == 0
            assert b.num_preemptions == 1 and sched.waiting[0] is b
            assert b.output_token_ids == outputs["b"] and len(outputs["b"]) > 0
            assert "b" not in so.num_scheduled_tokens and not so.scheduled_new_reqs
            kept = list(b.all_token_ids)
        elif preempted_at is not None and "b" in {n.req_id for n in so.scheduled_new_reqs}:
            new = [n for n in so.scheduled_new_reqs if n.req_id == "b"][0]
            # Resumed whole: prompt and outputs so far, recomputed from what is cached.
            assert new.all_token_ids == kept and new.prompt_token_ids == kept[:4]
            preempted_at = -1
    assert preempted_at == -1
    assert len(outputs["a"]) == 8 and len(outputs["b"]) == 8
    assert len(set(outputs["a"] + outputs["b"])) == 16  # no token lost or repeated
    assert [k for k, _ in events].count("preempt") >= 1
    assert all_free(sched)


def test_tight_pool_preempts_until_everyone_finishes():
    # Each request alone needs the whole pool (2 + 10 - 1 = 11 tokens, 6 blocks of 2), so
    # they take turns: whoever comes last in the running list is preempted, possibly the
    # request being scheduled itself, and nothing is scheduled without its blocks.
    sched, runner, events = make(block_size=2, num_blocks=6, budget=4)
    for i in range(3):
        sched.add_request(req(f"r{i}", 2, max_tokens=10, start=20 * i))
    n = 0
    while sched.has_requests():
        so, outs = step(sched, runner)
        for rid in so.num_scheduled_tokens:
            r = sched.get_request(rid)
            assert r is None or len(sched.kv_cache_manager.get_block_ids(rid)) * 2 >= (
                r.num_computed_tokens
            )
        n += 1
        assert n < 200
    assert [k for k, _ in events].count("preempt") >= 2
    assert [f["num_output_tokens"] for k, f in events if k == "finish"] == [10, 10, 10]
    assert all_free(sched)


@pytest.mark.parametrize("stop_at", [1, 3])
def test_stop_token_finishes_stopped(stop_at):
    sched, runner, events = make(sample=lambda rid, pos: 7 if pos == 5 + stop_at - 1 else 1)
    sched.add_request(req("a", 5, max_tokens=10, stop_token_ids=[7]))
    outs = []
    while sched.has_requests():
        outs += step(sched, runner)[1]
    assert outs[-1].finish_reason == "stop" and outs[-1].new_token_ids == [7]
    assert len(outs) == stop_at and all(o.finish_reason is None for o in outs[:-1])
    fin = [f for k, f in events if k == "finish"][0]
    assert fin["status"] == "FINISHED_STOPPED" and fin["delay_free"] is False
    assert all_free(sched)


def test_max_tokens_and_max_model_len_cap_length():
    sched, runner, _ = make(max_model_len=12)
    sched.add_request(req("a", 5, max_tokens=3))
    sched.add_request(req("b", 10, max_tokens=50, start=40))
    done = {}
    while sched.has_requests():
        for o in step(sched, runner)[1]:
            done.setdefault(o.req_id, []).append(o)
    assert [len(done["a"]), done["a"][-1].finish_reason] == [3, "length"]
    # b stops when prompt + outputs reach max_model_len = 12: two outputs.
    assert [len(done["b"]), done["b"][-1].finish_reason] == [2, "length"]


def test_abort_running_and_waiting():
    sched, runner, events = make(max_seqs=1)
    sched.add_request(req("a", 6, max_tokens=50))
    sched.add_request(req("b", 6, max_tokens=50, start=30))
    step(sched, runner)
    assert sched.finish_requests(["a", "b", "nope"], RequestStatus.FINISHED_ABORTED) == ["a", "b"]
    assert sched.finish_requests("a", RequestStatus.FINISHED_ABORTED) == []
    assert not sched.has_unfinished_requests() and all_free(sched)
    so = sched.schedule()
    assert so.finished_req_ids == {"a", "b"} and so.total_num_scheduled_tokens == 0
    assert not sched.has_requests()
    assert [f["status"] for k, f in events if k == "finish"] == ["FINISHED_ABORTED"] * 2
    with pytest.raises(ValueError, match="finished_status=.*FINISHED_"):
        sched.finish_requests("a", RequestStatus.RUNNING)


def test_abort_between_schedule_and_update_is_ignored():
    sched, runner, _ = make()
    sched.add_request(req("a", 4))
    so = sched.schedule()
    out = runner.execute_model(so)
    sched.finish_requests("a", RequestStatus.FINISHED_ABORTED)
    assert sched.update_from_output(so, out) == [] and all_free(sched)


def test_bad_inputs_raise_and_leave_the_scheduler_usable():
    sched, runner, _ = make(block_size=4, num_blocks=4, max_model_len=20)
    sched.add_request(req("ok", 4, max_tokens=2))
    with pytest.raises(ValueError, match="request_id='ok'.*unique"):
        sched.add_request(req("ok", 3))
    with pytest.raises(ValueError, match="prompt_token_ids has 21 tokens.*max_model_len=20"):
        sched.add_request(req("long", 21))
    with pytest.raises(ValueError, match="too small.*need 5 blocks.*num_blocks=4"):
        sched.add_request(req("big", 10, max_tokens=8))
    with pytest.raises(ValueError, match="request=.*Request"):
        sched.add_request("not a request")
    with pytest.raises(ValueError, match="do_remote_prefill.*KV connector"):
        sched.add_request(
            Request(
                "pd",
                [1, 2],
                SamplingParams(max_tokens=2),
                kv_transfer_params={
                    "do_remote_prefill": True,
                    "remote_block_ids": [0],
                    "remote_engine_id": "p",
                },
            )
        )
    used = req("used", 3)
    used.num_computed_tokens = 2
    with pytest.raises(ValueError, match="fresh Request"):
        sched.add_request(used)
    assert list(sched.requests) == ["ok"]
    while sched.has_requests():
        step(sched, runner)
    assert all_free(sched)


def test_bad_runner_output_is_refused_before_any_change():
    sched, runner, _ = make(budget=4)
    sched.add_request(req("a", 6))
    sched.add_request(req("b", 6, start=10))
    so = sched.schedule()  # 4 of a's 6 prompt tokens: no token expected
    with pytest.raises(ValueError, match="one per request"):
        ModelRunnerOutput(["a"], [])
    [out] = sched.update_from_output(so, ModelRunnerOutput(["a"], [[5]]))
    assert out.finish_reason == "error"
    assert "sampled_token_ids for 'a' is [5]: expected [] (its prompt" in out.error
    so = sched.schedule()  # b's first 4
    sched.update_from_output(so, ModelRunnerOutput(["b"], [[]]))
    so = sched.schedule()  # b's last 2 prompt tokens: one token due
    [out] = sched.update_from_output(so, ModelRunnerOutput(["b"], [[]]))
    assert "expected one token" in out.error
    assert not sched.requests and all_free(sched)


def test_empty_schedule_and_counts():
    sched, runner, _ = make()
    so, outs = step(sched, runner)
    assert so.total_num_scheduled_tokens == 0 and outs == [] and so.finished_req_ids == set()
    sched.add_request(req("a", 3))
    assert sched.get_num_unfinished_requests() == 1 and sched.has_unfinished_requests()
    assert sched.get_request("a").status == RequestStatus.WAITING
    assert sched.get_request("zzz") is None


# ---- a runner output the scheduler refuses (issue 42, item 3) ----------------------------
@pytest.mark.parametrize(
    "bad",
    [[], [1, 2], None],
    ids=["no-token", "too-many", "no-entry"],
)
def test_a_refused_row_is_finished_with_an_error_and_frees_its_blocks(bad):
    sched, runner, events = make()
    sched.add_request(req("a", 6))
    sched.add_request(req("b", 5, start=20))
    so = sched.schedule()
    good = runner.execute_model(so)
    rows = {r: t for r, t in zip(good.req_ids, good.sampled_token_ids)}
    if bad is None:
        del rows["a"]
    else:
        rows["a"] = bad
    outs = sched.update_from_output(so, ModelRunnerOutput(list(rows), list(rows.values())))
    by_id = {o.req_id: o for o in outs}
    assert by_id["a"].finish_reason == "error" and by_id["a"].new_token_ids == []
    assert "'a'" in by_id["a"].error and "\n" not in by_id["a"].error
    assert sched.get_request("a") is None  # finished, its blocks back in the pool
    assert sched.kv_cache_manager.get_block_ids("a") == []
    assert ("request_error", {"req_id": "a", "error": by_id["a"].error}) in events
    assert by_id["b"].new_token_ids == rows["b"]  # the other row carried on
    while sched.has_requests():
        step(sched, runner)
    assert all_free(sched)


@pytest.mark.parametrize("token", [10**9, -1])
def test_a_sampled_id_outside_the_vocabulary_is_refused_where_it_appears(token):
    from pdlab.engine.config import CacheConfig, SchedulerConfig
    from pdlab.engine.core.sched.scheduler import Scheduler

    sched = Scheduler(
        SchedulerConfig(), CacheConfig(block_size=4, num_blocks=16), 64, vocab_size=100
    )
    sched.add_request(req("a", 6))
    so = sched.schedule()
    [out] = sched.update_from_output(so, ModelRunnerOutput(["a"], [[token]]))
    assert out.finish_reason == "error" and out.new_token_ids == []
    assert "0 to 99" in out.error and "vocab_size=100" in out.error
    assert sched.get_request("a") is None and sched.kv_cache_manager.num_free_blocks == 16
