"""``pdlab sim``: its per-step costs are the cost model's for the same batch, it is
deterministic for a seed, and with no arrivals the routing changes nothing."""

import dataclasses

import pytest
import torch

from pdlab.cli import main
from pdlab.disagg.designs import MODES
from pdlab.engine.config import ModelConfig
from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM
from pdlab.sim.kernel_costs import decode_path_cost, prefill_path_cost, shared_weight_bytes
from pdlab.sim.profiles import device_profile
from pdlab.sim.report import summarize
from pdlab.sim.simulator import ROUTINGS, SimConfig, simulate

TINY = ModelConfig.tiny()
H200 = device_profile("H200")
# The tiny model's steps take a fraction of a microsecond on an H200: 20 us of simulated
# time is about a hundred steps and thirty arrivals.
BASE = SimConfig(
    batch_size=3,
    context=40,
    arrival_rate=1e6,
    prompt_len=24,
    output_len=4,
    duration_s=2e-5,
    block_size=4,
    prompt_dist="uniform",
    seed=7,
)


def _dense_params_per_layer(cfg: ModelConfig) -> int:
    """The linear weights of one layer outside the attention kernels, counted on the
    model itself: everything but kv_b_proj (absorbed or up-projecting) and the norms."""
    layer = DeepseekV2ForCausalLM(cfg).model.layers[0]
    return sum(
        m.weight.numel()
        for name, m in layer.named_modules()
        if isinstance(m, torch.nn.Linear) and not name.endswith("kv_b_proj")
    )


@pytest.mark.parametrize("routing", ROUTINGS)
def test_each_steps_cost_is_the_cost_models_for_that_batch(routing):
    res = simulate(dataclasses.replace(BASE, routing=routing), TINY, H200, gpu="h200")
    layers, e = TINY.num_hidden_layers, 2
    assert res.steps and any(s.num_prefills for s in res.steps) == (routing == "pcp")
    dense = _dense_params_per_layer(TINY)
    for s in res.steps:
        ctx = s.contexts
        dec, pre = ctx[: s.num_decodes], ctx[s.num_decodes :]
        g = s.cost.groups
        assert g["dense"].flops == 2 * len(ctx) * dense * layers
        if dec:
            # The rows one at a time, less what the batch reads once (the absorbed
            # W_UK/W_UV) and the split workspace the simulator leaves out.
            rows = [decode_path_cost(TINY, c, e, num_kv_splits=1) for c in dec]
            flops = sum(r.flops for r in rows)
            nbytes = sum(r.bytes for r in rows) - (len(dec) - 1) * shared_weight_bytes(
                TINY, "decode", 0, e
            )
            assert g["forward_mqa"].flops == pytest.approx(layers * flops, rel=1e-12)
            assert g["forward_mqa"].bytes == pytest.approx(layers * nbytes, rel=1e-12)
        if pre:
            fl = sum(prefill_path_cost(TINY, c, 1, e).flops for c in pre)
            assert g["forward_mha"].flops == pytest.approx(layers * fl, rel=1e-12)
        times = sum(H200.roofline_s(c.flops, c.bytes) for c in g.values())
        launches = 0 if s.decode_graph_eligible else s.cost.eager_launches
        assert s.time_s == pytest.approx(times + launches * H200.launch_overhead_s, rel=1e-12)
        assert s.decode_graph_eligible == (not pre or routing == "v2")


def test_deterministic_for_a_seed():
    a = summarize(simulate(BASE, TINY, H200))
    b = summarize(simulate(BASE, TINY, H200))
    assert a == b and a["arrivals"] > 0
    c = summarize(simulate(dataclasses.replace(BASE, seed=8), TINY, H200))
    assert c != a


def test_with_no_arrivals_every_routing_and_design_gives_the_same_step_times():
    times = {
        (r, d): [
            s.time_s
            for s in simulate(
                dataclasses.replace(BASE, arrival_rate=0.0, routing=r, design=d),
                TINY,
                H200,
            ).steps
        ]
        for r in ROUTINGS
        for d in MODES
    }
    first = next(iter(times.values()))
    assert first and all(t == first for t in times.values())


