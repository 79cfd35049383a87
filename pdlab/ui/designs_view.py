"""The four first-token designs compared point by point, from runs: ``pdlab pd
--compare-designs``, notebook 07 and the tour's closing chapter. Each row is read off the
trace's ``first_token`` events (``pdlab/disagg/designs.py``) and priced by
``pdlab/sim/designs.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.markup import escape

from pdlab.catalog import text
from pdlab.disagg.designs import MODES, transfer_bytes
from pdlab.engine.config import CacheConfig, ModelConfig, SchedulerConfig
from pdlab.engine.llm_engine import LLMEngine, one_thread
from pdlab.engine.request import SamplingParams
from pdlab.sim.designs import design_point, price_first_token
from pdlab.sim.profiles import LINK_BYTES_PER_S, device_profile
from pdlab.ui import fmt
from pdlab.ui.fmt import FitTable

V3_CONTEXT = 4096  # the prompt length of the DeepSeek-V3 column


def _run(mode: str, prompts: list[list[int]], cfg, cache, sched, sp, procs, routing) -> tuple:
    """``(outputs by request id, trace)`` of one P/D run under ``mode``."""
    if procs == 2:
        from pdlab.disagg.launch import run_pd_procs

        res = run_pd_procs(prompts, cfg, cache, sched, sp, first_token=mode, **routing)
        if res.errors:
            raise ValueError("; ".join(f"{r}: {e}" for r, e in sorted(res.errors.items())))
        outs = {r: o["output_token_ids"] for r, o in res.prefill.outputs.items()}
        return outs, res.tracer
    from pdlab.disagg.pair import PDPair

    pair = PDPair(cfg, cache, sched, backend="torch", first_token=mode, **routing)
    outs = pair.generate(prompts, sp)
    return {o.request_id: o.output_token_ids for o in outs}, pair.tracer


def compare_designs(
    prompts: Sequence[Sequence[int]],
    model_config: ModelConfig | None = None,
    cache_config: CacheConfig | None = None,
    sampling_params: SamplingParams | None = None,
    *,
    procs: int = 1,
    gpu: str = "H200",
    traces: dict[str, Any] | None = None,
    **routing: Any,
) -> list[dict[str, Any]]:
    """One row per design: whether every prompt's tokens equal the colocated run's, the
    trace's bytes, D's FLOPs for token 1, when it was known, how D's first step was
    routed and the modelled latency after P (summed or listed over the prompts), and the
    same design on DeepSeek-V3 as ``pdlab sim`` deploys it for a :data:`V3_CONTEXT`-token prompt
    on ``gpu``. ``traces``, if given, receives each design's trace."""
    cfg = model_config or ModelConfig.tiny()
    cache = cache_config or CacheConfig()
    sp = sampling_params or SamplingParams(max_tokens=4)
    ids = [list(p) for p in prompts]
    with one_thread():  # the tiny model's matrices: a thread pool only adds its overhead
        colocated = LLMEngine(cfg, cache, backend="torch", **routing).generate(ids, sp)
        runs = {m: _run(m, ids, cfg, cache, SchedulerConfig(), sp, procs, routing) for m in MODES}
    prof, v3 = device_profile(gpu), ModelConfig.deepseek_v3()
    rows = []
    for mode in MODES:
        outs, trace = runs[mode]
        if traces is not None:
            traces[mode] = trace
        events = trace.filter("first_token")
        priced = [price_first_token(e, cfg, prof) for e in events]  # (d_flops, latency_s)
        forwards = [e["d_first_forward"] for e in events if e["d_first_forward"]]
        forward = forwards[0] if forwards else "forward_mqa"
        kv3 = transfer_bytes(v3, "recompute", V3_CONTEXT, cache.block_size)
        pay3, flops3, lat3 = design_point(v3, mode, V3_CONTEXT, kv3, forward, prof, 2)
        same = all(outs.get(f"req-{i}") == c.output_token_ids for i, c in enumerate(colocated))
        d_first = sorted({(e["d_first_forward"], e["d_first_is_prefilling"]) for e in events})
        rows.append(
            {
                "mode": mode,
                "same_as_colocated": same,
                "kv_bytes": sum(e["kv_bytes"] for e in events),
                "payload_bytes": sum(e["payload_bytes"] for e in events),
                "d_flops": sum(f for f, _ in priced),
                "known": sorted({(e["known_on"], e["known_step"]) for e in events}),
                "d_first": d_first,
                "latency_s": max((s for _, s in priced), default=0.0),
                "v3": {"bytes": kv3 + pay3, "d_flops": flops3, "latency_s": lat3},
            }
        )
    return rows


def designs_table(rows: list[dict[str, Any]], gpu: str = "H200", lang: str = "en") -> FitTable:
    """The rows of :func:`compare_designs` point by point: one column per design, so the
    table reads at 80 columns."""
    t = FitTable(title=escape(text(lang, "dz_title")), stack="columns")
    t.add_column(escape(text(lang, "dz_mode")))
    for r in rows:
        t.add_column(r["mode"])

    def line(key: str, cell, **values: Any) -> None:
        t.add_row(escape(text(lang, key, **values)), *(escape(cell(r)) for r in rows))

    line("dz_same", lambda r: text(lang, "dz_yes" if r["same_as_colocated"] else "dz_no"))
    line("dz_kv", lambda r: fmt.nbytes(r["kv_bytes"]))
    line("dz_payload", lambda r: fmt.nbytes(r["payload_bytes"]))
    line("dz_flops", lambda r: fmt.flops(r["d_flops"]))
    known = lambda r: ", ".join(text(lang, "v_on_step", on=o, step=s) for o, s in r["known"])
    line("dz_known", known)
    line(
        "dz_first",
        lambda r: ", ".join(
            f"{fwd or '-'} ({text(lang, 'dz_prefilling' if pf else 'dz_decode')})"
            for fwd, pf in r["d_first"]
        ),
    )
    line("dz_latency", lambda r: fmt.seconds(r["latency_s"]), gpu=gpu)

    def v3(r: dict[str, Any]) -> str:
        v = r["v3"]
        return " / ".join(
            (fmt.nbytes(v["bytes"]), fmt.flops(v["d_flops"]), fmt.seconds(v["latency_s"]))
        )

    line("dz_v3", v3, n=V3_CONTEXT)
    link = f"{LINK_BYTES_PER_S / 1e9:g}"
    note = text(lang, "dz_note", gpu=gpu, link=link, link_source=text(lang, "dz_link_source"))
    t.caption = escape(note)
    return t
