"""Speculative decoding (MTP) end to end: a colocated engine and the P/D pair, K = 1 and 2,
against greedy decoding without it (the model's ``greedy_generate``), token for token; D's
first step as 0.33.0 schedules it (1 + K tokens over N - 1 cached, K ``-1`` placeholders),
read from the trace; with K MTP modules, 0.33.0's drafts (module j for draft j) against a
cacheless oracle and P's backoff of K - 1 prompt tokens."""

import pytest
import torch
from conftest import pair_all_free

from pdlab.disagg.pair import PDPair
from pdlab.engine.config import (
    AttentionConfig,
    CacheConfig,
    ModelConfig,
    SchedulerConfig,
    SpeculativeConfig,
)
from pdlab.engine.llm_engine import LLMEngine
from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM
from pdlab.engine.request import SamplingParams

CFG = ModelConfig.tiny(weights="random", num_nextn_predict_layers=1)
MODEL = DeepseekV2ForCausalLM(CFG)
BS = 4


def _prompt(n):
    return [(7 * i + n) % 256 for i in range(n)]


def check_drafts_against_the_oracle(tracer, instance, outs, k):
    """Every draft the runner proposed equals the cacheless MTP oracle's for the tokens
    known then: the MTP layer's cache entries were right at every position it read."""
    import torch

    tokens = {o.request_id: [*o.prompt_token_ids, *o.output_token_ids] for o in outs}
    drafts = tracer.filter("draft", instance)
    assert drafts
    for d in drafts:
        known = tokens[d["req_id"]][: d["hidden_position"] + 2]
        assert known[-1] == d["next_token"]
        ids = torch.tensor(known[:-1])
        hidden = MODEL(ids, torch.arange(len(ids)))
        assert (
            d["draft_token_ids"]
            == MODEL.mtp.propose_greedy(known, hidden, k)[: len(d["draft_token_ids"])]
        )


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("backend", ["cpu_mla", "flashmla"])
def test_colocated_spec_decode_equals_greedy(k, backend):
    prompts = [_prompt(n) for n in (5, 3 * BS + 1, 9)]
    e = LLMEngine(
        CFG,
        CacheConfig(block_size=BS, num_blocks=64),
        model=MODEL,
        backend="torch",
        attention_config=AttentionConfig(backend=backend),
        speculative_config=SpeculativeConfig(num_speculative_tokens=k),
    )
    outs = e.generate(prompts, SamplingParams(max_tokens=7))
    for p, o in zip(prompts, outs):
        assert o.output_token_ids == MODEL.greedy_generate(p, 7), o.error
    check_drafts_against_the_oracle(e.tracer, "local", outs, k)
    # Every verifying step's rows are 1 + K wide, and the runner's counts followed the
    # scheduler's rollback (nothing left over, every block back).
    assert e.scheduler.kv_cache_manager.usage == 0


@pytest.mark.parametrize("k", [1, 2])
def test_chunked_prefill_under_mtp_keeps_the_drafter_exact(k):
    """Prompts longer than the budget are prefilled in chunks: the MTP layer writes its
    entries chunk by chunk (the last position of a chunk takes the next prompt token)."""
    prompts = [_prompt(n) for n in (3 * BS + 3, 2 * BS + 1)]
    e = LLMEngine(
        CFG,
        CacheConfig(block_size=BS, num_blocks=64),
        SchedulerConfig(max_num_batched_tokens=7),
        model=MODEL,
        backend="torch",
        speculative_config=SpeculativeConfig(num_speculative_tokens=k),
    )
    outs = e.generate(prompts, SamplingParams(max_tokens=6))
    for p, o in zip(prompts, outs):
        assert o.output_token_ids == MODEL.greedy_generate(p, 6), o.error
    chunks = [r for s in e.tracer.filter("step", "local") for r in s["scheduled"]
              if r["num_computed_tokens_after"] < r["num_prompt_tokens"]]  # fmt: skip
    assert chunks  # some prompt was cut
    check_drafts_against_the_oracle(e.tracer, "local", outs, k)