def test_the_short_extend_costs_the_batch_only_where_it_is_a_prefill_row():
    v3 = ModelConfig.deepseek_v3()
    cfg = dataclasses.replace(
        BASE,
        batch_size=16,
        context=4096,
        prompt_len=4096,
        arrival_rate=50.0,
        duration_s=0.5,
        prompt_dist="fixed",
        block_size=64,
    )
    res = {
        (r, d): summarize(simulate(dataclasses.replace(cfg, routing=r, design=d), v3, H200))
        for r in ("v2", "pcp")
        for d in MODES
    }
    for d in MODES:
        assert res["v2", d]["non_uniform_share"] == 0
    # Under PCP only the designs whose first row is still prefilling break the batch.
    for d in ("recompute", "append_prompt"):
        assert res["pcp", d]["non_uniform_share"] > 0
        assert res["pcp", d]["tpot_p99_s"] > res["v2", d]["tpot_p99_s"]
    for d in ("first_token", "hidden_state"):
        assert res["pcp", d] == {**res["v2", d], "routing": "pcp"}


def test_sim_command_prints_the_grid_and_writes_plots(tmp_path, capsys):
    argv = ["sim", "--duration", "0.1", "--batch-size", "8", "--plots", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert all(m in out for m in MODES) and "V2 + PCP" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"sim_step_time_{m}.png" for m in MODES] + ["sim_tpot.png"]
    )
    with pytest.raises(SystemExit) as e:
        main(["sim", "--rate", "-1"])
    assert e.value.code == 2 and "--rate" in capsys.readouterr().err


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_sim_explorer_reruns_as_its_controls_change(lang):
    from pdlab.ui.widgets import SimExplorer

    w = SimExplorer(lang=lang, duration_s=0.3)
    assert w.error.value == "" and w.result.config.routing == "v2"
    before = w.summary.value
    w.routing.value = "pcp"
    w.context.value = 17  # 128K tokens
    assert w.error.value == ""
    assert w.result.config == dataclasses.replace(
        w.config, routing="pcp", context=1 << 17, prompt_len=1 << 17
    )
    assert w.summary.value != before
    assert summarize(w.result)["non_uniform_share"] > 0
    assert ("运行中的解码数" in w.batch.description) == (lang == "zh")


V3 = ModelConfig.deepseek_v3()
# DeepSeek-V3's widths, 16 decodes over 4K tokens, 4K-token prompts: about 20 ms a step.
V3_BASE = SimConfig(
    batch_size=16, context=4096, prompt_len=4096, arrival_rate=40.0, duration_s=0.4, seed=3
)


def _step_at(res, t: float):
    """The step during which time ``t`` falls (or the one starting at ``t``)."""
    return next(s for s in res.steps if s.t <= t < s.t + s.time_s or s.t == t)


def test_hidden_state_token_1_is_one_lm_head_row_in_the_step_its_kv_land():
    hs = simulate(dataclasses.replace(V3_BASE, design="hidden_state"), V3, H200)
    rc = simulate(dataclasses.replace(V3_BASE, design="recompute"), V3, H200)
    assert hs.requests and len(hs.requests) == len(rc.requests)
    for r in hs.requests:
        landing = _step_at(hs, r.arrival)
        assert r.ttft_d == pytest.approx(landing.t + landing.time_s - r.arrival)
    for s in hs.steps:  # one lm_head per step: the hidden states join the batch's product
        assert [g for g in s.cost.groups if "lm_head" in g] in ([], ["lm_head"])
    rows = [s for s in hs.steps if s.cost.groups["lm_head"].flops > 2 * len(s.query_lens)
            * V3.vocab_size * V3.hidden_size]  # fmt: skip
    assert rows, "no step carried P's hidden states"
    # Token 1 a step earlier than recompute's, token 2 as early as first_token's.
    ft = simulate(dataclasses.replace(V3_BASE, design="first_token"), V3, H200)
    a, b = summarize(hs), summarize(rc)
    assert a["ttft_d_p50_s"] < b["ttft_d_p50_s"] - 0.5 * b["tpot_p50_s"]
    assert a["t2t_d_p50_s"] == pytest.approx(summarize(ft)["t2t_d_p50_s"], rel=0.02)


def test_an_idle_d_agrees_with_the_designs_table():
    """No running decodes: D's step for token 1 is what design_point models after the
    transfer (lm_head alone for hidden_state, the one-token forward for recompute)."""
    from pdlab.sim.designs import design_point

    for design, forward in (("hidden_state", ""), ("recompute", "forward_mqa")):
        cfg = dataclasses.replace(V3_BASE, batch_size=0, arrival_rate=1.0, duration_s=3.0,
                                  design=design)  # fmt: skip
        res = simulate(cfg, V3, H200)
        assert len(res.requests) >= 2
        _, _, latency = design_point(V3, design, 4096, 1, forward, H200, 2)
        compute = latency - H200.transfer_s(1 + (V3.hidden_size * 2 if forward == "" else 0))
        first = res.requests[0]  # D is idle when it lands
        assert first.ttft_d == pytest.approx(compute, rel=1e-9)


