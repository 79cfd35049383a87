"""Rich console views of a trace: the step table every command prints, and the summary of
a P/D run. Views only: every number comes from the trace's events."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pdlab.trace import Tracer
from pdlab.ui.text import text


def make_console() -> Console:
    """A file or a pipe gets no colour (rich sees no terminal) and 120 columns, so the step
    table's nine columns are not cut; a terminal gets its own width."""
    wide = sys.stdout.isatty() or "COLUMNS" in os.environ
    return Console(highlight=False, width=None if wide else 120)


def step_table(
    trace: Tracer, instance: str | None = None, title: str | None = None, lang: str = "en"
) -> Table:
    """One row per (step, request): ``num_computed_tokens`` before and after, tokens
    scheduled, the routing decision and the token sampled. Headers in ``lang``."""
    t = Table(title=title or "steps" + (f" on {instance}" if instance else ""))
    for key, just in (
        ("st_inst", "left"),
        ("st_step", "right"),
        ("st_request", "left"),
        ("st_prompt_N", "right"),
        ("st_computed_before", "right"),
        ("st_scheduled", "right"),
        ("st_computed_after", "right"),
        ("st_routed_to", "left"),
        ("st_sampled", "right"),
    ):
        t.add_column(escape(text(lang, key)), justify=just)
    for r in trace.step_rows(instance):
        path = r["forward"] or "-"
        if (
            r["path"] == "prefill"
            and r["num_scheduled_tokens"] == 1
            and r["num_computed_tokens_before"] > 0
        ):
            path = f"[bold yellow]{path}[/]"  # D's short extend, sent down forward_mha
        t.add_row(
            r["instance"],
            str(r["step"]),
            r["req_id"],
            str(r["num_prompt_tokens"]),
            str(r["num_computed_tokens_before"]),
            str(r["num_scheduled_tokens"]),
            str(r["num_computed_tokens_after"]),
            path,
            "" if r["sampled"] is None else str(r["sampled"]),
        )
    return t


def render_pd_result(
    trace: Tracer,
    prompts: list[str],
    outputs: dict[str, dict[str, Any]],
    errors: dict[str, str],
    console: Console | None = None,
) -> int:
    """Print what P and D each did, the blocks moved and the outputs (``outputs`` keyed by
    the pair's request ids, :meth:`~pdlab.disagg.pair.PDPair.request_id`); exit code 0 or 1."""
    from pdlab.disagg.pair import PDPair  # the engines: only once there is a P/D result

    console = console or make_console()
    console.print(f"[bold]P/D run[/] over {trace.meta.get('transport', 'in-process')}")
    for inst in ("P", "D"):
        console.print(step_table(trace, inst, title=f"instance {inst}"))
    moved = trace.filter("kv_transfer", "D")
    if moved:
        t = Table(title="KV blocks moved P -> D")
        for col in ("request", "P blocks", "D blocks", "bytes", "ok"):
            t.add_column(col)
        for m in moved:
            t.add_row(
                m["req_id"],
                str(m["remote_block_ids"]),
                str(m["local_block_ids"]),
                str(m["nbytes"]),
                "yes" if m["ok"] else f"no: {m['reason']}",
            )
        console.print(t)
    for ev in trace.filter("remote_kv_ready", "D"):
        n, after = ev["num_tokens"], ev["num_computed_tokens"]
        why = f"N - 1, N = {n}" if after == n - 1 else f"the first token came with them, N = {n}"
        console.print(
            f"D {ev['req_id']}: K/V for {ev['num_computed_tokens_before_adjust']} "
            f"tokens arrived; num_computed_tokens = {after} ({why})"
        )
    for i, p in enumerate(prompts):
        rid = PDPair.request_id(i)
        out = outputs.get(rid)
        shown = repr(out["text"]) if out else "[red]missing[/]"
        console.print(f"{rid} {p!r} -> {shown} {out['output_token_ids'] if out else ''}")
    for role, err in errors.items():
        console.print(f"[red]{role} failed:[/] {err}")
    return 1 if errors or len(outputs) < len(prompts) else 0


def kernel_brief(ev: Mapping[str, Any]) -> str:
    """A kernel event in one short line: its name and the shape that sets its cost (rows
    gathered, query and key lengths, keys read), written as identifiers so it reads the same
    in any language."""
    s, name = ev.get("shapes", {}), ev["name"]
    if "rows" in s:
        width = s["kv_cache"][-1] if "kv_cache" in s else "?"
        return f"{name}: {s['rows']}×{width}"
    if "q_lens" in s:
        causal = ", causal" if s.get("causal") else ""
        return f"{name}: q={sum(s['q_lens'])}, k={sum(s['k_lens'])}{causal}"
    if "seq_lens" in s:
        return f"{name}: seq_lens={s['seq_lens']}"
    for key in ("kv_c", "q_nope", "o_latent", "out"):
        if key in s:
            return f"{name}: {key} {s[key]}"
    return name
