"""The notebook widgets' logic, without a browser: set the controls' values the way a reader's
clicks would, and check what the views display (``pdlab/ui/widgets.py``)."""

from __future__ import annotations

import re

import pytest

from pdlab.demo import prompt_of_length, run_demo
from pdlab.engine.config import CacheConfig, ModelConfig, SchedulerConfig
from pdlab.engine.llm_engine import LLMEngine
from pdlab.engine.request import SamplingParams
from pdlab.ui import fmt
from pdlab.ui import widgets as w


def _text(html: str) -> str:
    return (
        re.sub(r"<[^>]+>", "", html)
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#x27;", "'")
    )


def _explorer(**kw) -> w.PDExplorer:
    """A fresh explorer per test: tests never share a mutated widget."""
    return w.PDExplorer(**{"prompt_len": 11, "block_size": 4, "preset": "deepseek-v3", **kw})


def test_pd_explorer_shows_d_first_step_route_kernels_cost_tokens() -> None:
    explorer = _explorer(pcp=2)
    assert explorer.error.value == ""
    assert "query_len = 1, num_computed_tokens = N-1 = 10, num_prompt_tokens = N = 11" in _text(
        explorer.d_step.value
    )
    route = _text(explorer.route.value)
    assert "is_prefilling = 10 < 11 = True" in route and "short_extend" in route
    assert "treat_short_extends_as_decodes = False" in route
    assert route.endswith("forward_mha")
    kernels = _text(explorer.kernels.value)
    for name in ("gather_cache", "kv_b_proj (context)", "merge_attn_states"):
        assert name in kernels
    cost = _text(explorer.cost.value)
    assert "deepseek-v3" in cost and "N-1 = 10" in cost and "all 61 layers" in cost
    assert "▶ forward_mha" in cost
    assert "equal ✓" in _text(explorer.tokens.value)
    assert _text(explorer.tokens.value).endswith("(weights: trained)")
    assert "backend torch" in explorer.status.value
    # What the view shows is what the run's trace recorded.
    r = explorer.run.d_first_step
    assert (r["forward"], r["treat_short_extends_as_decodes"]) == ("forward_mha", False)


def test_pd_explorer_follows_pcp_prompt_length_block_size_preset_backend() -> None:
    explorer = _explorer()
    route = _text(explorer.route.value)
    assert "query_len = 1 <= decode_threshold = 1" in route
    assert "treat_short_extends_as_decodes = True" in route
    assert route.endswith("forward_mqa")
    kernels = _text(explorer.kernels.value)
    assert "mla_decode" in kernels and "gather_cache" not in kernels
    assert "▶ forward_mqa" in _text(explorer.cost.value)

    explorer.prompt_len.value = 40
    assert "num_computed_tokens = N-1 = 39, num_prompt_tokens = N = 40" in _text(
        explorer.d_step.value
    )
    assert "N-1 = 39" in _text(explorer.cost.value)

    explorer.block_size.value = 16
    assert explorer.run.block_size == 16
    assert "N-1 = 39" in _text(explorer.d_step.value)  # independent of the block size

    before = explorer.run
    explorer.preset.value = "tiny"
    assert explorer.run is before  # the preset changes only the cost model
    assert "tiny" in _text(explorer.cost.value) and "all 2 layers" in _text(explorer.cost.value)

    explorer.pcp.value = 2
    assert "is_prefilling = 39 < 40 = True" in _text(explorer.route.value)
    assert _text(explorer.route.value).endswith("forward_mha")
    assert "equal ✓" in _text(explorer.tokens.value)

    # FlashMLA's threshold changes nothing for D's one-token step...
    explorer.pcp.value = 1
    explorer.mla_backend.value = "flashmla"
    assert "decode_threshold = 128" in _text(explorer.route.value)
    assert explorer.run.mla_backend == "flashmla"
    # ...but P's fresh 40-token prompt now takes the decode path too.
    p_first = explorer.run.trace.first("route", "P")
    assert (p_first["query_len"], p_first["forward"]) == (40, "forward_mqa")
    assert explorer.error.value == ""
    traces = [c.value for c in explorer.traces.children]
    assert len(traces) == 2 and "remote_kv_ready" in traces[1] and "admit" in traces[0]