def test_the_tail_is_a_p99_only_over_enough_samples():
    from pdlab.sim.report import P99_MIN_SAMPLES, percentile, tail

    few = [float(i) for i in range(P99_MIN_SAMPLES - 1)]
    assert tail(few) == ("max", max(few))
    many = [float(i) for i in range(1000)]
    assert tail(many) == ("p99", percentile(many, 99)) and tail(many)[1] < max(many)
    s = summarize(simulate(dataclasses.replace(V3_BASE, duration_s=0.2), V3, H200))
    assert s["steps"] < P99_MIN_SAMPLES and s["tpot_tail"] == "max"
    # The default run has enough steps for a real p99 (about 300 for DeepSeek-V3 as
    # deployed, its all-to-all overlapped).
    d = summarize(simulate(SimConfig(), V3, H200))
    assert d["steps"] >= 1.5 * P99_MIN_SAMPLES and d["tpot_tail"] == "p99"


@pytest.mark.parametrize("k", [1, 2])
def test_mtp_pads_the_first_row_and_keeps_the_batch_uniform_under_v2(k):
    cfg = dataclasses.replace(V3_BASE, num_speculative_tokens=k)
    res = simulate(cfg, V3, H200)
    assert res.reorder_batch_threshold == max(512, 1 + k)  # FLASH_ATTN_MLA on an H200
    arrived = [s for s in res.steps if s.tokens != s.verifying_rows * cfg.tokens_per_verify_step]
    assert arrived, "no step took an arrival"
    for s in res.steps:
        assert s.query_lens == [1 + k] * len(s.query_lens)  # drafts, or K placeholders
        # The runner subtracted the drafts: D's padded row is prefill_runs_as_decode.
        assert s.decode_graph_eligible and s.uniform_decode and s.num_prefills == 0
    # Under PCP the padded first row is a forward_mha row.
    pcp = simulate(dataclasses.replace(cfg, routing="pcp"), V3, H200)
    assert any(s.num_prefills for s in pcp.steps)
    assert all(not s.uniform_decode for s in pcp.steps if s.num_prefills)
    # A row emits 1 + a + ... + a^K tokens per verifying step; a first row one token.
    a = cfg.acceptance_rate
    assert cfg.tokens_per_verify_step == pytest.approx(sum(a**i for i in range(k + 1)))
    s0 = summarize(simulate(V3_BASE, V3, H200))
    s1 = summarize(res)
    assert 1 < s1["tokens_per_step"] <= cfg.tokens_per_verify_step
    assert s1["tpot_p50_s"] < s0["tpot_p50_s"]  # more tokens per step than it costs


def test_mtp_default_is_deepseeks_published_acceptance_rate():
    from pdlab.catalog import text
    from pdlab.sim.simulator import MTP_ACCEPTANCE_RATE, MTP_ACCEPTANCE_SOURCE

    assert MTP_ACCEPTANCE_RATE == 0.85 == SimConfig().acceptance_rate
    assert "2412.19437" in MTP_ACCEPTANCE_SOURCE and "85-90%" in MTP_ACCEPTANCE_SOURCE
    for lang in ("en", "zh"):
        caption = text(lang, "sim_caption_mtp", k=1, a="85%")
        assert "2412.19437" in caption and "5.4.3" in caption and "85-90%" in caption


def test_dcp_keeps_the_short_extend_a_decode_and_drops_a_uniform_backends_threshold():
    from pdlab.sim.simulator import builder_for

    # FLASH_ATTN_MLA keeps its threshold under DCP: the same steps as V2.
    v2 = simulate(V3_BASE, V3, H200)
    dcp = simulate(dataclasses.replace(V3_BASE, routing="dcp"), V3, H200)
    assert [s.time_s for s in dcp.steps] == [s.time_s for s in v2.steps]
    # With an fp8 cache vLLM picks FLASHMLA (128, UNIFORM), which DCP drops to 1: a verifying
    # row of 1 + K tokens is then longer than the threshold.
    fp8 = dataclasses.replace(V3_BASE, kv_cache_dtype="fp8")
    b, name = builder_for(fp8, "h200")
    assert (name, b.reorder_batch_threshold) == ("FLASHMLA", 128)
    b, _ = builder_for(dataclasses.replace(fp8, routing="dcp"), "h200")
    assert b.reorder_batch_threshold == 1
    res = simulate(dataclasses.replace(fp8, routing="dcp", num_speculative_tokens=1), V3, H200)
    assert all(s.num_prefills == len(s.query_lens) for s in res.steps)
    # Without MTP, under DCP the one-token rows are decodes (use_pcp stays False).
    res = simulate(dataclasses.replace(fp8, routing="dcp"), V3, H200)
    assert all(s.num_prefills == 0 for s in res.steps)


