"""vLLM 0.33.0's scheduler and pdlab's with speculative decoding, in lockstep on seeded
local and decode-side workloads (lockstep.py, workload.py): the workloads of
test_sched_local.py and test_sched_decode.py with a SpeculativeConfig (mtp or ngram, K = 1
and K = 2, MTP with one or two modules), drafts fed back after every step as a model
runner would (seeded, accepted at the workload's rate) and verified greedily. Every
step's scheduled tokens, spec tokens (the -1 placeholders that pad a newly admitted
one-token row, D's first step among them) and num_computed_tokens are compared, and the
whole state after it. Then targeted cases: a resent prompt under MTP with and without a
connector, P's backoff with several MTP modules, and chunks kept K from a prompt's end."""

import dataclasses
from collections import Counter

import pytest
from lockstep import run
from twin_pdlab import PdlabTwin
from twin_vllm import VllmTwin
from workload import Config, Spec, make_workload

pytestmark = pytest.mark.upstream
NUM_WORKLOADS = 400


@pytest.mark.parametrize("seed", range(NUM_WORKLOADS))
def test_local_spec_workload(seed):
    run(seed, "local_spec")


@pytest.mark.parametrize("seed", range(NUM_WORKLOADS))
def test_decode_spec_workload(seed):
    run(seed, "decode_spec")


def test_spec_workloads_draw_both_methods_and_both_k():
    drawn = Counter()
    for seed in range(100):
        for kind in ("local_spec", "decode_spec"):
            cfg = make_workload(seed, kind).config
            drawn[(cfg.spec_method, cfg.num_spec_tokens)] += 1
    assert set(drawn) == {(m, k) for m in ("mtp", "ngram") for k in (1, 2)}, drawn


def test_spec_workloads_reach_every_case():
    seen = Counter()
    for seed in range(200):
        for kind in ("local_spec", "decode_spec"):
            seen += run(seed, kind)[1]
    for case in (
        "padded new row",
        "D: 1 + K over N - 1, placeholders",
        "drafts cut",
        "draft rejected",
        "every draft accepted",
        "preemption",
        "prefix-cache hit",
        "chunked prefill",
        "finish stop",
        "finish length",
        "remote K/V in: one token over N - 1",
        "multi-module MTP",
    ):
        assert seen[case] > 0, f"no spec workload among the first 200 of each kind reached {case!r}"


def _resend(twin, n: int, block_size: int) -> int:
    """A prompt of ``n`` tokens run to its end, then the same prompt again: the tokens of
    the second one's prefix-cache hit (its first schedule's num_computed_tokens)."""
    prompt = tuple(range(1, n + 1))
    twin.add(Spec("first", prompt, 2))
    for _ in range(n + 4):
        so, s = twin.schedule()
        done = {row[0] for row in s.rows if row[1] + row[3] >= n}
        if any(reason for _, _, reason in twin.update(so, dict.fromkeys(done, [150]), None)):
            break
    twin.add(Spec("again", prompt, 2))
    (row,) = twin.schedule()[1].rows
    return row[3]


@pytest.mark.parametrize("n", [8, 9, 12, 13, 16, 17])
@pytest.mark.parametrize("k", [1, 2])
def test_a_resent_prompt_under_mtp_reuses_what_vllm_reuses(n, k):
    """Under MTP, without a connector, vLLM's block hashes look one token ahead and a
    resent prompt of N tokens reuses floor((N - 1) / B) * B; the connector case
    (use_eagle_block_drop, one block less) is test_a_cached_prompt_on_d_under_mtp_....
    pdlab/engine/core/kv_cache_manager.py tells why."""
    b = 4
    cfg = Config(b, 40, 64, 4, 0, 64, spec_method="mtp", num_spec_tokens=k)
    hit = _resend(VllmTwin(cfg), n, b)
    assert hit == (n - 1) // b * b
    assert _resend(PdlabTwin(cfg), n, b) == hit


