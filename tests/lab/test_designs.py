"""The four first-token designs: each gives the colocated greedy tokens (block-size edge
cases, one process and two), records what crossed and what D computed as the cost model
says, routes D's first step as its design implies, and refuses what it cannot honour; the
tokens counted as loaded are checked against those written."""

import random

import pytest
from conftest import pair_all_free

from pdlab.disagg.designs import MODES, check_first_token_mode, transfer_bytes
from pdlab.disagg.pair import PDPair
from pdlab.engine.config import CacheConfig, ModelConfig, ParallelConfig, SchedulerConfig
from pdlab.engine.distributed.kv_transfer.pd_connector import PDConnector
from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM
from pdlab.engine.request import SamplingParams
from pdlab.sim.costs import first_token_forward_cost, lm_head_cost
from pdlab.sim.designs import price_first_token
from pdlab.sim.profiles import device_profile

CFG = ModelConfig.tiny()
MODEL = DeepseekV2ForCausalLM(CFG)
BS = 4
# N < B, N == B, N == kB, kB + 1, and a single token
LENGTHS = [3, BS, 3 * BS, 3 * BS + 1, 1]
rng = random.Random(19)
PROMPTS = [[rng.randrange(CFG.vocab_size) for _ in range(n)] for n in LENGTHS]


def _pair(mode, pcp=1, **kw):
    return PDPair(
        CFG,
        CacheConfig(block_size=BS, num_blocks=64),
        SchedulerConfig(),
        backend="torch",
        parallel_config=ParallelConfig(prefill_context_parallel_size=pcp),
        first_token=mode,
        **kw,
    )


@pytest.mark.parametrize("pcp", [1, 2])
@pytest.mark.parametrize("mode", MODES)
def test_each_design_gives_the_colocated_tokens_and_routes_as_it_implies(mode, pcp):
    pair = _pair(mode, pcp)
    outs = pair.generate(PROMPTS, SamplingParams(max_tokens=4))
    for p, o in zip(PROMPTS, outs):
        assert o.output_token_ids == MODEL.greedy_generate(p, 4), (mode, len(p))
        assert o.prompt_token_ids == p and o.finish_reason == "length"
    pair_all_free(pair)
    for i, p in enumerate(PROMPTS):
        rid = f"req-{i}"
        first = pair.tracer.filter("route", "D", req_id=rid)[0]
        ft = pair.tracer.first("first_token", req_id=rid)
        n = len(p)
        # What D's first step is, by design: position N-1 again (recompute), P's token
        # as a prompt token over N (append_prompt), or that token as a decode over N.
        expect = {
            "recompute": (n - 1, True),
            "append_prompt": (n, True),
            "first_token": (n, False),
            "hidden_state": (n, False),
        }[mode]
        if n == 1 and mode == "recompute":
            expect = (0, True)  # nothing before the only prompt token: a fresh prefill
        assert (first["num_computed_tokens"], first["is_prefilling"]) == expect
        prefill_row = first["is_prefilling"] and pcp > 1
        assert first["forward"] == ("forward_mha" if prefill_row else "forward_mqa")
        assert (ft["d_first_forward"], ft["d_first_is_prefilling"]) == (
            first["forward"],
            first["is_prefilling"],
        )
        # Where token 1 became known: on P for the designs that send it, else on D.
        p_step = pair.tracer.first("sample", "P", req_id=rid).step
        d_step = pair.tracer.filter("sample", "D", req_id=rid)[0].step
        on_p = mode in ("first_token", "append_prompt")
        assert (ft["known_on"], ft["known_step"]) == (("P", p_step) if on_p else ("D", d_step))


@pytest.mark.parametrize("mode", MODES)
def test_recorded_bytes_and_flops_are_the_cost_models(mode):
    pair = _pair(mode)
    pair.generate(PROMPTS, SamplingParams(max_tokens=2))
    for i, p in enumerate(PROMPTS):
        ft = pair.tracer.first("first_token", req_id=f"req-{i}")
        n = len(p)
        assert ft["kv_bytes"] + ft["payload_bytes"] == transfer_bytes(CFG, mode, n, BS, e=4)
        assert ft["elem_bytes"] == 4  # the pair runs in fp32
        d_flops, latency_s = price_first_token(ft, CFG, device_profile("H200"))
        if mode == "recompute":
            c = first_token_forward_cost(CFG, n - 1, ft["d_first_forward"], e=4)
            assert d_flops == c.flops > 0 and latency_s > 0
        elif mode == "hidden_state":
            assert d_flops == lm_head_cost(CFG, 1, e=4).flops
            assert ft["payload_bytes"] == CFG.hidden_size * 4
        else:
            assert d_flops == 0 and latency_s == 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ends", ["stop", "max_tokens"])
def test_when_ps_token_ends_the_request_every_design_agrees(mode, ends):
    p = PROMPTS[2]
    t1 = MODEL.greedy_generate(p, 1)[0]
    sp = (
        SamplingParams(max_tokens=1)
        if ends == "max_tokens"
        else SamplingParams(max_tokens=4, stop_token_ids=(t1,))
    )
    pair = _pair(mode)
    (out,) = pair.generate([p], sp)
    assert out.output_token_ids == [t1]
    assert out.finish_reason == ("length" if ends == "max_tokens" else "stop")
    pair_all_free(pair)


