"""The tour's chapters 4-6: D's one-token step and its routing under each set-up, what the
two MLA paths cost at DeepSeek's widths, the rest of the generation; then and now is
:mod:`pdlab.ui.tour_then`. Numbers from the trace or :mod:`pdlab.sim.kernel_costs`.

Upstream (vLLM 0.33.0): ``vllm/v1/worker/gpu/model_runner.py`` (V2's batch),
``vllm/v1/worker/gpu/pcp_manager.py``, ``vllm/v1/attention/backends/utils.py``
(``split_decodes_and_prefills``) and ``vllm/model_executor/layers/attention/mla_attention.py``
(the builder and both paths).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from pdlab.catalog import text
from pdlab.engine.config import AttentionConfig, ModelConfig
from pdlab.engine.tokenizer import printable
from pdlab.engine.trace import Tracer
from pdlab.sim.kernel_costs import (
    absorb_crossover_query_len,
    decode_path_cost,
    mla_forms_flops,
    prefill_path_cost,
    traced_cost,
)
from pdlab.ui.console import kernel_brief, step_table
from pdlab.ui.fmt import FitTable, flops, nbytes, ratio, token_char, tokens
from pdlab.ui.tour_kv import columns_table, print_source, printer, say
from pdlab.ui.tour_then import then_and_now_section

if TYPE_CHECKING:  # pdlab.demo imports the engine (torch); chapter 5 runs none
    from pdlab.demo import Demo

COST_CONTEXTS = (1024, 4096, 16384, 65536)
# The tour's default prompt, FLASHMLA's and FLASH_ATTN_MLA's thresholds.
FRESH_PROMPTS = (29, 128, 512)


def _first_d_step(trace: Tracer, rid: str) -> dict[str, Any]:
    """What D's first step did: its route, kernels, cost and sampled token."""
    ev, _ = trace.steps("D", rid)[0]
    ks = trace.kernels("D", ev["step"])
    cost = traced_cost(ks)
    return {
        "route": trace.route_of("D", rid, ev["step"]),
        "kernels": [k for k in ks if k["layer"] == 0 and k["path"] in ("prefill", "decode")],
        "flops": cost.flops,
        "bytes": cost.bytes,
        "sample": trace.first("sample", "D", req_id=rid),
    }


def _split_test(rt: Mapping[str, Any], lang: str = "en") -> str:
    """The test ``split_decodes_and_prefills`` applied to this request, alone in its batch,
    with the values the trace recorded: under a backend that wants uniform query lengths
    (``require_uniform``) the first row's length against the threshold, then each row's
    against the first's; under a varlen one each row's length against the threshold."""
    q, t = rt["query_len"], rt["decode_threshold"]
    if rt["require_uniform"]:  # UNIFORM or SINGLE_ONLY: the first row's length, then equality
        lines = [
            f"query_len[0] > decode_threshold\n{q} > {t}: {q > t}",
            f"require_uniform: query_len != query_len[0]\n{q} != {q}: False",
        ]
    else:
        lines = [f"query_len > decode_threshold\n{q} > {t}: {q > t}"]
    if rt["treat_short_extends_as_decodes"]:
        lines.append("treat_short_extends_as_decodes = True:\n" + say(lang, "ch4_not_read"))
    else:
        lines.append(
            f"treat_short_extends_as_decodes = False:\nOR is_prefilling = {rt['is_prefilling']}"
        )
    return "\n".join(lines)


# The set-ups chapter 4 compares, as (model_runner, prefill_context_parallel_size).
_V2, _PCP = ("v2", 1), ("v2", 2)

# Where the learner's code went: the names in older vLLM (as quoted in the question) and
# their homes in 0.33.0 (files under vllm/).
_MLA_FILE = "model_executor/layers/attention/mla_attention.py"
RENAMES = (
    ("_forward_prefill", "MLACommonBaseImpl.forward_mha", _MLA_FILE),
    ("_forward_decode", "MLACommonImpl.forward_mqa", _MLA_FILE),
    ("MLACommonImpl.forward", "MLAAttention.forward_impl", _MLA_FILE),
    ("v1/attention/backends/mla/common.py", "MLACommonMetadataBuilder", _MLA_FILE),
    (
        "v1/worker/gpu_model_runner.py",
        "Model Runner V1; the default is V2",  # rn_v1 in the word tables: see renames()
        "v1/worker/gpu/model_runner.py",
    ),
)


def renames(lang: str = "en") -> list[tuple[str, str, str]]:
    """:data:`RENAMES` as a view in ``lang`` shows it (the names stay; the one sentence is
    said in ``lang``)."""
    v1 = text("en", "rn_v1")
    return [(old, text(lang, "rn_v1") if new == v1 else new, where) for old, new, where in RENAMES]


def _cell(rt: Mapping[str, Any], key: str) -> str:
    v = rt[key]
    return "—" if v is None else str(v)


