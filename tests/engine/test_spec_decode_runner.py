"""The runner under speculative decoding, driven step by step with hand-built scheduler
outputs (the scheduler's side is tested in tests/engine/test_scheduler*.py): verification,
rollback, placeholder drafts on D's first step, and the MTP proposer against its
cacheless oracle (``DeepSeekMTP.propose_greedy``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from pdlab.engine.config import AttentionConfig, CacheConfig, ModelConfig, SchedulerConfig
from pdlab.engine.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
from pdlab.engine.model_executor.models.deepseek_v2 import DeepseekV2ForCausalLM
from pdlab.engine.request import SamplingParams
from pdlab.engine.worker.gpu.model_runner import ModelRunner
from pdlab.engine.worker.gpu.spec_decode.rejection_sampler import (
    gather_draft_sampled,
    rejection_sample_greedy,
)

BS = 4


def _spec(k: int) -> SimpleNamespace:
    return SimpleNamespace(method="mtp", num_speculative_tokens=k)


def _model(weights: str = "random") -> DeepseekV2ForCausalLM:
    torch.manual_seed(0)
    cfg = ModelConfig.tiny(weights=weights, num_nextn_predict_layers=1)
    try:
        return DeepseekV2ForCausalLM(cfg).eval()
    except ValueError as e:  # the shipped checkpoint predates its MTP layer
        if weights == "trained" and "no MTP layer" in str(e):
            pytest.skip(str(e))
        raise


def _runner(model, k, backend="cpu_mla") -> ModelRunner:
    return ModelRunner(
        model,
        CacheConfig(block_size=BS, num_blocks=64),
        SchedulerConfig(),
        backend="torch",
        attention_config=AttentionConfig(backend=backend),
        speculative_config=_spec(k) if k else None,
    )


def _so(new=(), cached=(), spec=None) -> SchedulerOutput:
    """new: NewRequestData rows with their token count; cached: (req_id, computed, n)."""
    sched = {r.req_id: n for r, n in new}
    c = CachedRequestData()
    for rid, computed, n in cached:
        c.req_ids.append(rid)
        c.resumed_from_preemption.append(False)
        c.new_token_ids.append([])
        c.new_block_ids.append([])
        c.num_computed_tokens.append(computed)
        sched[rid] = n
    so = SchedulerOutput([r for r, _ in new], c, sched, sum(sched.values()), set())
    so.scheduled_spec_decode_tokens = dict(spec or {})
    return so


def _oracle_drafts(model, tokens: list[int], k: int) -> list[int]:
    """The drafts the MTP layer proposes after ``tokens`` (the last one just sampled)."""
    ids = torch.tensor(tokens[:-1])
    hidden = model(ids, torch.arange(len(ids)))
    return model.mtp.propose_greedy(tokens, hidden, k)


def _decode(runner, model, prompt, max_tokens, k, computed=0, oracle=True, swap=None):
    """One request through the runner as the scheduler would drive it: the prompt (from
    ``computed`` cached tokens), then verifying steps of 1 + len(drafts) tokens, rolled back
    over the rejected drafts. Returns the outputs and each step's (scheduled, sampled).
    ``swap(out, drafts)``: the drafts the scheduler sends instead of the runner's."""
    blocks = list(range(1, 1 + -(-(len(prompt) + max_tokens + k + 1) // BS)))
    new = NewRequestData("r", list(prompt), SamplingParams(), blocks, computed, list(prompt))
    n = len(prompt) - computed
    spec = {}
    if computed and n == 1 and k:  # D's first step: padded with placeholders
        spec, n = {"r": [-1] * k}, 1 + k
    so = _so(new=[(new, n)], spec=spec)
    out, steps = [], []
    while True:
        mro = runner.execute_model(so)
        toks = mro.sampled_token_ids[0]
        drafts = list(so.scheduled_spec_decode_tokens.get("r", []))
        steps.append((so.num_scheduled_tokens["r"], drafts, toks))
        out += toks
        # The scheduler's rollback: computed += scheduled - rejected.
        d = len(so.scheduled_spec_decode_tokens.get("r", []))
        computed += so.num_scheduled_tokens["r"] - (d + 1 - len(toks))
        if len(out) >= max_tokens:
            return out[:max_tokens], steps
        drafts = runner.take_draft_token_ids()
        assert not runner.req_errors, runner.req_errors
        if k:
            assert drafts is not None and drafts.req_ids == ["r"]
            if oracle:
                assert drafts.draft_token_ids[0] == _oracle_drafts(model, [*prompt, *out], k)
            d = drafts.draft_token_ids[0]
            if swap is not None:
                d = swap(out, d)
        else:
            d = []
        assert runner.requests["r"].num_computed_tokens == computed
        so = _so(cached=[("r", computed, 1 + len(d))], spec={"r": d} if d else {})


def test_greedy_verification_accepts_while_the_target_agrees():
    assert rejection_sample_greedy([5, 6, 7], [5, 6]) == [5, 6, 7]  # both drafts + bonus
    assert rejection_sample_greedy([5, 9, 7], [5, 6]) == [5, 9]  # recovered at the mismatch
    assert rejection_sample_greedy([4, 6, 7], [5, 6]) == [4]
    assert rejection_sample_greedy([0, 3], [-1]) == [0]  # a placeholder is never accepted
    with pytest.raises(ValueError, match="one per draft plus the bonus"):
        rejection_sample_greedy([1], [1])


def test_drafts_of_a_step_that_starts_inside_the_prefill_are_placeholders():
    # D's first step: one prompt token over N - 1 cached, so every draft is a placeholder.
    assert gather_draft_sampled([7, 8], num_computed_tokens=9, prefill_len=10) == [-1, -1]
    assert gather_draft_sampled([7, -1], num_computed_tokens=10, prefill_len=10) == [7, -1]


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("weights", ["random", "trained"])
@pytest.mark.parametrize("backend", ["cpu_mla", "flash_attn_mla"])
def test_local_spec_decode_equals_greedy_and_drafts_equal_the_oracle(k, weights, backend):
    model = _model(weights)
    prompt = list(b"the cat sat on the mat. the cat")
    want = model.greedy_generate(prompt, 12)
    out, steps = _decode(_runner(model, k, backend), model, prompt, 12, k)
    assert out == want
    # Every step after the prompt verifies K drafts, and produces 1 to 1 + K tokens.
    assert all(n == 1 + k and 1 <= len(t) <= 1 + k for n, _, t in steps[1:])


@pytest.mark.parametrize("k", [1, 2])
def test_the_runner_verifies_the_drafts_it_fed_not_the_schedulers(k):
    # The scheduler's drafts are the right answer, the runner's its own (mostly wrong):
    # a bonus token counts only on the context the runner computed (issue 42, item 5).
    model = _model()
    prompt = list(b"the cat sat on the mat. the cat")
    want = model.greedy_generate(prompt, 12)
    swapped = []

    def truth(out, runners):
        swapped.append(want[len(out) : len(out) + k] != runners)
        return want[len(out) : len(out) + k]

    out, _ = _decode(_runner(model, k), model, prompt, 12, k, swap=truth)
    assert any(swapped) and out == want


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("n", [3, BS, 3 * BS, 3 * BS + 1, 1])
def test_ds_first_step_is_padded_with_placeholders_and_feeds_the_drafter(k, n):
    model = _model()
    prompt = list(b"a short story about a dog and a cat")[:n]
    want = model.greedy_generate(prompt, 6)
    # P: the prompt's K/V in every cache (the MTP layer's too), copied to D's blocks.
    p = _runner(model, k)
    _decode(p, model, prompt, 1, k)
    d = _runner(model, k)
    for dst, src in zip(d.kv_caches, p.kv_caches, strict=True):
        dst.copy_(src)
    if n == 1:  # nothing cached: D prefills the one token itself
        out, steps = _decode(d, model, prompt, 6, k)
        assert steps[0][1] == []
    else:
        out, steps = _decode(d, model, prompt, 6, k, computed=n - 1)
        scheduled, drafts, sampled = steps[0]
        assert (scheduled, drafts) == (1 + k, [-1] * k)
        assert sampled == want[:1]  # the placeholders are rejected: one token
    assert out == want


def test_route_and_verify_events_of_ds_first_step():
    from pdlab.engine.trace import Tracer

    model, t = _model(), Tracer()
    prompt = list(b"hello there, world")
    p = _runner(model, 2)
    _decode(p, model, prompt, 1, 2)
    d = ModelRunner(
        model,
        CacheConfig(block_size=BS, num_blocks=64),
        SchedulerConfig(),
        backend="torch",
        attention_config=AttentionConfig(backend="flash_attn_mla"),
        speculative_config=_spec(2),
        emit=t.sink("D"),
    )
    for dst, src in zip(d.kv_caches, p.kv_caches, strict=True):
        dst.copy_(src)
    _decode(d, model, prompt, 4, 2, computed=len(prompt) - 1)
    route = t.first("route", "D", req_id="r")
    assert route["query_len"] == 3 and route["num_draft_tokens"] == 2
    assert route["draft_token_ids"] == [-1, -1] and route["decode_threshold"] == 512
    assert route["path"] == "decode" and route["is_prefilling"]
    v = t.first("verify", "D", req_id="r")
    assert v["num_placeholders"] == 2 and v["num_accepted"] == 0 and v["num_rejected"] == 2
    draft = t.first("draft", "D", req_id="r")
    assert draft["hidden_position"] == len(prompt) - 1  # h[N - 1], recomputed on D
    # The MTP layer ran on its own cache entry, after the target's layers.
    assert {e["layer"] for e in t.filter("kernel", "D")} == {0, 1, 2}


@pytest.mark.parametrize("k", [1, 2, 3])
def test_accepted_drafts_and_rollback_keep_the_target_and_the_drafter_exact(k):
    """The MTP layer still drafts (its cache entries are written and its proposals checked
    against the oracle), but the drafts handed back alternate between the true greedy
    continuation (all accepted, a bonus token) and one wrong in the middle (rolled back)."""
    model = _model()
    prompt = list(b"speculative decoding on D")
    want = model.greedy_generate(prompt, 16 + 2 * k)
    r = _runner(model, k)
    real = r.drafter.propose
    calls = []

    def propose(rows, *args):
        drafts = real(rows, *args)
        known = r.requests["r"].all_token_ids
        assert drafts["r"] == _oracle_drafts(model, known, k)
        done = len(known) - len(prompt)
        good = want[done : done + k]
        if len(calls) % 2:
            good = good[: k // 2] + [(good[k // 2] + 1) % 258] + good[k // 2 + 1 :]
        calls.append(good)
        r.requests["r"].draft_token_ids = list(good)
        return {"r": list(good)}

    r.drafter.propose = propose
    out, steps = _decode(r, model, prompt, 16, k, oracle=False)
    assert out == want[:16]
    verifying = steps[1:]
    # An all-right step yields 1 + K tokens; a step with draft k // 2 wrong yields k // 2 + 1.
    assert [len(t) for _, _, t in verifying][:4] == [1 + k, k // 2 + 1] * 2


def test_temperature_with_speculative_decoding_is_refused_in_one_line():
    model = _model()
    r = _runner(model, 1)
    new = NewRequestData("r", [1, 2, 3], SamplingParams(temperature=0.8), [1, 2], 0, [1, 2, 3])
    r.execute_model(_so(new=[(new, 3)]))
    why = r.req_errors["r"]
    assert "temperature=0.8" in why and "\n" not in why