def _pair(k, **kw):
    return PDPair(
        CFG,
        CacheConfig(block_size=BS, num_blocks=64),
        SchedulerConfig(),
        backend="torch",
        speculative_config=SpeculativeConfig(num_speculative_tokens=k),
        **kw,
    )


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("n", [3, BS, 3 * BS, 3 * BS + 1, 1])
def test_pd_with_mtp_equals_greedy_and_pads_ds_first_step(k, n):
    prompt = _prompt(n)
    pair = _pair(k, attention_config=AttentionConfig(backend="flash_attn_mla"))
    out = pair.generate(prompt, SamplingParams(max_tokens=6))[0]
    assert out.output_token_ids == MODEL.greedy_generate(prompt, 6), out.error
    t = pair.tracer
    check_drafts_against_the_oracle(t, "D", [out], k)
    first = [e for e in t.filter("step", "D") if e["scheduled"]][0]["scheduled"][0]
    route = t.first("route", "D")
    if n > 1:
        # D's first step: 1 + K tokens over N - 1 cached, K placeholder drafts.
        assert first["num_computed_tokens_before"] == n - 1
        assert first["num_scheduled_tokens"] == 1 + k
        assert first["spec_token_ids"] == [-1] * k
        assert route["num_draft_tokens"] == k and route["is_prefilling"]
        assert route["prefill_runs_as_decode"] and route["decode_graph_eligible"]
        assert route["path"] == "decode" and route["uniform_decode_token_count"] == 1 + k
        v = t.first("verify", "D")
        assert v["num_placeholders"] == k and v["sampled_token_ids"] == out.output_token_ids[:1]
        # The drafter was fed the recomputed position's hidden state, h[N - 1].
        assert t.first("draft", "D")["hidden_position"] == n - 1
    else:
        # Nothing to load: D prefills the one token itself, no placeholders.
        assert first["num_computed_tokens_before"] == 0 and first["spec_token_ids"] == []
    pair_all_free(pair)


def _oracle_drafter(runner, prompts, k, wrong_every=2):
    """Wrap the runner's MTP proposer: it still runs (its cache entries are written), but
    the drafts handed back are the true greedy continuation, with one draft wrong on every
    ``wrong_every``-th call, so steps both accept all K drafts and roll some back."""
    real, calls = runner.drafter.propose, [0]
    want = {tuple(p): MODEL.greedy_generate(p, 20 + k) for p in prompts}

    def propose(rows, *args):
        drafts = real(rows, *args)
        for rid in drafts:
            s = runner.requests[rid]
            cont = want[tuple(s.prompt_token_ids)]
            done = len(s.output_token_ids)
            good = cont[done : done + k]
            calls[0] += 1
            if calls[0] % wrong_every == 0:
                good[-1] = (good[-1] + 1) % CFG.vocab_size
            s.draft_token_ids = drafts[rid] = list(good)
        return drafts

    runner.drafter.propose = propose


@pytest.mark.parametrize("k", [1, 2])
def test_accepted_drafts_roll_back_in_step_with_the_scheduler(k):
    prompts = [_prompt(n) for n in (6, 2 * BS + 1)]
    e = LLMEngine(
        CFG,
        CacheConfig(block_size=BS, num_blocks=64),
        model=MODEL,
        backend="torch",
        speculative_config=SpeculativeConfig(num_speculative_tokens=k),
    )
    _oracle_drafter(e.runner, prompts, k)
    outs = e.generate(prompts, SamplingParams(max_tokens=12))
    for p, o in zip(prompts, outs):
        assert o.output_token_ids == MODEL.greedy_generate(p, 12), o.error
    verifies = e.tracer.filter("verify", "local")
    assert {v["num_accepted"] for v in verifies} >= {k, k - 1}
    # Each verify's rollback is what the scheduler's next step starts from.
    steps = [s for s in e.tracer.filter("step", "local")]
    for v in verifies:
        nxt = [s for s in steps if s.step == v.step + 1]
        rows = [r for s in nxt for r in s["scheduled"] if r["req_id"] == v["req_id"]]
        if rows:
            before = [
                r
                for s in steps
                if s.step == v.step
                for r in s["scheduled"]
                if r["req_id"] == v["req_id"]
            ][0]
            assert rows[0]["num_computed_tokens_before"] == (
                before["num_computed_tokens_after"] - v["num_rejected"]
            )


def test_pd_with_accepted_drafts_on_d():
    prompt = _prompt(3 * BS + 1)
    pair = _pair(2)
    _oracle_drafter(pair.decode.runner, [prompt], 2, wrong_every=3)
    out = pair.generate(prompt, SamplingParams(max_tokens=12))[0]
    assert out.output_token_ids == MODEL.greedy_generate(prompt, 12)
    assert max(v["num_accepted"] for v in pair.tracer.filter("verify", "D")) == 2
    pair_all_free(pair)


def _oracle_first_draft(tokens, k):
    """What the MTP layer drafts, cacheless, after ``tokens`` (the last one just sampled)."""
    import torch

    ids = torch.tensor(tokens[:-1])
    return MODEL.mtp.propose_greedy(tokens, MODEL(ids, torch.arange(len(ids))), k)


