"""Speculative decoding in the scheduler (pdlab/engine/core/sched/scheduler.py, after vLLM 0.33.0's
scheduler.py): draft tokens scheduled and rolled back, the -1 placeholders that pad a newly
admitted one-token row to 1 + K (and the conditions under which they do not), blocks, stops
inside an accepted run, preemption, and D's first step through PDConnector. The fake runner
verifies greedily against a target that is a function of the position, so every run must
give the tokens of the same run without speculative decoding."""

import pytest
import torch
from conftest import all_free, events_of, make_scheduler, req, step

from pdlab.engine.config import CacheConfig, SchedulerConfig, SpeculativeConfig
from pdlab.engine.core.sched.output import DraftTokenIds
from pdlab.engine.core.sched.scheduler import Scheduler
from pdlab.engine.distributed.kv_transfer.pd_connector import PDConnector
from pdlab.engine.distributed.kv_transfer.transport import InProcessTransport
from pdlab.engine.math_utils import cdiv
from pdlab.engine.request import Request, RequestStatus, SamplingParams
from pdlab.engine.worker.fake_runner import FakeModelRunner, seeded_drafter
from pdlab.engine.worker.gpu.batch import gather_batch_req_state

B = 4


def target(rid, pos):
    return 100 + (pos * 7 + len(rid)) % 53


def spec(k, method="mtp"):
    return SpeculativeConfig(method, k)


def run_all(sched, runner, max_steps=500):
    """Step until done; returns each request's tokens and the SchedulerOutputs."""
    tokens, outs = {}, []
    for _ in range(max_steps):
        if not sched.has_requests():
            return tokens, outs
        so, result = step(sched, runner)
        outs.append(so)
        for o in result:
            tokens.setdefault(o.req_id, []).extend(o.new_token_ids)
    raise AssertionError("requests still unfinished")


def warm(sched, runner, n, rid="warm"):
    """Run a request with an n-token prompt to the end, so its full blocks are cached."""
    sched.add_request(req(rid, n, max_tokens=1))
    while sched.has_requests():
        step(sched, runner)


# ---- the config ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw, field",
    [
        ({"method": "eagle"}, "method"),
        ({"num_speculative_tokens": 0}, "num_speculative_tokens"),
        ({"num_speculative_tokens": 1.0}, "num_speculative_tokens"),
        ({"prompt_lookup_max": 3}, "prompt_lookup_max"),
        ({"method": "ngram", "prompt_lookup_min": 0}, "prompt_lookup_min"),
        ({"method": "ngram", "prompt_lookup_min": 4, "prompt_lookup_max": 2}, "prompt_lookup_min"),
    ],
)
def test_speculative_config_refuses_bad_values_in_one_line(kw, field):
    with pytest.raises(ValueError) as e:
        SpeculativeConfig(**kw)
    msg = str(e.value)
    assert "\n" not in msg and f"SpeculativeConfig.{field}=" in msg and "expected" in msg


def test_speculative_config_defaults_follow_upstream():
    assert SpeculativeConfig().method == "mtp"
    ngram = SpeculativeConfig("ngram", 2)
    assert (ngram.prompt_lookup_min, ngram.prompt_lookup_max) == (5, 5)
    assert SpeculativeConfig("ngram", prompt_lookup_max=3).prompt_lookup_min == 3
    assert SpeculativeConfig("mtp", 2).num_lookahead_tokens == 2
    assert ngram.num_lookahead_tokens == 0


@pytest.mark.parametrize(
    "kw, field",
    [({"threshold": 2}, "long_prefill_token_threshold"), ({"budget": 2}, "max_num_batched_tokens")],
)
def test_scheduler_refuses_a_budget_or_threshold_below_one_plus_k(kw, field):
    with pytest.raises(ValueError) as e:
        make_scheduler(speculative_config=spec(2), **kw)
    assert f"SchedulerConfig.{field}=2 is invalid" in str(e.value) and "\n" not in str(e.value)
    make_scheduler(speculative_config=spec(2), threshold=3, budget=3)  # 1 + K is enough