@pytest.mark.parametrize("mode", ["first_token", "append_prompt", "hidden_state"])
def test_a_design_refuses_sampling_it_cannot_honour_in_one_line(mode):
    sp = SamplingParams(temperature=0.8, seed=3)
    with pytest.raises(ValueError) as e:
        check_first_token_mode(mode, sp)
    msg = str(e.value)
    assert "\n" not in msg and f"first_token={mode!r}" in msg and "temperature=0.8" in msg
    pair = _pair(mode)
    with pytest.raises(ValueError, match=f"first_token={mode!r} cannot honour"):
        pair.add_request(PROMPTS[0], sp)
    assert not pair.has_unfinished_requests()
    assert check_first_token_mode("recompute", sp) == "recompute"
    with pytest.raises(ValueError, match=r"first_token='prefill' is invalid: expected one of"):
        _pair("prefill")


class CountsOneLess(PDConnector):
    """The N-1 against N bug: the scheduler is told one token fewer than P's blocks hold
    (the ``- 1`` applied where the load is counted), while the worker writes them all."""

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        n, load_async = super().get_num_new_matched_tokens(request, num_computed_tokens)
        return (n - 1 if n else n), load_async


def test_a_planted_n_minus_one_load_count_is_named_and_ends_the_request_cleanly():
    pair = _pair("recompute")
    bad = CountsOneLess("decode", "D", pair.transport, BS, emit=pair.tracer.sink("D"))
    pair.decode.scheduler.connector = bad
    pair.decode.runner.connector_worker = bad
    pair.decode.kv_connector = bad
    bad.register_kv_caches(pair.decode.runner.kv_caches)
    pair.d_connector = bad
    # 12 tokens: 3 blocks either way, 12 written, 11 counted (13 would also change the
    # block count, and fail the read before the count could be checked)
    p = PROMPTS[2]
    (out,) = pair.generate([p], SamplingParams(max_tokens=3))
    assert out.finish_reason == "error" and out.output_token_ids == []
    (m,) = pair.tracer.filter("kv_load_mismatch", "D")
    assert (m["num_counted_tokens"], m["num_written_tokens"]) == (len(p) - 1, len(p))
    assert out.error == m["error"] and "\n" not in m["error"]
    assert f"counts {len(p) - 1} tokens loaded but the worker wrote {len(p)}" in out.error
    pair_all_free(pair)
    # The same pair, the bug removed, gives the colocated tokens.
    good = _pair("recompute")
    assert good.generate([p], SamplingParams(max_tokens=3))[0].output_token_ids == (
        MODEL.greedy_generate(p, 3)
    )
    assert good.tracer.filter("kv_load_mismatch") == []


@pytest.mark.slow
def test_each_design_over_two_processes_equals_colocated():
    from pdlab.disagg.launch import run_pd_procs

    for mode in ("first_token", "append_prompt", "hidden_state"):
        r = run_pd_procs(
            PROMPTS[:4],
            CFG,
            CacheConfig(block_size=BS, num_blocks=64),
            SchedulerConfig(),
            SamplingParams(max_tokens=3),
            timeout_s=60,
            first_token=mode,
        )
        assert r.errors == {}, (mode, r.errors)
        for i, p in enumerate(PROMPTS[:4]):
            assert r.prefill.outputs[f"req-{i}"]["output_token_ids"] == (
                MODEL.greedy_generate(p, 3)
            ), (mode, len(p))
            ft = r.tracer.first("first_token", req_id=f"req-{i}")
            assert ft["kv_bytes"] + ft["payload_bytes"] == transfer_bytes(
                CFG, mode, len(p), BS, e=4
            )
        assert r.prefill.num_free_blocks == r.prefill.num_blocks
        assert r.decode.num_free_blocks == r.decode.num_blocks


def test_pd_compares_the_designs_and_runs_each_from_the_command_line(capsys):
    from pdlab.cli import main

    assert main(["pd", "--procs", "1", "--compare-designs", "--prompt", "abcdefgh"]) == 0
    out = capsys.readouterr().out
    assert all(m in out for m in MODES) and "NO" not in out
    assert main(["pd", "--procs", "1", "--first-token", "append_prompt", "--prompt", "abc"]) == 0
    assert "'abc' ->" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["pd", "--first-token", "guess"])
    assert e.value.code == 2 and "invalid choice: 'guess'" in capsys.readouterr().err


def test_the_pictures_are_drawn_from_the_trace():
    from matplotlib.colors import to_rgb

    from pdlab.ui.plots_designs import NOT_ELIGIBLE, _grid_cells, plot_cache_grid, plot_timeline

    traces = {}
    p = PROMPTS[3]  # 13 tokens
    for mode in MODES:
        pair = _pair(mode, pcp=2)
        pair.generate([p], SamplingParams(max_tokens=3))
        traces[mode] = pair.tracer
    layers, n = CFG.num_hidden_layers, len(p)
    for mode, trace in traces.items():
        got_layers, got_n, cells = _grid_cells(trace, "req-0")
        assert (got_layers, got_n) == (layers, n)
        first = trace.filter("route", "D", req_id="req-0")[0]["num_computed_tokens"]
        assert [q for (row, q), k in cells.items() if row == 0 and k == "computed"] == [first]
        assert all(cells[0, q] == "held" for q in range(first))
        top = cells.get((layers, n - 1))
        assert top == {"hidden_state": "shipped", "recompute": "computed"}.get(mode, "token")
    assert len(plot_cache_grid(traces).axes) >= len(MODES)
    fig = plot_timeline(traces["recompute"])
    d_routes = traces["recompute"].filter("route", "D", req_id="req-0")
    red = [r for r in fig.axes[0].patches if r.get_facecolor()[:3] == to_rgb(NOT_ELIGIBLE)]
    assert len(red) == sum(not e["decode_graph_eligible"] for e in d_routes) == 1