# Two running decodes beside D's arriving request, to draw the layout of a busy D's batch.
_RUNNING = (("dec-a", 1, False), ("dec-b", 1, False))


def pcp_layout(rows: list[tuple[str, int, bool]], size: int) -> list[str]:
    """Each PCP rank's part of a batch, one string per rank (``row[start:end]``, ``*`` on a
    row still prefilling), for ``rows`` of ``(name, query_len, is_prefilling)``: the
    layout ``pcp_rank_chunks`` computes, as the tour and notebooks 05/06 show it."""
    from pdlab.engine.worker.gpu.batch import pcp_rank_chunks

    chunks = pcp_rank_chunks([q for _, q, _ in rows], [pf for _, _, pf in rows], size)
    return [
        ", ".join(f"{rows[i][0]}[{o}:{o + n}]" + ("*" if rows[i][2] else "") for i, o, n in parts)
        or "—"
        for parts in chunks
    ]


def _pcp_layout(trace: Tracer, rid: str, size: int) -> list[str]:
    """D's first step under PCP, with two running decodes beside it, rank by rank."""
    step = trace.first_step("D", rid)
    rows = [(r["req_id"], r["query_len"], r["is_prefilling"])
            for r in trace.filter("route", "D", step=step)]  # fmt: skip
    return [f"rank {r}: {cells}" for r, cells in enumerate(pcp_layout([*_RUNNING, *rows], size))]


def chapter4(c: Console, demo: Demo, lang: str) -> None:
    from pdlab.demo import VARIANTS
    from pdlab.engine.worker.gpu.batch import gather_batch_req_state

    rid, put = demo.request_id, printer(c, lang)
    order = [*VARIANTS, *(k for k in demo.variant_traces if k not in VARIANTS)]
    runs = {k: _first_d_step(demo.variant_traces[k], rid) for k in order}
    main = (demo.model_runner, demo.pcp)
    r0 = runs[_V2]["route"]
    counts = {"q": r0["query_len"], "nct": r0["num_computed_tokens"], "n": r0["num_prompt_tokens"]}
    flags = {"prefilling": r0["is_prefilling"], "rad": r0["prefill_runs_as_decode"]}
    flags |= {"plen": r0["prefill_len"], "eligible": r0["decode_graph_eligible"]}
    put("ch4_intro", **counts, **flags)
    start = 'if model_runner == "v2" and has_prefill and not use_pcp'
    where = (start, "eligible = all(", "runs_as_decode = [")
    print_source(c, lang, "ch4_src", gather_batch_req_state, *where)
    tab = FitTable(title=say(lang, "ch4_table"), stack="columns")
    tab.add_column("")
    for key in runs:
        mark = say(lang, "main_run") if key == main else ""
        name = f"col_{key[0]}_pcp{key[1]}"
        head = say(lang, name) if key in VARIANTS else f"{key[0].upper()} + PCP {key[1]}"
        tab.add_column(head + mark)
    cells: dict[str, list[str]] = {}
    for d in runs.values():
        rt = d["route"]
        for key, val in (
            ("model_runner", _cell(rt, "model_runner")),
            ("prefill_context_parallel_size", _cell(rt, "prefill_context_parallel_size")),
            ("query_len", rt["query_len"]),
            ("num_computed_tokens", rt["num_computed_tokens"]),
            ("prefill_len", rt["prefill_len"] if rt["model_runner"] == "v2" else "—"),
            ("is_prefilling", rt["is_prefilling"]),
            ("prefill_runs_as_decode", _cell(rt, "prefill_runs_as_decode")),
            ("decode_graph_eligible", rt["decode_graph_eligible"]),
            ("region", rt["region"]),
            ("decode_threshold", rt["decode_threshold"]),
            ("treat_short_extends_as_decodes", rt["treat_short_extends_as_decodes"]),
            ("row_test", _split_test(rt, lang)),
            ("row_path", f"{rt['path']} → {rt['forward']}"),
            ("row_kernels", "\n".join(kernel_brief(k, lang) for k in d["kernels"])),
            ("row_flops", flops(d["flops"])),
            ("row_bytes", nbytes(d["bytes"])),
            ("row_token", f"{d['sample']['token']} ({token_char(d['sample']['token'])})"),
            ("row_logit", f"{d['sample']['logit']:.6f}"),
        ):
            cells.setdefault(key, []).append(escape(str(val)))
    for key, vals in cells.items():
        label = key if not key.startswith("row_") else say(lang, key)
        tab.add_row(label, *vals, end_section=key in ("decode_graph_eligible", "row_path"))
    c.print(tab)
    put("ch4_dtype", dtype=demo.trace.meta.get("dtype", "float32"))
    pcp_kernels = runs[_PCP]["kernels"]
    ctx_rows = sum(k["shapes"]["rows"] for k in pcp_kernels if k["name"] == "gather_cache")
    put("ch4_paths" if ctx_rows else "ch4_paths_no_context", ctx=ctx_rows)
    put("ch4_why_pcp")
    for line in _pcp_layout(demo.variant_traces[_PCP], rid, 2):
        c.print("  " + escape(line))
    put("ch4_v1")
    samples = [d["sample"] for d in runs.values()]
    delta = f"{max(abs(a['logit'] - b['logit']) for a in samples for b in samples):.1e}"
    if len({s["token"] for s in samples}) == 1:
        put("ch4_same", tok=samples[0]["token"], d=delta)
    else:
        put("ch4_diff", a=samples[0]["token"], b=samples[1]["token"], d=delta)
    fresh = demo.fresh_trace.filter("route")[0]
    key = "ch4_fresh_decode" if fresh["path"] == "decode" else "ch4_fresh_prefill"
    q, threshold = fresh["query_len"], fresh["decode_threshold"]
    put(key, q=q, t=threshold, region=fresh["region"], forward=fresh["forward"])
    if demo.num_speculative_tokens:
        from pdlab.ui.tour_mtp import mtp_section

        mtp_section(c, demo, lang)
    put("ch4_renames")
    for old, new, where in renames(lang):  # one per line: names read whole at 80 columns
        c.print(f"  {old}\n    → {new}\n      [dim]{where}[/]")
    attention = AttentionConfig(demo.mla_backend)
    then_and_now_section(c, lang, len(demo.prompt_ids), demo.block_size, attention)