@pytest.mark.parametrize("mode", ["recompute", "first_token", "append_prompt", "hidden_state"])
def test_every_design_works_with_mtp_and_ds_drafter_reads_ps_mtp_entries(mode):
    from pdlab.disagg.designs import WITH_MTP

    k, prompt = 2, _prompt(2 * BS + 1)
    pair = _pair(k, first_token=mode, attention_config=AttentionConfig(backend="flashmla"))
    out = pair.generate(prompt, SamplingParams(max_tokens=6))[0]
    tokens = [*prompt, *out.output_token_ids]
    assert out.output_token_ids == MODEL.greedy_generate(prompt, 6) and WITH_MTP[mode][0]
    t = pair.tracer
    first = [e for e in t.filter("step", "D") if e["scheduled"]][0]["scheduled"][0]
    assert first["spec_token_ids"] == [-1] * k
    # D's first draft equals the cacheless oracle's: its MTP entries for 0 .. N-2 (and
    # N-1 where D does not recompute it) are P's, moved with the K/V.
    d = t.first("draft", "D")
    n = len(prompt)
    assert d["hidden_position"] == (n - 1 if mode == "recompute" else n)
    assert d["draft_token_ids"] == _oracle_first_draft(tokens[: d["hidden_position"] + 2], k)
    pair_all_free(pair)


def test_temperature_under_mtp_is_refused_in_one_line():
    pair = _pair(1)
    with pytest.raises(ValueError, match="temperature=0.7 is invalid with speculative") as e:
        pair.add_request([1, 2, 3], SamplingParams(temperature=0.7, max_tokens=2))
    assert "\n" not in str(e.value)


def test_two_processes_with_mtp_equal_greedy():
    from pdlab.disagg.launch import run_pd_procs

    prompts = [_prompt(n) for n in (1, 3, BS, 3 * BS + 1)]
    r = run_pd_procs(
        prompts,
        CFG,
        CacheConfig(block_size=BS, num_blocks=64),
        SchedulerConfig(),
        SamplingParams(max_tokens=5),
        timeout_s=90,
        speculative_config=SpeculativeConfig(num_speculative_tokens=2),
    )
    assert r.errors == {} and r.exitcodes == {"prefill": 0, "decode": 0}
    for i, p in enumerate(prompts):
        got = r.prefill.outputs[f"req-{i}"]["output_token_ids"]
        assert got == MODEL.greedy_generate(p, 5)
    # D's first step of the 3B + 1 prompt: 3 tokens over 3B cached, two placeholders.
    rows = [
        row
        for e in r.tracer.filter("step", "D")
        for row in e["scheduled"]
        if row["req_id"] == "req-3"
    ]
    assert (rows[0]["num_computed_tokens_before"], rows[0]["num_scheduled_tokens"]) == (3 * BS, 3)
    assert rows[0]["spec_token_ids"] == [-1, -1]
    assert r.decode.num_free_blocks == r.decode.num_blocks


def test_ngram_drafts_are_upstreams_prompt_lookup():
    from pdlab.engine.worker.gpu.spec_decode.ngram import ngram_drafts

    #      0  1  2  3  4  5  6  7  8: the suffix [2, 3] last occurred at 1..2, then 4, 9
    toks = [1, 2, 3, 4, 9, 2, 3, 7, 2, 3]
    assert ngram_drafts(toks, 2, 2, 2) == [7, 2]  # rightmost match (5..6), then 7, 2
    assert ngram_drafts(toks, 3, 1, 3) == [7, 2, 3]  # n = 3 finds nothing; n = 2 does
    assert ngram_drafts([5, 6, 7], 2, 2, 2) == [7, 7]  # no match: the last token
    assert ngram_drafts([1, 2, 3, 1, 2], 3, 2, 2) == [3, 1, 2]  # found, then the last token

    # A suffix as long as the tokens has no earlier occurrence: a bound past it changes
    # nothing and costs nothing (issue 42, item 2: prompt_lookup_max=10**9 hung generate).
    assert ngram_drafts(toks, 3, 1, 10**9) == ngram_drafts(toks, 3, 1, len(toks)) == [7, 2, 3]
    assert ngram_drafts([4], 2, 10**9, 10**9) == [4, 4]


