"""DeepSeek-V3 as ``pdlab sim`` deploys it (``pdlab.sim.costs.Deployment``): the experts a
step touches, checked against seeded routing; the parameter count against DeepSeek's
published 671B; the footer's peak against the one the roofline divides by; the deployment
refused where it does not fit; and every figure the README quotes from the simulator
recomputed, so that a text cannot drift from the model (the tour's and notebook 07's
closing paragraph reads the same runs through ``answer_values``)."""

import random
import re
from pathlib import Path

import pytest

from pdlab.catalog import text
from pdlab.cli import main
from pdlab.engine.config import ModelConfig
from pdlab.errors import PdlabValueError
from pdlab.sim.costs import (
    DEFAULT_DEPLOYMENT,
    Deployment,
    Row,
    attention_proj_cost,
    mlp_cost,
    model_weight_bytes,
    mtp_weight_bytes,
    num_moe_layers,
    step_cost,
    touched_experts,
)
from pdlab.sim.profiles import GPUS, device_profile
from pdlab.sim.report import run_grid
from pdlab.sim.simulator import SimConfig, simulate
from pdlab.ui import fmt
from pdlab.ui.sim_report import sim_table
from pdlab.ui.tour_designs import MTP_BASE, MTP_ROUTINGS, answer_values

V3 = ModelConfig.deepseek_v3()
H200 = device_profile("H200")
ALONE = Deployment(overlap_all_to_all=False)  # DeepSeek's instance, the all-to-all added
README = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())


@pytest.fixture(scope="module")
def grids():
    rows, _ = run_grid(SimConfig(), V3, H200, "h200")
    mtp, _ = run_grid(MTP_BASE, V3, H200, "h200", routings=MTP_ROUTINGS)
    return rows, mtp


def test_v3_preset_has_deepseeks_moe_fields():
    # DeepSeek-V3's config.json, under the names vLLM 0.33.0's deepseek_v2.py reads.
    assert (V3.n_routed_experts, V3.num_experts_per_tok, V3.n_shared_experts) == (256, 8, 1)
    assert (V3.moe_intermediate_size, V3.intermediate_size) == (2048, 18432)
    assert V3.first_k_dense_replace == 3 and num_moe_layers(V3) == 58
    assert num_moe_layers(ModelConfig.tiny()) == 0
    # DeepSeek-V2's and V2-Lite's config.json: 160 and 64 routed experts, 6 a token, 2
    # shared, the first layer dense.
    for cfg, routed, width in (
        (ModelConfig.deepseek_v2(), 160, 1536),
        (ModelConfig.deepseek_v2_lite(), 64, 1408),
    ):
        assert (cfg.n_routed_experts, cfg.moe_intermediate_size) == (routed, width)
        assert (cfg.num_experts_per_tok, cfg.n_shared_experts, cfg.first_k_dense_replace) == (
            6,
            2,
            1,
        )


def test_the_preset_holds_deepseeks_671b_parameters():
    # All weights at 2 bytes on one GPU: the bytes over 2 are the parameters, the MTP module
    # left out; DeepSeek-V3's report: 671B total.
    params = model_weight_bytes(V3, Deployment(1, "bf16")) / 2
    assert round(params / 1e9) == 671


def test_the_mtp_module_is_deepseeks_14b_and_counted_under_mtp(grids):
    # DeepSeek-V3's model card: 685B on Hugging Face, 671B the main model and 14B the MTP
    # module (rounded figures), whose checkpoint holds its own copies of the embedding
    # and lm_head; vLLM shares the target's, so pdlab counts them once.
    one = Deployment(1, "bf16")
    own = mtp_weight_bytes(V3, one) / 2
    module = own + 2 * V3.vocab_size * V3.hidden_size
    assert abs(module / 1e9 - 14) < 1
    with_mtp = model_weight_bytes(V3, one, True) - model_weight_bytes(V3, one)
    assert with_mtp == pytest.approx(2 * own)
    assert abs((model_weight_bytes(V3, one) / 2 + module) / 1e9 - 685) < 1
    # Its decoder layer is an MoE layer: this GPU's expert slots, not all 256 experts.
    assert mtp_weight_bytes(V3, DEFAULT_DEPLOYMENT) < 0.1 * mtp_weight_bytes(V3, one)
    # The caption's per-GPU total counts the module only where MTP runs.
    rows, mtp = grids
    gb = [model_weight_bytes(V3, DEFAULT_DEPLOYMENT, m) for m in (False, True)]
    assert {r["weight_bytes_per_gpu"] for r in rows} == {gb[0]}
    assert {r["weight_bytes_per_gpu"] for r in mtp} == {gb[1]} and gb[1] > gb[0]
    for lang in ("en", "zh"):
        caption = re.sub(r"\s+", " ", str(sim_table(mtp, H200, lang).caption))
        assert f"{gb[1] / 1e9:.0f} GB" in caption and "eh_proj" in caption
        assert "eh_proj" not in str(sim_table(rows, H200, lang).caption)


