"""What ``pdlab sim`` reports about a run of :func:`pdlab.sim.simulator.simulate`, as numbers
(what each means is the catalog's ``sim_caption``): TPOT (a step's time over the tokens a
running row emits in it), D's time to token 1 and to token 2, tokens per step, the share of
steps that lose the decode CUDA graph and of those bound by the experts' all-to-all; and the
grid over routings and designs. Its table and plots are views: ``pdlab/ui/sim_report.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from pdlab.disagg.designs import MODES
from pdlab.engine.config import ModelConfig
from pdlab.sim.costs import has_experts, model_weight_bytes, num_moe_layers
from pdlab.sim.profiles import DeviceProfile
from pdlab.sim.simulator import ROUTINGS, SimConfig, SimResult, simulate

P99_MIN_SAMPLES = 100


def tail(xs: Sequence[float]) -> tuple[str, float]:
    """``("p99", value)`` over at least :data:`P99_MIN_SAMPLES` samples (a nearest-rank p99
    of fewer is the maximum), else ``("max", the largest)``."""
    if len(xs) >= P99_MIN_SAMPLES:
        return "p99", percentile(xs, 99)
    return "max", max(xs, default=0.0)


def percentile(xs: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100); 0 for no samples."""
    if not xs:
        return 0.0
    s = sorted(xs)
    k = max(1, -(-len(s) * q // 100))
    return s[int(k) - 1]


def summarize(res: SimResult) -> dict[str, Any]:
    """The run's figures; ``*_p99_s`` is :func:`tail`'s value, named by ``*_tail``."""
    per_step = res.config.tokens_per_verify_step
    tpot = [s.time_s / per_step for s in res.steps if s.verifying_rows]
    ttft = [r.ttft_d for r in res.requests if r.ttft_d >= 0]
    t2t = [r.t2t_d for r in res.requests if r.t2t_d >= 0]
    mixed = sum(not s.uniform_decode for s in res.steps)
    times = [s.cost.compute_and_link_s(res.profile) for s in res.steps]
    link_bound = sum(0 < link >= compute for compute, link in times)
    rows = sum(len(s.query_lens) for s in res.steps)
    out = {
        "design": res.config.design,
        "routing": res.config.routing,
        "num_speculative_tokens": res.config.num_speculative_tokens,
        "acceptance_rate": res.config.acceptance_rate,
        "mla_backend": res.mla_backend,
        "reorder_batch_threshold": res.reorder_batch_threshold,
        "steps": len(res.steps),
        "arrivals": len(res.requests),
        "step_p50_s": percentile([s.time_s for s in res.steps], 50),
        "tpot_p50_s": percentile(tpot, 50),
        "ttft_d_p50_s": percentile(ttft, 50),
        "t2t_d_p50_s": percentile(t2t, 50),
        "tokens_per_step": sum(s.tokens for s in res.steps) / rows if rows else 0.0,
        "non_uniform_share": mixed / len(res.steps) if res.steps else 0.0,
        "link_bound_share": link_bound / len(res.steps) if res.steps else 0.0,
        "simulated_s": res.steps[-1].t + res.steps[-1].time_s if res.steps else 0.0,
    }
    for name, xs in (("tpot", tpot), ("ttft_d", ttft), ("t2t_d", t2t)):
        out[f"{name}_tail"], out[f"{name}_p99_s"] = tail(xs)
    out.update(deployment_figures(res))
    return out


def deployment_figures(res: SimResult) -> dict[str, Any]:
    """How the run's model was deployed (:class:`pdlab.sim.costs.Deployment`); one GPU for a
    model without experts."""
    m = res.model
    if m is None or not has_experts(m):
        return {"num_gpus": 1}
    d = res.config.deployment
    return {
        "num_gpus": d.num_gpus,
        "weight_dtype": d.weight_dtype,
        "overlap_all_to_all": d.overlaps,
        "experts_per_gpu": d.experts_per_gpu(m),
        "redundant_experts": d.redundant_experts(m),
        "weight_bytes_per_gpu": model_weight_bytes(m, d, res.config.num_speculative_tokens > 0),
        "routed_experts": m.n_routed_experts,
        "top_k": m.num_experts_per_tok,
        "shared_experts": m.n_shared_experts or 0,
        "dense_layers": m.num_hidden_layers - num_moe_layers(m),
        "layers": m.num_hidden_layers,
    }


def run_grid(
    base: SimConfig,
    model: ModelConfig,
    profile: DeviceProfile,
    gpu: str,
    designs: Sequence[str] = MODES,
    routings: Sequence[str] = ROUTINGS,
    progress: Callable[[int, int, float], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[tuple[str, str], SimResult]]:
    """Every (routing, design) of ``base``: the summaries and the runs; ``progress`` is told
    (runs done, runs, simulated seconds of the current run)."""
    rows, runs = [], {}
    pairs = [(r, d) for r in routings for d in designs]
    for i, (routing, design) in enumerate(pairs):
        cfg = replace(base, routing=routing, design=design)
        tick = None if progress is None else (lambda t, i=i: progress(i, len(pairs), t))
        res = simulate(cfg, model, profile, gpu, tick)
        runs[routing, design] = res
        rows.append(summarize(res))
    return rows, runs