def test_pd_explorer_in_chinese() -> None:
    ex = w.PDExplorer(prompt_len=5, lang="zh", pcp=2)
    assert ex.prompt_len.description == "提示词长度" and ex.mla_backend.description == "MLA 后端"
    assert ex.pcp.description == "prefill_context_parallel_size"
    assert "short_extend 区" in _text(ex.route.value) and "forward_mha" in ex.route.value
    assert "一致 ✓" in _text(ex.tokens.value)
    with pytest.raises(ValueError, match="lang"):
        w.PDExplorer(lang="fr")


def test_run_demo_and_route_text() -> None:
    run = run_demo(9, block_size=2, max_tokens=3)
    r = run.d_first_step
    assert (r["query_len"], r["num_computed_tokens"], r["num_prompt_tokens"]) == (1, 8, 9)
    assert r["forward"] == "forward_mqa" and run.tokens_equal
    assert run.remote_kv_ready["num_computed_tokens_before_adjust"] == 9
    assert run.kernels("D")[1:] == ["q_nope @ W_UK_T", "mla_decode", "o_latent @ W_UV"]
    assert run.traced_cost("D").flops > 0
    assert run.d_first_step["forward"] in w.route_text(run.d_first_step)
    assert len(prompt_of_length(50)) == 50
    assert prompt_of_length(50) == prompt_of_length(60)[:50]
    with pytest.raises(ValueError, match="n=0"):
        prompt_of_length(0)


def test_step_player_shows_each_step() -> None:
    eng = LLMEngine(
        ModelConfig.tiny(),
        CacheConfig(block_size=4),
        SchedulerConfig(max_num_batched_tokens=8),
        backend="torch",
    )
    eng.generate(["twelve chars", "hi"], SamplingParams(max_tokens=2))
    player = w.StepPlayer(eng.tracer)
    assert player.instance == "local" and player.slider.min == 1
    first = _text(player.table.value)
    assert "0 → 8" in first and "admit" in _text(player.events.value)
    player.slider.value = 2
    second = _text(player.table.value)
    assert second != first and "8 → 12" in second
    rows = eng.tracer.step_rows("local", 2)
    assert {r["req_id"] for r in rows} == {"local-0", "local-1"}
    with pytest.raises(ValueError):
        w.StepPlayer(eng.tracer, "D")


def test_block_pool_explorer_add_step_free() -> None:
    pool = w.BlockPoolExplorer(block_size=4, num_blocks=12)
    assert all(b["state"] == "free" for b in w.pool_state(pool.scheduler))
    pool.add("the cat sat on the mat")
    pool.step()
    pool.add("the cat sat on the hat")
    pool.step()
    state = w.pool_state(pool.scheduler)
    shared = [b for b in state if b["ref_cnt"] == 2]
    assert [b["block_id"] for b in shared] == [0, 1, 2, 3]
    assert all(b["owners"] == ["r0", "r1"] for b in shared)
    assert "prefix_hit" in pool.log_html.value
    assert pool.request.options == ("r0", "r1")

    pool.free("r0")
    state = w.pool_state(pool.scheduler)
    assert [b["state"] for b in state[4:6]] == ["cached", "free"]  # r0's own full block stays
    assert "r0" not in pool.request.options and "cached" in pool.pool_html.value

    pool.prompt.value = "x" * 100  # too long for 12 blocks of 4: shown, not raised
    pool.add_button.click()
    assert "too small" in pool.error_html.value
    pool.reset_button.click()
    assert pool.error_html.value == "" and pool.scheduler.requests == {}


def test_show_source_reads_the_package() -> None:
    from pdlab.engine.core.sched.scheduler import Scheduler

    code = fmt.show_source(Scheduler._update_waiting_for_remote_kv)
    assert code.data.startswith("# pdlab/engine/core/sched/scheduler.py, line ")
    assert "request.num_computed_tokens = request.num_tokens - 1" in code.data
    part = fmt.show_source(Scheduler.schedule, start="# First the RUNNING", end="req_index += 1")
    assert part.data.splitlines()[1] == "# First the RUNNING requests."
    assert "req_index += 1" in part.data.rstrip().splitlines()[-1]
    with pytest.raises(ValueError, match="start"):
        fmt.show_source(Scheduler.schedule, start="no such line")


def test_formatting_helpers() -> None:
    assert fmt.flops(33.554e6) == "33.6 MFLOP" and fmt.nbytes(1152) == "1.15 kB"
    assert fmt.nbytes(512) == "512 B" and fmt.ratio(120.4, 1) == "120×" and fmt.tokens(4096) == "4K"
    assert "&lt;b&gt;" in fmt.html_table(["x"], [["<b>"]])