# ---- padding ---------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("method", ["mtp", "ngram"])
def test_a_fully_cached_prompt_is_padded_to_one_plus_k(k, method):
    sched, runner, events = make_scheduler(speculative_config=spec(k, method), sample=target)
    warm(sched, runner, 9)
    sched.add_request(req("hit", 9, max_tokens=3))
    so, outs = step(sched, runner)
    assert so.num_scheduled_tokens == {"hit": 1 + k}
    assert so.scheduled_spec_decode_tokens == {"hit": [-1] * k}
    assert so.scheduled_new_reqs[0].num_computed_tokens == 8
    admit = events_of(events, "admit")[-1]
    assert admit["num_new_tokens"] == 1 + k and admit["spec_token_ids"] == [-1] * k
    # Slots for the padded row and, for MTP, the drafter's K lookahead slots past it.
    lookahead = k if method == "mtp" else 0
    assert len(sched.kv_cache_manager.get_block_ids("hit")) == cdiv(8 + 1 + k + lookahead, B)
    # A placeholder is never accepted: one token, and computed rolled back over all K.
    assert outs[0].new_token_ids == [target("hit", 9)]
    verdict = events_of(events, "spec_decode")[-1]
    assert verdict["num_draft_tokens"] == k and verdict["num_rejected_tokens"] == k
    hit = sched.get_request("hit")
    assert hit.num_computed_tokens == verdict["num_computed_tokens"] == 9 == hit.num_tokens - 1
    run_all(sched, runner)
    assert all_free(sched)


def test_no_padding_without_speculative_decoding():
    sched, runner, events = make_scheduler(sample=target)
    warm(sched, runner, 9)
    sched.add_request(req("hit", 9))
    so, _ = step(sched, runner)
    assert so.num_scheduled_tokens == {"hit": 1} and so.scheduled_spec_decode_tokens == {}
    assert events_of(events, "admit")[-1]["spec_token_ids"] == []


def test_a_padded_row_that_does_not_fit_the_budget_waits_and_so_does_the_queue():
    # budget 5 = a running row of 1 + K = 3 (its drafts) + 2: the padded row needs 3.
    k = 2
    sched, runner, events = make_scheduler(
        speculative_config=spec(k), sample=target, budget=5, draft=target
    )
    warm(sched, runner, 9)
    sched.add_request(req("run", 3, max_tokens=20, start=50))
    step(sched, runner)  # prefill; drafts proposed after it
    sched.add_request(req("hit", 9))
    sched.add_request(req("next", 1, start=70))  # would fit the 2 tokens left
    so, _ = step(sched, runner)
    assert so.num_scheduled_tokens == {"run": 1 + k}
    assert sched.get_request("hit").status == RequestStatus.WAITING
    assert [r.request_id for r in sched.waiting] == ["hit", "next"]
    run_all(sched, runner)
    assert all_free(sched)


def test_no_padding_while_a_running_row_is_mid_prefill():
    k = 1
    sched, runner, _ = make_scheduler(
        speculative_config=spec(k), sample=target, budget=12, threshold=8
    )
    warm(sched, runner, 9)
    sched.add_request(req("long", 40, start=50))
    step(sched, runner)  # the first 12 of 40 (alone, the threshold does not apply)
    sched.add_request(req("hit", 9))
    so, _ = step(sched, runner)
    assert so.num_scheduled_tokens == {"long": 8, "hit": 1}
    assert "hit" not in so.scheduled_spec_decode_tokens