def test_touched_experts_is_what_seeded_uniform_routing_touches():
    rng = random.Random(0)
    for tokens in (1, 4, 16, 64, 256):
        runs = [
            len({e for _ in range(tokens) for e in rng.sample(range(256), 8)}) for _ in range(400)
        ]
        mean = sum(runs) / len(runs)
        assert abs(mean - touched_experts(256, 8, tokens)) < 0.02 * mean + 0.5, tokens


def test_an_moe_layers_flops_are_nine_experts_per_token():
    # tokens * (8 routed + 1 shared) * 3 matrices * hidden * moe_intermediate * 2, and the
    # router (hidden x 256) on top.
    t, d, mi = 64, V3.hidden_size, V3.moe_intermediate_size
    # One batch (two micro-batches, each reading the weights: see below).
    cost = step_cost(V3, [Row(100)] * t, [], True, deploy=ALONE)
    router = 2 * t * d * V3.n_routed_experts
    assert cost.groups["moe"].flops == 58 * (t * 9 * 3 * d * mi * 2 + router)
    # One GPU of 144 holds 2 expert slots (288 - 256 = 32 redundant, as DeepSeek's).
    assert DEFAULT_DEPLOYMENT.experts_per_gpu(V3) == 2
    assert DEFAULT_DEPLOYMENT.redundant_experts(V3) == 32
    # Its weights: at 144 * 64 tokens every expert is touched, so both slots are read.
    routed = [p for p in cost.groups["moe"].parts if p[0] == "routed_experts"][0]
    acts = 2 * t * 8 * (2 * d + 3 * mi)
    assert routed[2] == pytest.approx(58 * (2 * 3 * d * mi + acts), rel=1e-6)
    # One GPU's tokens go to 8 experts each and come back: 3 bytes a value (fp8 + bf16).
    assert cost.link_bytes == pytest.approx(58 * t * 8 * (143 / 144) * d * 3)


def test_fp8_weights_halve_the_linear_weights_bytes():
    one = [Row(100)]
    fp8 = step_cost(V3, one, [], True, deploy=Deployment(8, "fp8")).groups["dense"]
    bf16 = step_cost(V3, one, [], True, deploy=Deployment(8, "bf16")).groups["dense"]
    assert fp8.flops == bf16.flops
    acts = bf16.bytes - 2 * (bf16.bytes - fp8.bytes)  # bf16 weights = 2 * (bf16 - fp8)
    assert 0 < acts < 0.01 * bf16.bytes


def test_a_model_without_experts_is_one_gpu_as_before():
    tiny = ModelConfig.tiny()
    cost = step_cost(tiny, [Row(10)] * 3, [], True, deploy=Deployment(8, "fp8"))
    assert "moe" not in cost.groups and cost.link_bytes == 0
    assert cost.time_s(H200) == step_cost(tiny, [Row(10)] * 3, [], True).time_s(H200)


@pytest.mark.parametrize("gpu", GPUS)
def test_the_footer_states_the_dense_peak_the_roofline_uses(gpu):
    profile = device_profile(gpu)
    tflops = f"{profile.peak_flops / 1e12:,.0f}"
    for lang in ("en", "zh"):
        source = text(lang, f"sim_source_{gpu}", on="", shape="")
        assert tflops in source and "TFLOP/s" in source
        assert ("dense" if lang == "en" else "稠密") in source


def test_the_caption_says_how_the_model_is_deployed(grids):
    rows, _ = grids
    for lang in ("en", "zh"):
        caption = re.sub(r"\s+", " ", str(sim_table(rows, H200, lang).caption))
        gb = f"{model_weight_bytes(V3, DEFAULT_DEPLOYMENT) / 1e9:.0f} GB"
        for fact in ("144", "EP144", "DP144", "fp8", gb, "50 GB/s", "989 TFLOP/s"):
            assert fact in caption, (lang, fact)