def test_ngram_with_a_huge_lookup_bound_generates_as_greedy():
    spec = SpeculativeConfig("ngram", 2, prompt_lookup_max=10**9)
    plain = ModelConfig.tiny(weights="random")
    model = DeepseekV2ForCausalLM(plain)
    prompt = list(b"abcabcabc")
    e = LLMEngine(plain, CacheConfig(block_size=BS), model=model, backend="torch",
                  speculative_config=spec)  # fmt: skip
    out = e.generate(prompt, SamplingParams(max_tokens=6))[0]
    assert out.output_token_ids == model.greedy_generate(prompt, 6)


@pytest.mark.parametrize("k", [1, 3])
def test_ngram_spec_decode_equals_greedy_local_and_pd(k):
    spec = SpeculativeConfig("ngram", k, prompt_lookup_min=1, prompt_lookup_max=3)
    plain = ModelConfig.tiny(weights="random")
    model = DeepseekV2ForCausalLM(plain)
    prompt = list(b"abcabcabcabc")
    want = model.greedy_generate(prompt, 10)
    e = LLMEngine(plain, CacheConfig(block_size=BS), model=model, backend="torch",
                  speculative_config=spec)  # fmt: skip
    assert e.generate(prompt, SamplingParams(max_tokens=10))[0].output_token_ids == want
    assert len(e.runner.kv_caches) == plain.num_hidden_layers  # no drafter cache
    pair = PDPair(plain, CacheConfig(block_size=BS), SchedulerConfig(), backend="torch",
                  speculative_config=spec)  # fmt: skip
    assert pair.generate(prompt, SamplingParams(max_tokens=10))[0].output_token_ids == want
    d = pair.tracer.first("draft", "D")
    assert d["method"] == "ngram" and d["hidden_position"] == -1
    pair_all_free(pair)


def test_pd_with_the_shipped_mtp_layer_accepts_drafts_and_equals_greedy():
    """The shipped checkpoint's MTP layer (trained by pdlab train): D verifies real drafts
    after its first step and accepts most, with greedy's tokens."""
    cfg = ModelConfig.tiny(num_nextn_predict_layers=1)
    prompt = list(b"The KV cache holds keys and values, not hidden states.")
    pair = PDPair(cfg, CacheConfig(block_size=BS, num_blocks=64), SchedulerConfig(),
                  backend="torch", attention_config=AttentionConfig(backend="flash_attn_mla"),
                  speculative_config=SpeculativeConfig(num_speculative_tokens=2))  # fmt: skip
    out = pair.generate(prompt, SamplingParams(max_tokens=16))[0]
    assert out.output_token_ids == pair.decode.model.greedy_generate(prompt, 16)
    verifies = [v for v in pair.tracer.filter("verify", "D") if not v["num_placeholders"]]
    assert sum(v["num_accepted"] for v in verifies) > len(verifies)  # > 1 per step
    pair_all_free(pair)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("n", [2, BS, 3 * BS + 1])