def test_a_fresh_one_token_prompt_is_padded_only_beside_a_scheduled_running_row():
    k = 2
    sched, runner, _ = make_scheduler(speculative_config=spec(k), sample=target)
    sched.add_request(req("one", 1, start=30))
    so, _ = step(sched, runner)
    assert so.num_scheduled_tokens == {"one": 1}  # no context, nothing running: as is
    sched.add_request(req("two", 1, start=40))
    so, _ = step(sched, runner)
    assert so.num_scheduled_tokens["two"] == 1 + k  # "one" runs: padded, as upstream
    assert so.scheduled_spec_decode_tokens["two"] == [-1] * k


def test_long_prefill_threshold_of_one_plus_k_keeps_the_padded_row_whole():
    k = 2
    sched, runner, _ = make_scheduler(speculative_config=spec(k), sample=target, threshold=3)
    warm(sched, runner, 9)
    sched.add_request(req("hit", 9))
    sched.add_request(req("other", 10, start=60))  # two requests: the threshold applies
    so, _ = step(sched, runner)
    assert so.num_scheduled_tokens == {"hit": 3, "other": 3}
    assert so.scheduled_spec_decode_tokens == {"hit": [-1] * k}


@pytest.mark.parametrize("max_model_len, padded", [(12, True), (11, False)])
def test_padding_needs_room_for_the_sampled_token_below_max_model_len(max_model_len, padded):
    k = 2  # 8 cached + 3 padded + 1 sampled = 12
    sched, runner, _ = make_scheduler(
        speculative_config=spec(k), sample=target, max_model_len=max_model_len
    )
    warm(sched, runner, 9)
    sched.add_request(req("hit", 9, max_tokens=2))
    so, _ = step(sched, runner)
    assert so.num_scheduled_tokens == {"hit": 1 + k if padded else 1}
    assert ("hit" in so.scheduled_spec_decode_tokens) == padded
    run_all(sched, runner)
    assert all_free(sched)


def test_max_model_len_trims_a_running_rows_drafts():
    k = 2
    sched, runner, _ = make_scheduler(
        speculative_config=spec(k), sample=target, max_model_len=12, draft=target
    )
    sched.add_request(req("r", 6, max_tokens=10))
    _, outs = run_all(sched, runner)
    cut = [len(so.scheduled_spec_decode_tokens.get("r", ())) for so in outs]
    assert 0 < min(c for c in cut if c) < k  # the last verifying step carries fewer drafts
    for so in outs:
        cached = so.scheduled_cached_reqs
        for c in cached.num_computed_tokens:
            # Positions stay below max_model_len, one left for the sampled token.
            assert c + so.num_scheduled_tokens["r"] <= 12 - 1
    assert all_free(sched)


# ---- verification ----------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("rate", [0.0, 0.5, 1.0])
def test_tokens_equal_greedy_without_speculation_and_rejections_roll_back(k, rate):
    prompts = [(f"r{i}", 3 + 5 * i, 10 * i) for i in range(4)]
    base, base_runner, _ = make_scheduler(sample=target, block_size=B)
    for rid, n, start in prompts:
        base.add_request(req(rid, n, max_tokens=9, start=start))
    want, base_steps = run_all(base, base_runner)

    draft = seeded_drafter(target, rate, seed=7)
    sched, runner, events = make_scheduler(speculative_config=spec(k), sample=target, draft=draft)
    for rid, n, start in prompts:
        sched.add_request(req(rid, n, max_tokens=9, start=start))
    got, outs = run_all(sched, runner)
    assert got == want
    verdicts = events_of(events, "spec_decode")
    assert verdicts
    for v in verdicts:
        assert v["num_accepted_tokens"] + v["num_rejected_tokens"] == v["num_draft_tokens"]
    accepted = sum(v["num_accepted_tokens"] for v in verdicts)
    if rate == 0.0:
        assert accepted == 0
    if rate == 1.0:
        real = [v for v in verdicts if -1 not in v["draft_token_ids"]]
        assert real and all(v["num_rejected_tokens"] == 0 for v in real)
        assert len(outs) < len(base_steps)  # fewer steps for the same tokens
    assert all_free(sched)