@pytest.mark.parametrize("bad", [0, -1, 1025, 2.5, True, "8"])
def test_a_bad_number_of_gpus_is_one_error_naming_it(bad):
    with pytest.raises(PdlabValueError, match="num_gpus"):
        SimConfig(num_gpus=bad)


def test_a_deployment_that_does_not_fit_is_refused():
    with pytest.raises(PdlabValueError, match="num_gpus=1 .*at least 6"):
        simulate(SimConfig(num_gpus=1, duration_s=0.01), V3, H200)
    with pytest.raises(PdlabValueError, match="weight_dtype"):
        SimConfig(weight_dtype="int4")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_cli_num_gpus(lang, capsys):
    with pytest.raises(SystemExit) as e:
        main(["sim", "--num-gpus", "0", "--lang", lang])
    assert e.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after argparse's usage
    assert "--num-gpus" in last and "'0'" in last and "1" in last and "1024" in last


def test_every_sim_figure_the_readme_quotes_is_the_simulators(grids):
    rows, mtp = grids
    v = {k: str(x).replace(" ms", "") for k, x in answer_values(rows, mtp).items()}
    r = {(x["routing"], x["design"]): x for x in rows}
    ms = lambda x: fmt.seconds(x).replace(" ms", "")  # noqa: E731 - as the answer formats
    ap, others = r["pcp", "append_prompt"], ("first_token", "append_prompt", "hidden_state")
    tpots = {(ms(r["v2", d]["tpot_p50_s"]), ms(r["v2", d]["tpot_p99_s"])) for d in others}
    assert len(tpots) == 1  # "... for the other three designs"
    (o50, o99), *_ = tpots
    assert v["ft_pcp_p99"] == v["hs_pcp_p99"]  # "first_token and hidden_state stay at"
    for phrase in (
        f"{v['gpus']} GPUs",
        f"{v['dtype']} weights",
        f"{v['steps']} steps",
        f"TPOT p50/p99 {v['v2_p50']} / {v['v2_p99']} ms under V2 for recompute, "
        f"{o50} / {o99} ms for the other three designs",
        f"recompute loses the full decode graph on {v['pcp_mixed']} of the steps",
        f"TPOT p99 rises to {v['pcp_p99']} ms (append_prompt: "
        f"{100 * ap['non_uniform_share']:.0f}%, {ms(ap['tpot_p99_s'])} ms)",
        f"stay at {v['ft_pcp_p99']} ms",
        f"p50 {v['rc_ttft']} ms for recompute ({v['pcp_ttft']} ms under PCP)",
        f"{v['hs_ttft']} ms for hidden_state",
        f"a step takes {v['mtp_step']} ms, a row emits {v['mtp_tokens']} tokens",
        f"TPOT p50 {v['mtp_p50']} ms, above the {v['v2_p50']} ms without MTP",
        f"outlasts the compute in {v['mtp_link']} of these steps ({v['link']} without MTP)",
        f"{device_profile('H200').link_bytes_per_s / 1e9:g} GB/s overlapped with compute "
        "by two micro-batches",
    ):
        assert phrase in README, phrase
    m = {(x["routing"], x["design"]): x for x in mtp}
    assert m["v2", "recompute"]["tpot_p50_s"] > r["v2", "recompute"]["tpot_p50_s"]  # "above"


def test_the_answer_paragraph_states_the_deployment(grids):
    rows, mtp = grids
    v = answer_values(rows, mtp)
    assert (v["gpus"], v["dtype"]) == (DEFAULT_DEPLOYMENT.num_gpus, "fp8")
    for lang in ("en", "zh"):
        answer = text(lang, "ch7_answer", **v)
        assert f"{v['gpus']}" in answer and "fp8" in answer
        assert v["mtp_p50"] in answer and v["v2_p50"] in answer


def test_the_static_texts_name_the_simulators_deployment():
    # The tour's chapter 7 intro and notebook 07's prose name the instance without reading
    # a run: the number they quote is the default deployment's.
    n, root = DEFAULT_DEPLOYMENT.num_gpus, Path(__file__).parents[2]
    assert f"{n}-GPU decode instance" in text("en", "ch7_intro")
    assert f"DeepSeek {n} 块 GPU 的解码实例" in text("zh", "ch7_intro")
    lines = (root / "notebooks" / "src" / "pd_designs.py").read_text().splitlines()
    src = " ".join(" ".join(x.removeprefix("#").strip() for x in lines).split())
    assert f"DeepSeek's {n}-GPU decode instance" in src and f"DeepSeek 的 {n} 块 GPU" in src
    assert SimConfig().batch_size == 64 and "64 decodes over 4K tokens" in src
    assert f"{DEFAULT_DEPLOYMENT.weight_dtype} weights" in src