def chapter5(c: Console, cfg: ModelConfig, lang: str) -> None:
    H, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    put = printer(c, lang)
    put("ch5_intro", model=cfg.name, H=H, L=L, R=R)
    flops_cols, bytes_cols = ("col_pf_flops", "col_dc_flops"), ("col_pf_bytes", "col_dc_bytes")
    cols = ("col_context", *flops_cols, "col_ratio", *bytes_cols, "col_ratio")
    tab = columns_table(lang, "ch5_table", cols)
    costs = [
        (ctx, prefill_path_cost(cfg, ctx), decode_path_cost(cfg, ctx)) for ctx in COST_CONTEXTS
    ]
    for ctx, p, d in costs:
        work = (flops(p.flops), flops(d.flops), ratio(p.flops, d.flops))
        tab.add_row(tokens(ctx), *work, nbytes(p.bytes), nbytes(d.bytes), ratio(p.bytes, d.bytes))
    c.print(tab)
    ctx, p, d = costs[-1]
    upproj = sum(f for name, f, _ in p.parts if "context up-projection" in name)
    put("ch5_upproj", mf=f"{upproj / ctx / 1e6:.1f}", W=L + R)
    n = cfg.num_hidden_layers
    put("ch5_model", layers=n, ctx=tokens(ctx), pf=flops(p.flops * n), df=flops(d.flops * n))
    qk, v = cfg.qk_head_dim, cfg.v_head_dim
    mf = f"{2 * L * H * (cfg.qk_nope_head_dim + v) / 1e6:.1f}"
    x = f"{absorb_crossover_query_len(cfg):.0f}"
    put("ch5_cross", mf=mf, a=f"{L + R} + {L}", b=f"{qk} + {v}", x=x)
    cols = ("col_prompt_len", "col_naive_flops", "col_absorbed_flops", "col_ratio")
    tab = columns_table(lang, "ch5_fresh_table", cols)
    for q in FRESH_PROMPTS:
        naive, absorbed = mla_forms_flops(cfg, q, 0)
        tab.add_row(str(q), flops(naive), flops(absorbed), ratio(absorbed, naive))
    c.print(tab)
    put("ch5_upstream")
    put("ch5_others")


def chapter6(c: Console, demo: Demo, lang: str) -> None:
    t, rid, put = demo.trace, demo.request_id, printer(c, lang)
    c.print(step_table(t, "D", title=say(lang, "ch6_steps"), lang=lang))
    later = t.filter("route", "D", req_id=rid)[1:]
    decode = {"query_len": 1, "is_prefilling": False, "region": "decode", "path": "decode"}
    if later and all(e[k] == v for e in later for k, v in decode.items()):
        put("ch6_agree")
    tab = columns_table(lang, "ch6_outputs", left=("col_run", "col_token_ids", "col_text"))
    for label, tokens_ in (
        (say(lang, "run_pd", pcp=demo.pcp), demo.pd_tokens),
        (say(lang, "run_pd", pcp=demo.other_pcp), demo.other_tokens),
        (say(lang, "run_local", pcp=demo.pcp), demo.colocated_tokens),
    ):
        tab.add_row(label, escape(str(tokens_)), escape(printable(tokens_)))
    c.print(tab)
    verdict = say(lang, "equal" if demo.tokens_equal else "not_equal")
    put("ch6_equal", verdict=verdict, n=len(demo.colocated_tokens))
    freed = t.filter("free", "D", req_id=rid)
    if freed:
        put("ch6_freed", blocks=freed[-1]["block_ids"], step=freed[-1]["step"])