def test_after_a_verification_computed_is_one_short_of_the_tokens():
    k = 2
    draft = seeded_drafter(target, 0.5, seed=3)
    sched, runner, events = make_scheduler(speculative_config=spec(k), sample=target, draft=draft)
    sched.add_request(req("r", 5, max_tokens=12))
    while sched.has_requests():
        so, _ = step(sched, runner)
        r = sched.get_request("r")
        if r is not None and not r.is_finished() and so.scheduled_spec_decode_tokens:
            assert r.num_computed_tokens == r.num_tokens - 1
            assert (
                events_of(events, "spec_decode")[-1]["num_computed_tokens"] == r.num_computed_tokens
            )


def test_a_stop_token_inside_the_accepted_run_ends_the_request_there():
    k = 2
    prompt = 5
    stop = target("r", prompt + 2)  # the third output token
    sched, runner, events = make_scheduler(speculative_config=spec(k), sample=target, draft=target)
    sp = SamplingParams(max_tokens=10, stop_token_ids=[stop])
    sched.add_request(Request("r", list(range(prompt)), sp))
    tokens, _ = run_all(sched, runner)
    assert tokens["r"][-1] == stop and len(tokens["r"]) == 3
    assert tokens["r"] == [target("r", prompt + i) for i in range(3)]
    fin = events_of(events, "finish")[-1]
    assert fin["finish_reason"] == "stop" and fin["num_output_tokens"] == 3
    assert all_free(sched)


def test_max_tokens_inside_the_accepted_run_truncates_it():
    sched, runner, _ = make_scheduler(speculative_config=spec(2), sample=target, draft=target)
    sched.add_request(req("r", 5, max_tokens=4))
    tokens, _ = run_all(sched, runner)
    assert tokens["r"] == [target("r", 5 + i) for i in range(4)]
    assert all_free(sched)


# ---- drafts in and out -----------------------------------------------------------------
def test_update_draft_token_ids_skips_finished_and_unknown_and_drops_prefill_chunks():
    sched, runner, _ = make_scheduler(speculative_config=spec(2), sample=target, budget=12)
    sched.add_request(req("short", 3, start=40, max_tokens=1))
    sched.add_request(req("long", 20))
    sched.add_request(req("next", 5, start=70))
    step(sched, runner)  # short runs and finishes; long's first chunk of 9
    assert sched.get_request("short") is None
    sched.update_draft_token_ids(
        DraftTokenIds(["long", "short", "ghost"], [[5, 6], [7, 8], [9, 9]])
    )
    assert sched.get_request("long").spec_token_ids == []  # a prefill chunk
    running = sched.get_request("next") or sched.get_request("long")
    with pytest.raises(ValueError, match="at most num_speculative_tokens=2"):
        sched.update_draft_token_ids(DraftTokenIds(["next", "long"], [[1, 2], [1, 2, 3]]))
    assert running.spec_token_ids == []  # nothing taken from a refused batch of drafts
    with pytest.raises(ValueError, match="expected one per request"):
        DraftTokenIds(["long"], [])


@pytest.mark.parametrize(
    "req_ids, drafts, name",
    [
        (["r"], [5], "draft_token_ids"),
        (["r"], [None], "draft_token_ids"),
        (["r"], None, "draft_token_ids"),
        (["r"], "12", "draft_token_ids"),
        (["r"], ["12"], "draft_token_ids"),
        (["r"], [[1.0]], "draft_token_ids"),
        (["r", "r"], [[1], [2]], "req_ids"),
        ("r", [[1]], "req_ids"),
        (None, [[1]], "req_ids"),
    ],
)
def test_malformed_draft_token_ids_are_one_line_naming_the_field(req_ids, drafts, name):
    with pytest.raises(ValueError, match=rf"^{name}=.* is invalid: expected ") as e:
        DraftTokenIds(req_ids, drafts)
    assert "\n" not in str(e.value)
    from pdlab.engine.core.sched.output import ModelRunnerOutput

    with pytest.raises(ValueError, match="is invalid: expected"):
        ModelRunnerOutput(req_ids, drafts)


