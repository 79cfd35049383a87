"""``pdlab sim``: its per-step costs are the cost model's for the same batch, it is
deterministic for a seed, and with no arrivals the routing changes nothing."""

import dataclasses

import pytest
import torch

from pdlab.attention.cost import decode_path_cost, prefill_path_cost, shared_weight_bytes
from pdlab.cli import main
from pdlab.config import ModelConfig
from pdlab.disagg.designs import MODES
from pdlab.model import DeepseekV2ForCausalLM
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