def test_an_fp8_cache_halves_the_kv_bytes_read_and_moved():
    from pdlab.disagg.designs import transfer_bytes

    auto = simulate(V3_BASE, V3, H200)
    fp8 = simulate(dataclasses.replace(V3_BASE, kv_cache_dtype="fp8"), V3, H200)
    a = auto.steps[0].cost.groups["forward_mqa"].parts
    b = fp8.steps[0].cost.groups["forward_mqa"].parts
    ka, kb = dict((n, by) for n, _, by in a), dict((n, by) for n, _, by in b)
    rows = sum(auto.steps[0].contexts) + len(auto.steps[0].contexts)
    layers = V3.num_hidden_layers
    assert ka["mla_decode"] - kb["mla_decode"] == pytest.approx(layers * rows * V3.kv_cache_dim)
    assert transfer_bytes(V3, "recompute", 4096, 64, kv_e=1) * 2 == transfer_bytes(
        V3, "recompute", 4096, 64
    )


def test_sim_command_takes_k_and_the_acceptance_rate(capsys):
    argv = ["sim", "--duration", "0.1", "--batch-size", "4", "--routing", "v2", "--rate", "0"]
    assert main([*argv, "--num-speculative-tokens", "1", "--acceptance-rate", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "1.50" in out and "K = 1 speculative tokens" in " ".join(out.split())
    for flag, bad in (("--num-speculative-tokens", "17"), ("--acceptance-rate", "1.5")):
        with pytest.raises(SystemExit) as e:
            main([*argv, flag, bad])
        assert e.value.code == 2 and flag in capsys.readouterr().err
    for name, v in (("num_speculative_tokens", -1), ("acceptance_rate", 2.0)):
        with pytest.raises(ValueError, match=name):
            SimConfig(**{name: v})


def test_sim_command_runs_without_torch():
    """``pdlab sim`` routes with the engine's own rules, none of which needs torch: it
    starts without importing it (torch's import is most of a short run's time)."""
    from fresh import loaded_by

    assert loaded_by(["sim", "--duration", "0.05", "--batch-size", "4"])["torch"] is False


# ---- bounds that keep a run finite, and the sim's own surface (issue 42, items 2 and 6) --
@pytest.mark.parametrize(
    "argv, needle",
    [
        (
            ["--rate", "1e12"],
            "--rate 1e+12 is invalid: expected a number from 0 to 2000 (at most 10000 "
            "arrivals in --duration 5)",
        ),
        (["--duration", "1e9"], "argument --duration: 1e9 is not a number > 0 and <= 300"),
        (["--rate", "100", "--duration", "300"], "--rate 100 is invalid: expected a number"),
    ],
)
def test_sim_options_that_would_not_end_are_one_line(argv, needle, capsys):
    with pytest.raises(SystemExit) as e:
        main(["sim", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and err[-1].startswith("pdlab sim: error: ") and needle in err[-1]


def test_sim_config_bounds_the_arrivals_and_the_duration():
    from pdlab.sim.simulator import MAX_SIM_ARRIVALS, MAX_SIM_DURATION_S, SimConfig

    with pytest.raises(
        ValueError, match=r"^duration_s=.* is invalid: expected a number from 0 to 300"
    ):
        SimConfig(duration_s=1e9)
    with pytest.raises(
        ValueError, match=r"^arrival_rate=.* is invalid: .*at most 10000 arrivals in duration_s=5"
    ):
        SimConfig(arrival_rate=1e12)
    SimConfig(duration_s=MAX_SIM_DURATION_S, arrival_rate=MAX_SIM_ARRIVALS / MAX_SIM_DURATION_S)


def test_sim_takes_the_gpu_in_any_case_and_names_an_unwritable_json(capsys):
    argv = ["sim", "--duration", "0.05", "--batch-size", "4", "--design", "recompute"]
    assert main([*argv, "--routing", "v2", "--gpu", "h200"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main([*argv, "--routing", "v2", "--json", "/dev/full"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1
    assert err[0] == "pdlab sim: error: --json /dev/full is not writable: No space left on device"