def test_drafts_are_scheduled_once_then_cleared():
    k = 2
    sched, runner, _ = make_scheduler(speculative_config=spec(k), sample=target)
    sched.add_request(req("r", 4, max_tokens=10))
    step(sched, runner)
    r = sched.get_request("r")
    sched.update_draft_token_ids(DraftTokenIds(["r"], [[11, 12]]))  # overrides the runner's
    assert r.spec_token_ids == [11, 12] and r.num_tokens_with_spec == r.num_tokens + 2
    so = sched.schedule()
    assert so.scheduled_spec_decode_tokens == {"r": [11, 12]}
    assert so.num_scheduled_tokens == {"r": 1 + k} and r.spec_token_ids == []
    # The runner is told the known token only; the drafts travel beside it.
    assert so.scheduled_cached_reqs.new_token_ids == [[r.all_token_ids[-1]]]


def test_sampled_lists_longer_than_the_drafts_allow_are_refused():
    sched, runner, _ = make_scheduler(speculative_config=spec(1), sample=target)
    sched.add_request(req("r", 4, max_tokens=10))
    step(sched, runner)
    sched.update_draft_token_ids(DraftTokenIds(["r"], [[1]]))
    so = sched.schedule()
    from pdlab.engine.core.sched.output import ModelRunnerOutput

    r = sched.get_request("r")
    assert r.num_computed_tokens > r.num_tokens  # schedule() counted the draft computed
    [out] = sched.update_from_output(so, ModelRunnerOutput(["r"], [[1, 2, 3]]))
    # The row cannot go on: it ends with the reason, its blocks back in the pool.
    assert out.finish_reason == "error" and "expected 1 to 2 tokens" in out.error
    assert sched.get_request("r") is None and all_free(sched)


# ---- blocks and preemption -------------------------------------------------------------
@pytest.mark.parametrize("method", ["mtp", "ngram"])
def test_a_row_with_drafts_is_preempted_cleanly_and_resumes(method):
    k = 2
    draft = seeded_drafter(target, 0.7, seed=1)
    sched, runner, events = make_scheduler(
        speculative_config=spec(k, method),
        sample=target,
        draft=draft,
        num_blocks=12,
        caching=False,
    )
    want_sched, want_runner, _ = make_scheduler(sample=target, num_blocks=64, caching=False)
    for s in (sched, want_sched):
        for i in range(3):
            s.add_request(req(f"r{i}", 6, max_tokens=12, start=10 * i))
    want, _ = run_all(want_sched, want_runner)
    preempted_with_drafts = 0
    tokens = {}
    while sched.has_requests():
        pending = {r.request_id: list(r.spec_token_ids) for r in sched.running}
        so, result = step(sched, runner)
        for rid in so.preempted_req_ids:
            preempted_with_drafts += bool(pending.get(rid))
            assert sched.get_request(rid).spec_token_ids == []
            assert rid not in so.scheduled_spec_decode_tokens
        for o in result:
            tokens.setdefault(o.req_id, []).extend(o.new_token_ids)
    assert preempted_with_drafts > 0, "no row was preempted with drafts pending"
    assert events_of(events, "preempt")
    assert tokens == want
    assert all_free(sched)