def dense_weight_bytes():
    """One batch's read of the ``dense`` group's weights: every layer's attention
    projections and the dense layers' MLP, at the deployment's weight bytes."""
    w, layers = DEFAULT_DEPLOYMENT.weight_bytes, V3.num_hidden_layers
    attn = sum(p[2] for p in attention_proj_cost(V3, 0, 0, w).parts)
    return attn * layers + sum(p[2] for p in mlp_cost(V3, 0, 0, w).parts) * (
        layers - num_moe_layers(V3)
    )


@pytest.mark.parametrize("k", [0, 1])
def test_the_all_to_all_hides_behind_two_micro_batches(k):
    rows = [Row(4096, 1 + k)] * 63 + [Row(900, 1 + k)]
    both = step_cost(V3, rows, [], True, num_speculative_tokens=k)
    whole = step_cost(V3, rows, [], True, num_speculative_tokens=k, deploy=ALONE)
    # Every other row in each micro-batch, each costed as a step alone.
    parts = [
        step_cost(V3, rows[i::2], [], True, num_speculative_tokens=k, deploy=ALONE) for i in (0, 1)
    ]
    # The bytes crossing do not change; every group is the two micro-batches' sum.
    assert both.link_bytes == pytest.approx(whole.link_bytes)
    assert both.link_bytes == pytest.approx(sum(p.link_bytes for p in parts))
    assert both.groups.keys() == whole.groups.keys()
    for name, group in both.groups.items():
        assert group.bytes == pytest.approx(sum(p.groups[name].bytes for p in parts)), name
        assert group.flops == pytest.approx(whole.groups[name].flops), name
    # Each micro-batch reads the weights: the dense group reads them once more.
    extra = both.groups["dense"].bytes - whole.groups["dense"].bytes
    assert extra == pytest.approx(dense_weight_bytes())
    # The step takes the larger of its compute and its all-to-all, which stays visible;
    # with the overlap off, their sum.
    times = both.group_times(H200)
    link = times.pop("all-to-all")
    assert link == pytest.approx(both.link_bytes / H200.link_bytes_per_s)
    assert both.time_s(H200) == pytest.approx(max(sum(times.values()), link))
    alone = whole.group_times(H200)
    assert whole.time_s(H200) == pytest.approx(sum(alone.values()))
    assert "all-to-all" in alone and alone["all-to-all"] == pytest.approx(link)


def test_one_gpu_one_row_and_a_model_without_experts_are_not_split():
    for cfg, rows, deploy in (
        (V3, [Row(100)], DEFAULT_DEPLOYMENT),
        (V3, [Row(100)] * 8, Deployment(1, "fp8")),
        (ModelConfig.tiny(), [Row(10)] * 8, DEFAULT_DEPLOYMENT),
    ):
        cost = step_cost(cfg, rows, [], True, deploy=deploy)
        off = Deployment(deploy.num_gpus, deploy.weight_dtype, overlap_all_to_all=False)
        plain = step_cost(cfg, rows, [], True, deploy=off)
        assert not cost.overlap and cost.time_s(H200) == plain.time_s(H200)
        assert {k: c.bytes for k, c in cost.groups.items()} == {
            k: c.bytes for k, c in plain.groups.items()
        }


@pytest.mark.parametrize("bad", [0, 1, "yes", None])
def test_a_bad_overlap_is_one_error_naming_it(bad):
    with pytest.raises(PdlabValueError, match="overlap_all_to_all"):
        SimConfig(overlap_all_to_all=bad)


@pytest.mark.parametrize(
    "on, en, zh",
    [(True, "two micro-batches", "两个微批次"), (False, "not overlapped", "不与计算重叠")],
)
def test_the_caption_states_the_overlap_either_way(on, en, zh):
    cfg = SimConfig(duration_s=0.1, overlap_all_to_all=on)
    rows, _ = run_grid(cfg, V3, H200, "h200", designs=("recompute",), routings=("v2",))
    assert rows[0]["overlap_all_to_all"] is on
    for lang, fact in (("en", en), ("zh", zh)):
        caption = re.sub(r"\s+", " ", str(sim_table(rows, H200, lang).caption))
        assert fact in caption, (lang, on)
        assert ("overlap_all_to_all=False" in caption) is not on