@pytest.mark.parametrize("n", [5, 8, 9, 13])
def test_a_cached_prompt_on_d_under_mtp_loses_its_trailing_block(n):
    """With a KV connector (D) vLLM keeps the plain hashes and drops the last block of a
    local hit: a resent prompt of N tokens reuses (floor((N - 1) / B) - 1) * B. A pdlab
    that keeps the block fails here and in test_planted_bugs.py."""
    b = 4
    cfg = Config(b, 40, 64, 4, 0, 64, decode=True, spec_method="mtp", num_spec_tokens=2)
    hit = _resend(VllmTwin(cfg), n, b)
    assert hit == max((n - 1) // b - 1, 0) * b
    assert _resend(PdlabTwin(cfg), n, b) == hit


def _warm_then_hit(twin):
    """A cached 9-token prompt, then the same prompt (one token over 8 cached, so it is
    padded) beside a second request; returns what the second schedule() gave."""
    twin.add(Spec("warm", tuple(range(9)), 1))
    for _ in range(9):
        so, s = twin.schedule()
        done = {row[0] for row in s.rows if row[1] + row[3] >= 9}
        if twin.update(so, dict.fromkeys(done, [150]), None):
            break
    twin.add(Spec("hit", tuple(range(9)), 3))
    twin.add(Spec("other", tuple(range(20, 30)), 3))
    return twin.schedule()[1]


def test_a_threshold_below_one_plus_k_is_refused_where_vllm_asserts():
    """A kept difference: pdlab refuses long_prefill_token_threshold in (0, 1 + K) when the
    scheduler is built; vLLM accepts it and fails its assertion on the first padded row the
    threshold cuts. If vLLM stops asserting, this fails (and pdlab should follow)."""
    cfg = Config(4, 40, 64, 4, 2, 64, spec_method="ngram", num_spec_tokens=2)
    with pytest.raises(AssertionError):
        _warm_then_hit(VllmTwin(cfg))
    with pytest.raises(ValueError, match="long_prefill_token_threshold=2 is invalid"):
        PdlabTwin(cfg)
    ok = dataclasses.replace(cfg, threshold=3)  # 1 + K: both schedule the padded row whole
    assert _warm_then_hit(VllmTwin(ok)) == _warm_then_hit(PdlabTwin(ok))


def test_an_ngram_budget_below_one_plus_k_is_refused_where_vllm_never_pads():
    """A kept difference: with n-gram drafts (no lookahead) vLLM accepts a budget below
    1 + K and then never schedules a padded row (the waiting loop stops there every step);
    pdlab refuses the budget."""
    cfg = Config(4, 40, 2, 4, 0, 64, spec_method="ngram", num_spec_tokens=2)
    twin = VllmTwin(cfg)
    first = _warm_then_hit(twin)
    assert "hit" not in {row[0] for row in first.rows}
    for _ in range(3):
        so, s = twin.schedule()
        assert "hit" not in {row[0] for row in s.rows}
        twin.update(so, {}, None)
    with pytest.raises(ValueError, match="max_num_batched_tokens=2 is invalid"):
        PdlabTwin(cfg)


def _first_steps(twin, specs, steps: int = 3) -> list:
    """What ``schedule()`` gave for ``steps`` steps over ``specs`` (every row sampling
    token 150 once its prompt is computed), with the state after each."""
    for s in specs:
        twin.add(s)
    seen = []
    for _ in range(steps):
        so, s = twin.schedule()
        num_tokens = {rid: r[2] for rid, r in twin.state()["requests"].items()}
        done = {row[0] for row in s.rows if row[1] + row[3] >= num_tokens[row[0]]}
        twin.update(so, dict.fromkeys(done, [150]), None)
        seen.append((s, twin.state()))
    return seen


@pytest.mark.parametrize("modules,k", [(1, 2), (2, 2), (3, 3), (2, 3)])
@pytest.mark.parametrize("n", [1, 2, 7, 9])
def test_p_under_multi_module_mtp_prefills_all_but_k_minus_1(modules, k, n):
    """P (a NIXL producer) cuts the last K - 1 prompt tokens of a request it prefills for
    D when more than one MTP module drafts (min(modules, K) > 1) and the prompt is longer:
    P prefills N - (K - 1) and D computes the rest
    (pdlab/engine/distributed/kv_transfer/pd_connector.py)."""
    cfg = Config(
        4,
        40,
        64,
        4,
        0,
        64,
        prefill=True,
        spec_method="mtp",
        num_spec_tokens=k,
        mtp_modules=modules,
    )
    spec = Spec("p", tuple(range(1, n + 1)), 1, remote_decode=True)
    theirs = _first_steps(VllmTwin(cfg), [spec])
    first_row = theirs[0][0].rows[0]
    # K - 1, whatever the number of modules past one (num_prefill_lookahead_tokens is K).
    backoff = k - 1 if min(modules, k) > 1 and n > k - 1 else 0
    assert first_row[1] == n - backoff
    assert _first_steps(PdlabTwin(cfg), [spec]) == theirs


@pytest.mark.parametrize("budget,n", [(8, 10), (8, 9), (8, 11), (4, 6)])
def test_a_chunk_never_ends_within_k_of_the_prompt_end_under_multi_module_mtp(budget, n):
    """With K = 3 MTP modules a prefill chunk ends the prompt or leaves at least K tokens
    after it (upstream's _reserve_prefill_lookahead)."""
    k = 3
    cfg = Config(4, 40, budget, 4, 0, 64, spec_method="mtp", num_spec_tokens=k, mtp_modules=k)
    spec = Spec("a", tuple(range(1, n + 1)), 2)
    theirs = _first_steps(VllmTwin(cfg), [spec])
    first = theirs[0][0].rows[0][1]
    assert first == n or n - first >= k
    assert _first_steps(PdlabTwin(cfg), [spec]) == theirs
