"""Rich console views of a trace: the step table every command prints, and the summary of
a P/D run. Views only: every number comes from the trace's events."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape

from pdlab.catalog import TEXT, text
from pdlab.engine.tokenizer import printable
from pdlab.engine.trace import Tracer
from pdlab.ui.choices import routing_reason
from pdlab.ui.fmt import FitTable


def make_console() -> Console:
    """A file or a pipe gets no colour (rich sees no terminal). Its width is the terminal's
    when there is one on any standard stream (``pdlab trace | less`` in an 80-column
    window gets 80) or ``COLUMNS``; with none at all (a log file, CI) 120 columns, so the
    step table shows its full headers. Every view fits 80 (:class:`~pdlab.ui.fmt.FitTable`)."""
    streams = (sys.stdin, sys.stdout, sys.stderr)
    wide = any(s is not None and s.isatty() for s in streams) or "COLUMNS" in os.environ
    return Console(highlight=False, width=None if wide else 120)


_STEP_COLUMNS = (
    ("st_inst", "left"),
    ("st_step", "right"),
    ("st_request", "left"),
    ("st_prompt_N", "right"),
    ("st_computed_before", "right"),
    ("st_scheduled", "right"),
    ("st_computed_after", "right"),
    ("st_routed_to", "left"),
    ("st_sampled", "right"),
)
_STEP_COUNTS = (
    "num_prompt_tokens",
    "num_computed_tokens_before",
    "num_scheduled_tokens",
    "num_computed_tokens_after",
)


def request_errors(trace: Tracer, instance: str | None = None) -> list[dict[str, Any]]:
    """The requests that ended in error (on ``instance``, if given): ``req``, ``inst``,
    ``step`` and ``error``, in the order they failed."""
    return [
        {"req": e["req_id"], "inst": e.instance, "step": e.step, "error": e["error"]}
        for e in trace.filter("request_error", instance)
    ]


def weights_line(trace: Tracer, lang: str = "en") -> str:
    """One line naming the weights the run loaded, from ``trace.meta["weights"]``."""
    w = trace.meta.get("weights", "random")
    kind = text(lang, f"weights_{w}") if w in ("trained", "random") else None
    return text(lang, "weights_line", weights=kind or text(lang, "weights_file", name=w))


def step_table(
    trace: Tracer, instance: str | None = None, title: str | None = None, lang: str = "en"
) -> FitTable:
    """One row per (step, request): ``num_computed_tokens`` before and after, tokens
    scheduled, the routing decision and the token sampled (``error`` where the request
    failed in that step; each failure's reason is a line under the table). Headers in
    ``lang``; under about 100 columns they are short, with a legend."""
    default = text(lang, "v_steps_on", inst=instance) if instance else text(lang, "v_steps")
    t = FitTable(title=title or default, legend=text(lang, "st_legend"))
    for key, just in _STEP_COLUMNS:
        short = escape(text(lang, f"{key}_s")) if f"{key}_s" in TEXT else None
        means = escape(text(lang, f"{key}_m")) if f"{key}_m" in TEXT else ""
        t.add_column(escape(text(lang, key)), justify=just, short=short, means=means)
    failed = {(e["inst"], e["step"], e["req"]) for e in request_errors(trace, instance)}
    for r in trace.step_rows(instance):
        path = r["forward"] or "-"
        before, scheduled = r["num_computed_tokens_before"], r["num_scheduled_tokens"]
        if r["path"] == "prefill" and scheduled == 1 and before > 0:
            path = f"[bold yellow]{path}[/]"  # D's short extend, sent down forward_mha
        sampled = " ".join(str(tok) for tok in r["sampled_tokens"])
        if (r["instance"], r["step"], r["req_id"]) in failed:
            sampled = f"[red]{escape(text(lang, 'st_error'))}[/]"
        counts = [str(r[key]) for key in _STEP_COUNTS]
        t.add_row(r["instance"], str(r["step"]), r["req_id"], *counts, path, sampled)
    for e in request_errors(trace, instance):
        t.notes.append(f"[red]✗[/] {escape(text(lang, 'st_failed', **e))}")
    return t


def generation_line(rid: str, prompt: str, out: Mapping[str, Any] | None, lang: str = "en") -> str:
    """How ``pdlab trace`` and ``pdlab pd`` print one request's generation (rich markup):
    ``req-0 'prompt' -> [ids] 'text'``, or why there is none."""
    head = escape(f"{rid} {prompt!r} ->")
    if out is None:
        return f"{head} [red]{escape(text(lang, 'v_missing'))}[/]"
    if out.get("error"):
        return f"{head} [red]{escape(text(lang, 'st_error'))}:[/] {escape(str(out['error']))}"
    ids = list(out["output_token_ids"])
    return f"{head} {escape(str(ids))} {escape(printable(ids))}"


def render_pd_result(
    trace: Tracer,
    prompts: list[str],
    outputs: dict[str, dict[str, Any]],
    errors: dict[str, str],
    console: Console | None = None,
    lang: str = "en",
) -> int:
    """Print what P and D each did, the blocks moved and the outputs (``outputs`` keyed by
    the pair's request ids, :meth:`~pdlab.disagg.pair.PDPair.request_id`, each with
    ``output_token_ids``, ``text`` and ``error``), in ``lang``; exit code 0, or 1 when a
    side failed or a request has no output or ended in error."""
    from pdlab.disagg.pair import PDPair  # the engines: only once there is a P/D result

    console = console or make_console()
    transport = trace.meta.get("transport", "in-process")
    console.print(f"[bold]{escape(text(lang, 'v_pd_run', transport=transport))}[/]")
    routing = trace.meta.get("routing", {}).get("D")
    if routing:
        runner, backend = routing["model_runner"], routing["mla_backend"]
        why = routing_reason(routing, lang)
        console.print(escape(text(lang, "v_routing", runner=runner, backend=backend, why=why)))
    console.print(escape(weights_line(trace, lang)))
    for inst in ("P", "D"):
        console.print(step_table(trace, inst, title=text(lang, "v_instance", inst=inst), lang=lang))
    moved = trace.filter("kv_transfer", "D")
    if moved:
        t = FitTable(title=text(lang, "v_moved"))
        for col in ("v_col_request", "v_col_p_blocks", "v_col_d_blocks", "v_col_bytes", "v_col_ok"):
            t.add_column(text(lang, col))
        for m in moved:
            ok = text(lang, "v_yes") if m["ok"] else escape(text(lang, "v_no", reason=m["reason"]))
            blocks = (str(m["remote_block_ids"]), str(m["local_block_ids"]))
            t.add_row(m["req_id"], *blocks, str(m["nbytes"]), ok)
        console.print(t)
    for ev in trace.filter("remote_kv_ready", "D"):
        # v_arrived_first: the first token came with the K/V (pdlab/disagg/designs.py)
        adjusted = ev["num_computed_tokens"] == ev["num_tokens"] - 1
        key = "v_arrived" if adjusted else "v_arrived_first"
        before, nct = ev["num_computed_tokens_before_adjust"], ev["num_computed_tokens"]
        console.print(
            escape(text(lang, key, req=ev["req_id"], n=before, nct=nct, N=ev["num_tokens"]))
        )
    bad = bool(errors)
    for i, p in enumerate(prompts):
        rid = PDPair.request_id(i)
        out = outputs.get(rid)
        bad = bad or out is None or bool(out.get("error"))
        console.print(generation_line(rid, p, out, lang))
    for role, err in errors.items():
        console.print(f"[red]{escape(text(lang, 'v_failed', role=role))}[/] {escape(err)}")
    return 1 if bad else 0


_KERNEL_WORDS = (("K/V assembly", "k_assembly"), ("new tokens", "k_new_tokens"))


def kernel_name(name: str, lang: str = "en") -> str:
    """A kernel event's name as a view shows it: the upstream names stay, pdlab's words
    around them (``K/V assembly``, ``(new tokens)``, ``(context)``) are in ``lang``."""
    for en, key in _KERNEL_WORDS:
        name = name.replace(en, text(lang, key))
    return name.replace("(context)", f"({text(lang, 'k_context')})")


def kernel_brief(ev: Mapping[str, Any], lang: str = "en") -> str:
    """A kernel event in one short line: its name and the shape that sets its cost (rows
    gathered, query and key lengths, keys read), the shapes written as identifiers."""
    s, name = ev.get("shapes", {}), kernel_name(ev["name"], lang)
    if "rows" in s:
        width = s["kv_cache"][-1] if "kv_cache" in s else "?"
        return f"{name}: {s['rows']}×{width}"
    if "q_lens" in s:
        causal = f", {text(lang, 'k_causal')}" if s.get("causal") else ""
        return f"{name}: q={sum(s['q_lens'])}, k={sum(s['k_lens'])}{causal}"
    if "seq_lens" in s:
        return f"{name}: seq_lens={s['seq_lens']}"
    for key in ("kv_c", "q_nope", "o_latent", "out"):
        if key in s:
            return f"{name}: {key} {s[key]}"
    return name
