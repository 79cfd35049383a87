"""The tour's chapters 4-6: the one-token step and its routing. D's short extend under
both settings of ``treat_short_extends_as_decodes`` (``prefill_context_parallel_size`` 1 and
2), a short fresh prompt under FlashMLA's ``reorder_batch_threshold``; what the two MLA
paths cost at DeepSeek's widths; the rest of the generation, next to the colocated output.

Every number is read from a :class:`~pdlab.demo.Demo`'s trace or from the cost model
(:mod:`pdlab.attention.cost`); the words are in :mod:`pdlab.ui.text`. Upstream (vLLM 0.33.0):
``vllm/v1/attention/backends/utils.py`` (``split_decodes_and_prefills``) and
``vllm/model_executor/layers/attention/mla_attention.py`` (the builder and both paths).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pdlab.attention.cost import absorb_crossover_query_len, decode_path_cost, prefill_path_cost
from pdlab.config import ModelConfig
from pdlab.demo import Demo
from pdlab.tokenizer import printable
from pdlab.trace import Tracer
from pdlab.ui.console import kernel_brief, step_table
from pdlab.ui.fmt import flops, nbytes, ratio, token_char, tokens
from pdlab.ui.tour_kv import say

COST_CONTEXTS = (1024, 4096, 16384, 65536)


def _first_d_step(trace: Tracer, rid: str) -> dict[str, Any]:
    """What D's first step did: its route, kernels, cost and sampled token."""
    ev, _ = trace.steps("D", rid)[0]
    ks = trace.kernels("D", ev["step"])
    return {
        "route": trace.route_of("D", rid, ev["step"]),
        "kernels": [k for k in ks if k["layer"] == 0 and k["path"] in ("prefill", "decode")],
        "flops": sum(k["flops"] for k in ks),
        "bytes": sum(k["bytes"] for k in ks),
        "sample": trace.first("sample", "D", req_id=rid),
    }


def _split_test(rt: Mapping[str, Any]) -> str:
    """The test ``split_decodes_and_prefills`` applied to this request (alone in its batch,
    so ``require_uniform`` changes nothing), with the values the trace recorded."""
    q, t = rt["query_len"], rt["decode_threshold"]
    lines = [f"query_len > decode_threshold\n{q} > {t}: {q > t}"]
    if rt["treat_short_extends_as_decodes"]:
        lines.append("treat_short_extends_as_decodes = True:\nis_prefilling not read")
    else:
        lines.append(
            f"treat_short_extends_as_decodes = False:\nOR is_prefilling = {rt['is_prefilling']}"
        )
    return "\n".join(lines)


def chapter4(c: Console, demo: Demo, lang: str) -> None:
    rid = demo.request_id
    by_pcp = {
        demo.pcp: _first_d_step(demo.trace, rid),
        demo.other_pcp: _first_d_step(demo.other_trace, rid),
    }
    sizes = sorted(by_pcp)  # 1 (upstream's default) first
    r0 = by_pcp[1]["route"]
    c.print(
        say(
            lang,
            "ch4_intro",
            q=r0["query_len"],
            nct=r0["num_computed_tokens"],
            n=r0["num_prompt_tokens"],
            prefilling=r0["is_prefilling"],
            region=r0["region"],
        )
    )
    tab = Table(title=say(lang, "ch4_table"))
    tab.add_column("")
    for size in sizes:
        mark = say(lang, "main_run") if size == demo.pcp else ""
        tab.add_column(f"PCP {size}{mark}")
    cells: dict[str, list[str]] = {}
    for size in sizes:
        d = by_pcp[size]
        rt = d["route"]
        for key, val in (
            ("prefill_context_parallel_size", rt["prefill_context_parallel_size"]),
            ("query_len", rt["query_len"]),
            ("num_computed_tokens", rt["num_computed_tokens"]),
            ("num_prompt_tokens", rt["num_prompt_tokens"]),
            ("is_prefilling", rt["is_prefilling"]),
            ("region", rt["region"]),
            ("decode_threshold", rt["decode_threshold"]),
            ("treat_short_extends_as_decodes", rt["treat_short_extends_as_decodes"]),
            ("row_test", _split_test(rt)),
            ("row_path", f"{rt['path']} → {rt['forward']}"),
            ("row_kernels", "\n".join(kernel_brief(k) for k in d["kernels"])),
            ("row_flops", flops(d["flops"])),
            ("row_bytes", nbytes(d["bytes"])),
            ("row_token", f"{d['sample']['token']} ({token_char(d['sample']['token'])})"),
            ("row_logit", f"{d['sample']['logit']:.6f}"),
        ):
            cells.setdefault(key, []).append(escape(str(val)))
    for key, vals in cells.items():
        label = key if not key.startswith("row_") else say(lang, key)
        tab.add_row(label, *vals, end_section=key in ("is_prefilling", "row_path", "row_kernels"))
    c.print(tab)
    c.print(say(lang, "ch4_dtype", dtype=demo.trace.meta.get("dtype", "float32")))
    gathered = [k["shapes"]["rows"] for k in by_pcp[2]["kernels"] if k["name"] == "gather_cache"]
    ctx_rows = sum(gathered)
    c.print(say(lang, "ch4_paths", ctx=ctx_rows) if ctx_rows else say(lang, "ch4_paths_no_context"))
    sa, sb = (by_pcp[size]["sample"] for size in sizes)
    delta = f"{abs(sa['logit'] - sb['logit']):.1e}"
    if sa["token"] == sb["token"]:
        c.print(say(lang, "ch4_same", tok=sa["token"], d=delta))
    else:
        c.print(say(lang, "ch4_diff", a=sa["token"], b=sb["token"], d=delta))
    fresh = demo.fresh_trace.filter("route")[0]
    c.print(
        say(
            lang,
            "ch4_fresh_decode" if fresh["path"] == "decode" else "ch4_fresh_prefill",
            q=fresh["query_len"],
            t=fresh["decode_threshold"],
            region=fresh["region"],
            forward=fresh["forward"],
        )
    )


