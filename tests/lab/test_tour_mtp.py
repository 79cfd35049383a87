"""Tour chapter 4 under speculative decoding: D's padded first step, the threshold 1 + K,
the rejected placeholders, the drafter fed h[N-1] and what PCP does, each value read off
the demo's trace, in both languages, whole at 80 and 120 columns."""

import io
import re

import pytest
from rich.cells import cell_len
from rich.console import Console

from pdlab.demo import run_demo
from pdlab.engine.config import ModelConfig
from pdlab.ui import tour_route


@pytest.fixture(scope="module", params=[1, 2])
def demo(request):
    return run_demo(
        29,
        compare=True,
        gpu="h200",
        num_speculative_tokens=request.param,
        model_config=ModelConfig.tiny(weights="random"),
    )


def _render(width, demo, lang):
    c = Console(width=width, record=True, file=io.StringIO(), highlight=False)
    tour_route.chapter4(c, demo, lang)
    out = c.export_text()
    for line in out.splitlines():
        assert cell_len(line) <= width, f"{cell_len(line)} > {width}: {line!r}"
    return re.sub(r"\s+", " ", out)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("width", [80, 120])
def test_chapter4_shows_ds_first_step_under_mtp(demo, width, lang):
    out = _render(width, demo, lang)
    t, rid, k = demo.trace, demo.request_id, demo.num_speculative_tokens
    _, row = t.steps("D", rid)[0]
    assert row["spec_token_ids"] == [-1] * k and row["num_scheduled_tokens"] == 1 + k
    assert f"scheduled_spec_decode_tokens = {[-1] * k}" in out
    assert "_pad_spec_decode" in out and "effective_threshold" in out
    assert "vllm/v1/core/sched/scheduler.py" in out.replace(" ", "")
    route = t.route_of("D", rid)
    assert route["uniform_decode_token_count"] == 1 + k and route["forward"] == "forward_mqa"
    assert f"uniform_decode_token_count = {1 + k}" in out
    n = route["num_prompt_tokens"]
    assert f"query_start_loc = [0, {1 + k}]" in out and f"seq_lens = [{n + k}]" in out
    v, d = t.first("verify", "D", req_id=rid), t.first("draft", "D", req_id=rid)
    assert v["num_placeholders"] == k and str(v["target_token_ids"]) in out
    assert d["hidden_position"] == n - 1 and f"h[{n - 1}]" in out
    assert str(d["draft_token_ids"]) in out
    # Under PCP the padded row is a prefill, split over the ranks.
    p = demo.variant_traces[("v2", 2)].route_of("D", rid)
    assert p["forward"] == "forward_mha" and f"{rid}[0:1]" in out
    # The tokens still agree with colocated decoding without speculative decoding.
    assert demo.tokens_equal


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_chapter4_shows_the_connector_under_mtp(demo, lang):
    """Stop 6: the drafter's row at N - 1 written on P and again on D, the backoff (none
    with one MTP module) and the resent prompt's local hit on D, its trailing block
    dropped behind the connector; every number from the trace."""
    from pdlab.catalog import text

    out = _render(80, demo, lang)
    t, rid, bs = demo.trace, demo.request_id, demo.block_size
    n = t.route_of("D", rid)["num_prompt_tokens"]
    p_draft, d_draft = t.first("draft", "P", req_id=rid), t.first("draft", "D", req_id=rid)
    assert p_draft["hidden_position"] == d_draft["hidden_position"] == n - 1
    assert not t.filter("kv_prefill_backoff", "P")  # one module: P prefills all N
    hit = t.first("prefix_hit", "D", req_id=demo.pd_again_id)["num_hit_tokens"]
    assert hit == ((n - 1) // bs - 1) * bs  # one block less than without a connector
    drop = text(
        lang,
        "mtp_block_drop",
        n=n,
        bs=bs,
        full=(n - 1) // bs * bs,
        d_hit=hit,
        p_hit=t.first("prefix_hit", "P", req_id=demo.pd_again_id)["num_hit_tokens"],
    )
    flat = out.replace(" ", "")  # a Chinese line may wrap between two characters
    assert re.sub(r"\s+", "", drop) in flat
    row = text(lang, "mtp_drafter_row", hp=n - 1, ptok=p_draft["next_token"], dhp=n - 1,
               dtok=d_draft["next_token"])  # fmt: skip
    assert re.sub(r"\s+", "", row) in flat