# ---- D's first step through PDConnector --------------------------------------------------
def pd_schedulers(k, num_blocks=32):
    transport = InProcessTransport()
    caches = {
        side: [torch.zeros(num_blocks, B, 2)] for side in ("P", "D")
    }  # one tiny "layer": the read copies blocks
    p_conn = PDConnector("prefill", "P", transport, B)
    d_conn = PDConnector("decode", "D", transport, B)
    p_conn.register_kv_caches(caches["P"])
    d_conn.register_kv_caches(caches["D"])
    cc = CacheConfig(block_size=B, num_blocks=num_blocks)
    p = Scheduler(SchedulerConfig(), cc, 256, connector=p_conn)
    d_events = []
    d = Scheduler(
        SchedulerConfig(),
        cc,
        256,
        connector=d_conn,
        emit=lambda kind, **f: d_events.append((kind, f)),
        speculative_config=spec(k),
    )
    p_runner = FakeModelRunner(p_conn, sample=target)
    d_runner = FakeModelRunner(d_conn, sample=target, num_speculative_tokens=k, draft=target)
    return p, p_runner, d, d_runner, d_events


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("n", [8, 9, 3])
def test_d_first_step_is_one_plus_k_over_n_minus_one_with_placeholders(k, n):
    p, p_runner, d, d_runner, d_events = pd_schedulers(k)
    prompt = list(range(n))
    to_d = {"do_remote_decode": True}
    p.add_request(Request("x", prompt, SamplingParams(max_tokens=6), kv_transfer_params=to_d))
    params = None
    while params is None:
        _, outs = step(p, p_runner)
        params = next((o.kv_transfer_params for o in outs if o.finished), None)
    d.add_request(Request("x", prompt, SamplingParams(max_tokens=6), kv_transfer_params=params))
    first = None
    tokens = []
    for _ in range(50):
        if not (d.has_requests() or p.has_requests()):
            break
        so, outs = step(d, d_runner)
        if p.has_requests():
            step(p, p_runner)
        if so.total_num_scheduled_tokens and first is None:
            first = so
        for o in outs:
            tokens.extend(o.new_token_ids)
    assert first.num_scheduled_tokens == {"x": 1 + k}
    assert first.scheduled_spec_decode_tokens == {"x": [-1] * k}
    new = first.scheduled_new_reqs[0]
    assert new.num_computed_tokens == n - 1
    # V2 subtracts the drafts: one new token over context, so still a decode and the step
    # keeps a uniform 1 + K decode shape.
    batch = gather_batch_req_state(
        first.num_scheduled_tokens,
        {"x": new.num_computed_tokens},
        {"x": n},
        draft_tokens=first.scheduled_spec_decode_tokens,
        decode_query_len=1 + k,
    )
    assert batch.is_prefilling == [True] and batch.prefill_runs_as_decode == [True]
    assert batch.decode_graph_eligible and batch.uniform_decode_token_count == 1 + k
    assert batch.num_draft_tokens == [k]
    first_verdict = events_of(d_events, "spec_decode")[0]
    assert first_verdict["draft_token_ids"] == [-1] * k
    assert first_verdict["num_rejected_tokens"] == k and first_verdict["num_computed_tokens"] == n
    assert tokens == [target("x", n + i) for i in range(6)]
    assert all_free(d) and all_free(p)


# ---- the batch --------------------------------------------------------------------------
def test_gather_batch_req_state_without_drafts_is_unchanged():
    rows = {"a": 1, "b": 3}
    old = gather_batch_req_state(rows, {"a": 8, "b": 8}, {"a": 9, "b": 9})
    assert old.prefill_runs_as_decode == [True, False] and not old.decode_graph_eligible
    assert old.num_draft_tokens is None
    # The same 3-token row, two of them drafts: one new token, a decode.
    new = gather_batch_req_state(
        rows, {"a": 8, "b": 8}, {"a": 9, "b": 9}, draft_tokens={"b": [-1, -1]}, decode_query_len=3
    )
    assert new.req_ids == ["b", "a"] and new.prefill_runs_as_decode == [True, True]
    assert new.decode_graph_eligible and new.uniform_decode_token_count is None
    with pytest.raises(ValueError, match="fewer drafts than its num_scheduled_tokens"):
        gather_batch_req_state(rows, {"a": 8, "b": 8}, {"a": 9, "b": 9}, draft_tokens={"a": [1]})