def chapter5(c: Console, cfg: ModelConfig, lang: str) -> None:
    H, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    c.print(say(lang, "ch5_intro", model=cfg.name, H=H, L=L, R=R))
    tab = Table(title=say(lang, "ch5_table"))
    for key in (
        "col_context",
        "col_pf_flops",
        "col_dc_flops",
        "col_ratio",
        "col_pf_bytes",
        "col_dc_bytes",
        "col_ratio",
    ):
        tab.add_column(say(lang, key), justify="right")
    costs = [
        (ctx, prefill_path_cost(cfg, ctx), decode_path_cost(cfg, ctx)) for ctx in COST_CONTEXTS
    ]
    for ctx, p, d in costs:
        tab.add_row(
            tokens(ctx),
            flops(p.flops),
            flops(d.flops),
            ratio(p.flops, d.flops),
            nbytes(p.bytes),
            nbytes(d.bytes),
            ratio(p.bytes, d.bytes),
        )
    c.print(tab)
    ctx, p, d = costs[-1]
    upproj = sum(f for name, f, _ in p.parts if "context up-projection" in name)
    c.print(say(lang, "ch5_upproj", mf=f"{upproj / ctx / 1e6:.1f}", W=L + R))
    c.print(
        say(
            lang,
            "ch5_model",
            layers=cfg.num_hidden_layers,
            ctx=tokens(ctx),
            pf=flops(p.flops * cfg.num_hidden_layers),
            df=flops(d.flops * cfg.num_hidden_layers),
        )
    )
    c.print(say(lang, "ch5_cross", x=f"{absorb_crossover_query_len(cfg):.0f}"))
    c.print(say(lang, "ch5_upstream"))
    c.print(say(lang, "ch5_others"))


def chapter6(c: Console, demo: Demo, lang: str) -> None:
    t, rid = demo.trace, demo.request_id
    tab = step_table(t, "D", title=say(lang, "ch6_steps"), lang=lang)
    c.print(tab)
    later = t.filter("route", "D", req_id=rid)[1:]
    if later and all(
        e["query_len"] == 1
        and not e["is_prefilling"]
        and e["region"] == "decode"
        and e["path"] == "decode"
        for e in later
    ):
        c.print(say(lang, "ch6_agree"))
    tab = Table(title=say(lang, "ch6_outputs"))
    for key in ("col_run", "col_token_ids", "col_text"):
        tab.add_column(say(lang, key))
    for label, tokens_ in (
        (say(lang, "run_pd", pcp=demo.pcp), demo.pd_tokens),
        (say(lang, "run_pd", pcp=demo.other_pcp), demo.other_tokens),
        (say(lang, "run_local", pcp=demo.pcp), demo.colocated_tokens),
    ):
        tab.add_row(label, escape(str(tokens_)), escape(printable(tokens_)))
    c.print(tab)
    equal = demo.tokens_equal
    c.print(
        say(
            lang,
            "ch6_equal",
            verdict=say(lang, "equal" if equal else "not_equal"),
            n=len(demo.colocated_tokens),
        )
    )
    freed = t.filter("free", "D", req_id=rid)
    if freed:
        c.print(say(lang, "ch6_freed", blocks=freed[-1]["block_ids"], step=freed[-1]["step"]))