def test_pd_as_with_k_mtp_modules_backs_off_k_minus_1_and_equals_greedy(k, n):
    """With K MTP modules (SpeculativeConfig.num_nextn_predict_layers = K; the model here
    has one, run K times, so only the scheduler and the connector act for K: the next test
    runs K modules) P cuts the last K - 1 prompt tokens, D loads the rest and computes them,
    and the tokens are still greedy's; a resent prompt's hit on D is one block short of
    floor((N - 1) / B) * B. Expectations: NIXL's _prefill_backoff and the coordinator's
    drop in 0.33.0 (tests/upstream compares the scheduler with vLLM's own)."""
    spec = SpeculativeConfig(num_speculative_tokens=k, num_nextn_predict_layers=k)
    pair = PDPair(CFG, CacheConfig(block_size=BS, num_blocks=64), SchedulerConfig(),
                  backend="torch", speculative_config=spec)  # fmt: skip
    prompt = _prompt(n)
    outs = [pair.generate(prompt, SamplingParams(max_tokens=5))[0] for _ in range(2)]
    greedy = MODEL.greedy_generate(prompt, 5)
    assert [o.output_token_ids for o in outs] == [greedy, greedy], outs[0].error
    t, rid = pair.tracer, outs[0].request_id
    backoff = k - 1 if n > k - 1 else 0
    cut = t.filter("kv_prefill_backoff", "P", req_id=rid)
    assert [e["num_tokens"] for e in cut] == ([backoff] if backoff else [])
    first = t.steps("D", rid)[0][1]
    loaded = n - backoff if backoff else n - 1  # without a backoff, the N - 1 rule
    assert first["num_computed_tokens_before"] == loaded
    hit = t.filter("prefix_hit", "D", req_id=outs[1].request_id)
    assert (hit[0]["num_hit_tokens"] if hit else 0) == max((n - 1) // BS - 1, 0) * BS
    pair_all_free(pair)


@torch.no_grad()
def _module_oracle(model, known, k, p_view=None, loaded=0):
    """0.33.0's multi-module drafts, recomputed with no cache from the model's own layers:
    the target over ``known[:-1]``, then module ``j`` over the same positions, reading at
    position ``p`` token ``p + 1 + j`` (of ``known`` and the drafts so far; of ``p_view``
    below ``loaded``, where P wrote the rows) and ``shared_head`` of module ``j - 1``'s
    output; draft ``j + 1`` is its argmax at the last position."""
    n, modules = len(known) - 1, model.mtp_layers
    prev, drafts = model(torch.tensor(known[:-1]), torch.arange(n)), []
    for j in range(k):
        mtp = modules[j % len(modules)]
        seq = known + drafts
        ids = torch.tensor([(p_view if p < loaded else seq)[p + 1 + j] for p in range(n)])
        out = mtp(ids, torch.arange(n), prev)
        drafts.append(int(mtp.compute_logits(out[-1:])[0].argmax()))
        prev = mtp.shared_head(out)
    return drafts


@pytest.mark.parametrize("k", [2, 3])
def test_k_mtp_modules_draft_as_0_33_0_and_p_backs_off_k_minus_1(k):
    """A model with K MTP modules (random weights): module j drafts token j, after
    rejections the later modules' rows are rebuilt, and at a chunk's end the next prompt
    tokens stand in for drafts. Colocated, every draft equals the cacheless oracle reading
    the known tokens. Under P/D, P backs off K - 1 prompt tokens (the trace's
    kv_prefill_backoff) and D's drafts equal the oracle in which the rows P wrote, below
    the L tokens D loads, read P's tokens (its truncated prompt, its sampled token, its
    drafts): D never rebuilds them, as 0.33.0 (NIXL's _prefill_backoff docstring), and
    reading D's tokens there instead gives other drafts."""
    cfg = ModelConfig.tiny(weights="random", num_nextn_predict_layers=k)
    model = DeepseekV2ForCausalLM(cfg)
    spec = SpeculativeConfig(num_speculative_tokens=k, num_nextn_predict_layers=k)
    chunks = SchedulerConfig(long_prefill_token_threshold=5)  # prompts cut in chunks
    e = LLMEngine(cfg, CacheConfig(block_size=BS, num_blocks=64), model=model,
                  backend="torch", scheduler_config=chunks,
                  speculative_config=spec)  # fmt: skip
    prompts = [_prompt(n) for n in (5, 3 * BS + 1, 9)]
    outs = e.generate(prompts, SamplingParams(max_tokens=10))
    assert [o.output_token_ids for o in outs] == [model.greedy_generate(p, 10) for p in prompts]
    tokens = {o.request_id: [*o.prompt_token_ids, *o.output_token_ids] for o in outs}
    for d in e.tracer.filter("draft"):
        got = d["draft_token_ids"]
        known = tokens[d["req_id"]][: d["hidden_position"] + 2]
        assert got == _module_oracle(model, known, k)[: len(got)]

    pair = PDPair(cfg, CacheConfig(block_size=BS, num_blocks=64), SchedulerConfig(),
                  backend="torch", speculative_config=spec)  # fmt: skip
    prompt = _prompt(9)
    out = pair.generate(prompt, SamplingParams(max_tokens=6))[0]
    assert out.output_token_ids == model.greedy_generate(prompt, 6)
    t, rid = pair.tracer, out.request_id
    assert [c["num_tokens"] for c in t.filter("kv_prefill_backoff", "P", req_id=rid)] == [k - 1]
    loaded = len(prompt) - (k - 1)
    assert t.steps("D", rid)[0][1]["num_computed_tokens_before"] == loaded
    p_draft = t.first("draft", "P")
    assert p_draft["hidden_position"] == loaded - 1
    p_view = [*prompt[:loaded], p_draft["next_token"], *p_draft["draft_token_ids"]]
    full = [*prompt, *out.output_token_ids]
    kept_differs = False
    for d in t.filter("draft", "D", req_id=rid):
        got, known = d["draft_token_ids"], full[: d["hidden_position"] + 2]
        assert got == _module_oracle(model, known, k, p_view, loaded)[: len(got)]
        kept_differs |= got != _module_oracle(model, known, k)[: len(got)]
    assert kept_differs
    pair_all_free(pair)
