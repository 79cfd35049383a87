"""LLMEngine with a SpeculativeConfig: the config reaches the scheduler and the attention
builders' threshold, and each step ends as upstream's EngineCore.post_step does (the
runner's drafts go to Scheduler.update_draft_token_ids). The model runner here is the
FakeModelRunner behind the engine's call signature (the real runner's drafter is
pdlab/engine/worker/gpu/model_runner.py's), so the test sees the scheduler's side only."""

import pytest

from pdlab.engine.config import AttentionConfig, ModelConfig, SpeculativeConfig
from pdlab.engine.llm_engine import LLMEngine
from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM
from pdlab.engine.request import SamplingParams
from pdlab.engine.worker.fake_runner import FakeModelRunner, seeded_drafter

CFG = ModelConfig.tiny()
MODEL = DeepseekV2ForCausalLM(CFG)


def target(rid, pos):
    return 65 + (pos * 5 + len(rid)) % 26


class FakeRunnerInEngine:
    """The engine's view of a runner: ``execute_model(so, step)``, ``req_errors`` and,
    when it drafts, ``take_draft_token_ids``."""

    def __init__(self, k, rate):
        self.fake = FakeModelRunner(
            sample=target, num_speculative_tokens=k, draft=seeded_drafter(target, rate, 5)
        )
        self.req_errors = {}
        self.taken = 0

    def execute_model(self, so, step=0):
        return self.fake.execute_model(so)

    def take_draft_token_ids(self):
        self.taken += 1
        return self.fake.take_draft_token_ids()


def engine(spec=None, **kw):
    return LLMEngine(CFG, model=MODEL, speculative_config=spec, **kw)


def test_the_config_reaches_the_scheduler_and_the_builders_threshold():
    e = engine(SpeculativeConfig("mtp", 2), attention_config=AttentionConfig("triton_mla"))
    assert e.attention_config.num_speculative_tokens == 2
    assert e.scheduler.num_spec_tokens == 2 and e.scheduler.num_lookahead_tokens == 2
    # TRITON_MLA is UNIFORM: its threshold rises to 1 + K (effective_threshold).
    assert e.runner.attn_metadata_builder.reorder_batch_threshold == 3
    assert e.tracer.meta["routing"]["local"]["reorder_batch_threshold"] == 3
    plain = engine(attention_config=AttentionConfig("triton_mla"))
    assert plain.speculative_config is None and plain.scheduler.num_spec_tokens == 0
    assert plain.runner.attn_metadata_builder.reorder_batch_threshold == 1


def test_a_bad_speculative_config_is_one_line():
    with pytest.raises(ValueError, match=r"^speculative_config=2 is invalid: expected None or"):
        engine(2)


def test_sampling_above_temperature_0_is_refused_when_added_and_nothing_is_queued():
    e = engine(SpeculativeConfig("ngram", 1))
    pool = e.scheduler.kv_cache_manager.block_pool
    free = pool.get_num_free_blocks()
    with pytest.raises(ValueError, match=r"^SamplingParams\.temperature=0\.7 is invalid with"):
        e.add_request("hello", SamplingParams(temperature=0.7, seed=1))
    assert not e.has_unfinished_requests() and pool.get_num_free_blocks() == free
    assert e.step() == []  # nothing to run
    rid = e.add_request("hello", SamplingParams(max_tokens=2))  # greedy is fine
    assert e.has_unfinished_requests() and rid


@pytest.mark.parametrize("k, rate", [(1, 0.0), (2, 0.6), (2, 1.0)])
def test_the_engine_hands_the_runners_drafts_to_the_scheduler(k, rate):
    prompts = ["spec", "decoding on D", "x"]
    sp = SamplingParams(max_tokens=7)
    want = []
    e0 = engine()
    e0.runner = FakeRunnerInEngine(0, 0.0)
    want = [o.output_token_ids for o in e0.generate(prompts, sp)]

    e = engine(SpeculativeConfig("ngram", k))
    e.runner = runner = FakeRunnerInEngine(k, rate)
    got = [o.output_token_ids for o in e.generate(prompts, sp)]
    assert got == want  # the target's greedy tokens, drafts or not
    assert runner.taken > 0
    verdicts = e.tracer.filter("spec_decode", "local")
    assert verdicts and all(
        v["num_accepted_tokens"] + v["num_rejected_tokens"] == v["num_draft_tokens"]
        for v in verdicts
    )
    # The step events show the drafts each row carried.
    rows = [r for s in e.tracer.filter("step", "local") for r in s["scheduled"]]
    assert any(r["spec_token_ids"] for r in rows)
    for r in rows:
        assert len(r["spec_token_ids"]) <= k < r["num_scheduled_tokens"] or not r["spec_token_ids"]
    m = e.scheduler.kv_cache_manager
    assert m.num_free_blocks == e.cache_config.num_blocks


def test_without_a_config_the_engine_asks_for_no_drafts():
    e = engine()
    e.runner = runner = FakeRunnerInEngine(0, 0.0)
    e.generate(["abc"], SamplingParams(max_tokens=3))
    assert runner.taken == 0
    assert all(r["spec_token_ids"] == [] for s in e.tracer.filter("step") for r in s["scheduled"])


class WrongRunner(FakeRunnerInEngine):
    """A runner whose answer for request ``bad`` is ``tokens`` (issue 42, item 3)."""

    def __init__(self, k, tokens):
        super().__init__(k, 0.5)
        self.tokens = tokens

    def execute_model(self, so, step=0):
        out = self.fake.execute_model(so)
        for i, rid in enumerate(out.req_ids):
            if rid == "bad" and out.sampled_token_ids[i]:
                out.sampled_token_ids[i] = list(self.tokens)
        return out


@pytest.mark.parametrize("k", [0, 2])
@pytest.mark.parametrize("tokens", [[10**9], [-1], [65, 66, 67, 68]], ids=["big", "neg", "many"])
def test_a_refused_runner_row_ends_with_its_reason_and_frees_its_blocks(k, tokens):
    e = engine(SpeculativeConfig("ngram", k) if k else None)
    e.runner = WrongRunner(k, tokens)
    e.add_request([1, 2, 3, 4, 5], SamplingParams(max_tokens=4), request_id="bad")
    e.add_request([7, 8, 9], SamplingParams(max_tokens=4), request_id="good")
    e.run_until_done(50)
    bad, good = e.get_output("bad"), e.get_output("good")
    assert bad.finish_reason == "error" and "'bad'" in bad.error
    assert good.finish_reason == "length" and len(good.output_token_ids) == 4
    mgr = e.scheduler.kv_cache_manager
    assert mgr.num_free_blocks == mgr.num_blocks and not e.scheduler.requests
