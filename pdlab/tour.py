"""``pdlab tour`` and ``pdlab trace``: views of a real run's trace.

The tour runs one prompt through a P/D pair with upstream's default routing, through a
second P/D pair with ``prefill_context_parallel_size = 2``, through one colocated engine,
and once more under the FlashMLA backend profile. Then it prints six chapters: P prefills
the prompt; its blocks move to D; D sets ``num_computed_tokens = N - 1`` and why (the cache
holds K/V, the logits need the last hidden state); the one-token step, a short extend with
``is_prefilling`` true, under both settings of ``treat_short_extends_as_decodes``, and a
short fresh prompt under FlashMLA's ``reorder_batch_threshold``; what the two MLA paths cost
at DeepSeek scale; the rest of the generation, next to the colocated output. Every number is
read from the trace (or the cost model, ``pdlab/attention/cost.py``); the words are in
``pdlab/ui/tour_text.py``, in English or Chinese. ``pdlab trace`` runs any prompts with any
settings and prints the step table.

The upstream story it follows (vLLM 0.33.0): ``vllm/v1/core/sched/scheduler.py``
(``_update_waiting_for_remote_kv``), ``vllm/v1/core/kv_cache_manager.py``
(``get_computed_blocks``), ``vllm/v1/worker/gpu_model_runner.py`` (``is_prefilling``),
``vllm/v1/attention/backends/utils.py`` (``split_decodes_and_prefills``) and
``vllm/model_executor/layers/attention/mla_attention.py`` (the MLA builder and the two
paths).
"""

from __future__ import annotations

import argparse
import inspect
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from pdlab.config import (
    MLA_BACKENDS,
    PRESETS,
    AttentionConfig,
    CacheConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from pdlab.engine import one_thread
from pdlab.trace import Tracer
from pdlab.ui.console import make_console
from pdlab.ui.tour_text import LANGS, STEP_TABLE_HEADERS_ZH, tr

DEFAULT_PROMPT = "Why run the last token twice?"
COST_CONTEXTS = (1024, 4096, 16384, 65536)
BACKENDS = ("torch", "triton")


# ---- arguments ---------------------------------------------------------------------------
def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} is not >= 1")
    return v


def _preset(text: str) -> str:
    try:
        ModelConfig.preset(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def add_routing_arguments(p: argparse.ArgumentParser) -> None:
    """The two switches upstream's MLA routing depends on, under upstream's names."""
    p.add_argument(
        "--pcp",
        "--prefill-context-parallel-size",
        dest="pcp",
        type=positive_int,
        default=1,
        metavar="N",
        help="prefill_context_parallel_size; above 1 the MLA builder passes "
        "treat_short_extends_as_decodes=False (pdlab reproduces only this routing "
        "consequence, not context parallelism itself)",
    )
    p.add_argument(
        "--mla-backend",
        type=str.lower,
        choices=sorted(MLA_BACKENDS),
        default="triton_mla",
        help="whose reorder_batch_threshold to use: triton_mla 1, flashmla 128, flash_attn_mla 512",
    )


def routing_configs(args: argparse.Namespace) -> dict[str, Any]:
    """``attention_config`` and ``parallel_config`` for an engine, from the arguments."""
    return {
        "attention_config": AttentionConfig(args.mla_backend),
        "parallel_config": ParallelConfig(args.pcp),
    }


def add_tour_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--prompt", default=DEFAULT_PROMPT, help="the text prompt (default: %(default)r)"
    )
    p.add_argument("--block-size", type=positive_int, default=4, help="tokens per KV block")
    add_routing_arguments(p)
    p.add_argument(
        "--preset",
        type=_preset,
        default="deepseek-v3",
        help=f"model dimensions for the cost chapter: {', '.join(PRESETS)}",
    )
    p.add_argument(
        "--chapter", type=int, choices=range(1, 7), metavar="N", help="show only chapter N (1-6)"
    )
    p.add_argument("--lang", choices=LANGS, default="en", help="en or zh (Simplified Chinese)")
    p.add_argument("--json", type=Path, metavar="PATH", help="save the trace as JSON")
    p.add_argument("--plots", type=Path, metavar="DIR", help="write the PNG plots into DIR")
    p.add_argument("--max-tokens", type=positive_int, default=8, help="tokens to generate")
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="torch",
        help="kernel implementation (default torch; triton runs the interpreter "
        "on a CPU and is slow)",
    )


def add_trace_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--prompt",
        action="append",
        dest="prompts",
        metavar="TEXT",
        help="a prompt (repeat for a batch)",
    )
    p.add_argument("--block-size", type=positive_int, default=4)
    p.add_argument("--num-blocks", type=positive_int, default=256)
    add_routing_arguments(p)
    p.add_argument("--max-tokens", type=positive_int, default=8)
    p.add_argument("--max-num-batched-tokens", type=positive_int, default=2048)
    p.add_argument(
        "--long-prefill-token-threshold",
        type=int,
        default=0,
        help="cap on a prefill chunk (0: no cap)",
    )
    p.add_argument("--pd", action="store_true", help="a P/D pair instead of one engine")
    p.add_argument("--backend", choices=BACKENDS, default="torch")
    p.add_argument("--json", type=Path, metavar="PATH", help="save the trace as JSON")


# ---- the runs ----------------------------------------------------------------------------
@dataclass
class TourRun:
    """One prompt, run four ways. ``trace`` holds the main P/D pair (instances P and D) and
    the colocated engine (instance ``local``, the prompt run twice); ``other_trace`` holds
    a P/D pair whose ``prefill_context_parallel_size`` is the other side of 1;
    ``fresh_trace`` holds one engine under the FlashMLA profile (threshold 128)."""

    prompt: str
    cfg: ModelConfig
    mla_backend: str
    pcp: int
    other_pcp: int
    backend: str
    trace: Tracer
    other_trace: Tracer
    fresh_trace: Tracer
    prompt_ids: list[int]
    outputs: dict[str, list[int]]  # "pd", "other", "local"
    texts: dict[str, str]
    local_ids: tuple[str, str]  # the colocated request, then the same prompt again
    request_id: str  # the P/D pairs' request


def run_requests(
    prompt: str,
    block_size: int = 4,
    pcp: int = 1,
    max_tokens: int = 8,
    backend: str = "torch",
    mla_backend: str = "triton_mla",
) -> TourRun:
    """Run ``prompt`` through a P/D pair with the given routing settings, a P/D pair with
    ``prefill_context_parallel_size`` on the other side of 1, a colocated engine (twice, the
    second time hitting the prefix cache) and one engine under the FlashMLA profile."""
    from pdlab.engine import LLMEngine
    from pdlab.pd import PDPair
    from pdlab.request import SamplingParams

    if not prompt:
        raise ValueError("--prompt must not be empty")
    # Enough blocks for any prompt the model accepts (longer ones fail with a clear error).
    need = -(-(len(prompt.encode("utf-8")) + max_tokens) // block_size)
    cfg, sp = ModelConfig.tiny(), SamplingParams(max_tokens=max_tokens)
    cache = CacheConfig(block_size=block_size, num_blocks=max(256, need + 1))
    other_pcp = 2 if pcp == 1 else 1
    attn = AttentionConfig(mla_backend)

    def routing(size: int) -> dict[str, Any]:
        return {"attention_config": attn, "parallel_config": ParallelConfig(size)}

    with one_thread():
        pair = PDPair(cfg, cache, SchedulerConfig(), backend=backend, **routing(pcp))
        pd_out = pair.generate(prompt, sp)[0]
        other_pair = PDPair(cfg, cache, SchedulerConfig(), backend=backend, **routing(other_pcp))
        other_out = other_pair.generate(prompt, sp)[0]
        model = pair.prefill.model
        local = LLMEngine(
            cfg,
            cache,
            SchedulerConfig(),
            tracer=pair.tracer,
            backend=backend,
            model=model,
            **routing(pcp),
        )
        first = local.generate(prompt, sp)[0]
        again = local.generate(prompt, sp)[0]  # a prefix-cache hit: capped at N - 1
        fresh = LLMEngine(
            cfg,
            cache,
            SchedulerConfig(),
            backend=backend,
            model=model,
            attention_config=AttentionConfig("flashmla"),
        )
        fresh.generate(prompt, SamplingParams(max_tokens=1))
    pair.tracer.meta["tour"] = {
        "prompt": prompt,
        "prefill_context_parallel_size": pcp,
        "mla_backend": attn.backend,
        "max_tokens": max_tokens,
    }
    return TourRun(
        prompt,
        cfg,
        attn.backend,
        pcp,
        other_pcp,
        backend,
        pair.tracer,
        other_pair.tracer,
        fresh.tracer,
        list(pd_out.prompt_token_ids),
        {
            "pd": pd_out.output_token_ids,
            "other": other_out.output_token_ids,
            "local": first.output_token_ids,
        },
        {"pd": pd_out.text, "other": other_out.text, "local": first.text},
        (first.request_id, again.request_id),
        pd_out.request_id,
    )


# ---- reading the trace -------------------------------------------------------------------
def _steps(trace: Tracer, inst: str, rid: str) -> list[tuple[dict, dict]]:
    """(step event, that request's scheduled row) for every step that scheduled ``rid``."""
    return [
        (e, r) for e in trace.filter("step", inst) for r in e["scheduled"] if r["req_id"] == rid
    ]


def _kernels(trace: Tracer, inst: str, step: int) -> list[dict[str, Any]]:
    return trace.filter("kernel", inst, step=step)


def _row_shape(kernels: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(layers, kv_lora_rank, qk_rope_head_dim) read off reshape_and_cache_mla calls."""
    writes = [k for k in kernels if k["name"] == "reshape_and_cache_mla"]
    s = writes[0]["shapes"]
    return 1 + max(k["layer"] for k in writes), s["kv_c"][-1], s["k_pe"][-1]


def _tok(i: int) -> str:
    if i == 32:
        return "␣"
    if 32 < i < 127:
        return chr(i)
    return f"\\x{i:02x}" if 0 <= i < 256 else f"<{i}>"


def _shown(prompt: str, limit: int = 60) -> str:
    return repr(prompt if len(prompt) <= limit else prompt[: limit - 1] + "…")


def _si(x: float) -> str:
    for unit, div in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.3g} {unit}"
    return f"{x:.0f}"


def _ratio(a: float, b: float) -> str:
    r = a / b if b else float("inf")
    return f"{r:.0f}×" if r >= 10 else f"{r:.2g}×"


def _ctx_label(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 else str(n)


def _span(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}–{hi}"


def _elided(n: int, head: int, tail: int) -> list[int | None]:
    """Indices 0..n-1, with ``None`` standing for a run left out when n is long."""
    if n <= head + tail + 1:
        return list(range(n))
    return [*range(head), None, *range(n - tail, n)]


def _source(func: Any, first: str, last: str, mark: str) -> Syntax:
    """The real source of ``func`` from the line starting with ``first`` to the one starting
    with ``last`` (to the function's end if missing), the lines containing ``mark``
    highlighted, with the file's line numbers."""
    lines, start = inspect.getsourcelines(func)
    i0 = next((i for i, s in enumerate(lines) if s.strip().startswith(first)), 0)
    i1 = next(
        (i for i, s in enumerate(lines) if s.strip().startswith(last) and i >= i0), len(lines) - 1
    )
    chunk = lines[i0 : i1 + 1]
    marked = {start + i0 + j for j, s in enumerate(chunk) if mark in s}
    return Syntax(
        textwrap.dedent("".join(chunk)).rstrip("\n"),
        "python",
        line_numbers=True,
        start_line=start + i0,
        highlight_lines=marked,
        theme="ansi_dark",
        background_color="default",
        word_wrap=True,
    )


def _where(func: Any) -> tuple[str, str]:
    return func.__module__.replace(".", "/") + ".py", func.__qualname__


# ---- chapters ----------------------------------------------------------------------------
def _chapter1(c: Console, run: TourRun, lang: str) -> None:
    t, rid = run.trace, run.request_id
    n = t.first("add_request", "P", req_id=rid)["num_prompt_tokens"]
    c.print(tr(lang, "ch1_tokens", prompt=_shown(run.prompt), n=n))
    steps = _steps(t, "P", rid)
    if len(steps) == 1:
        c.print(tr(lang, "ch1_whole"))
    for ev, r in steps:
        route = t.first("route", "P", step=ev["step"], req_id=rid)
        c.print(
            tr(
                lang,
                "ch1_step",
                step=ev["step"],
                sched=r["num_scheduled_tokens"],
                before=r["num_computed_tokens_before"],
                after=r["num_computed_tokens_after"],
                q=route["query_len"],
                forward=route["forward"],
            )
        )
    layers, L, R = _row_shape(_kernels(t, "P", steps[0][0]["step"]))
    c.print(tr(lang, "ch1_write", layers=layers, L=L, R=R, W=L + R))
    bs = t.meta["block_size"]
    blocks = steps[-1][1]["block_ids"]
    tab = Table(title=tr(lang, "ch1_table"))
    for key, just in (
        ("col_logical", "right"),
        ("col_p_block", "right"),
        ("col_positions", "right"),
        ("col_tokens", "left"),
        ("col_ids", "left"),
    ):
        tab.add_column(tr(lang, key), justify=just)
    for j in _elided(len(blocks), 8, 3):
        if j is None:
            tab.add_row("…", "…", "…", "…", "…")
            continue
        ids = run.prompt_ids[j * bs : (j + 1) * bs]
        tab.add_row(
            str(j),
            str(blocks[j]),
            _span(j * bs, j * bs + len(ids) - 1),
            escape(" ".join(_tok(i) for i in ids)),
            " ".join(map(str, ids)),
        )
    c.print(tab)
    s = t.first("sample", "P", req_id=rid)
    fin = t.first("finish", "P", req_id=rid)
    c.print(
        tr(
            lang,
            "ch1_sample",
            tok=s["token"],
            ch=_tok(s["token"]),
            pos=s["position"],
            reason=fin["finish_reason"],
        )
    )
    if fin.get("kv_transfer_params"):
        c.print(tr(lang, "ch1_hold", delay=fin["delay_free"], blocks=blocks))
        c.print(escape(json.dumps(fin["kv_transfer_params"])))
    freed = t.filter("free", "P", req_id=rid)
    if freed:
        c.print(tr(lang, "ch1_freed", blocks=freed[0]["block_ids"], step=freed[0]["step"]))


def _chapter2(c: Console, run: TourRun, lang: str) -> None:
    t, rid = run.trace, run.request_id
    wait = t.first("waiting_for_remote_kvs", "D", req_id=rid)
    c.print(tr(lang, "ch2_admit", ext=wait["num_external_tokens"], blocks=wait["block_ids"]))
    x = t.first("kv_transfer", "D", req_id=rid)
    if not x["ok"]:
        c.print(tr(lang, "ch2_failed", reason=x["reason"]))
    bs = t.meta["block_size"]
    n = t.first("add_request", "D", req_id=rid)["num_prompt_tokens"]
    tab = Table(title=tr(lang, "ch2_table"))
    for key in ("col_p_block", "col_d_block", "col_positions", "col_rows"):
        tab.add_column(tr(lang, key), justify="right")
    pairs = list(zip(x["remote_block_ids"], x["local_block_ids"]))
    for j in _elided(len(pairs), 8, 3):
        if j is None:
            tab.add_row("…", "…", "…", "…")
            continue
        lo, hi = j * bs, min((j + 1) * bs, n) - 1
        tab.add_row(str(pairs[j][0]), f"→ {pairs[j][1]}", _span(lo, hi), str(hi - lo + 1))
    c.print(tab)
    layers, L, R = _row_shape(t.filter("kernel", "P"))
    rows = len(pairs) * bs * layers * (L + R)
    if rows and x["nbytes"] % rows == 0:
        c.print(
            tr(
                lang,
                "ch2_bytes",
                nbytes=x["nbytes"],
                nb=len(pairs),
                bs=bs,
                layers=layers,
                W=L + R,
                e=x["nbytes"] // rows,
            )
        )
    else:
        c.print(tr(lang, "ch2_bytes_plain", nbytes=x["nbytes"]))


def _chapter3(c: Console, run: TourRun, lang: str) -> None:
    t, rid = run.trace, run.request_id
    wait = t.first("waiting_for_remote_kvs", "D", req_id=rid)
    c.print(tr(lang, "ch3_wait", step=wait["step"], ext=wait["num_external_tokens"]))
    ready = t.first("remote_kv_ready", "D", req_id=rid)
    n, nct = ready["num_prompt_tokens"], ready["num_computed_tokens"]
    c.print(
        tr(
            lang,
            "ch3_ready",
            step=ready["step"],
            before=ready["num_computed_tokens_before_adjust"],
            n=n,
            nct=nct,
        )
    )
    ev, r = _steps(t, "D", rid)[0]
    c.print(
        tr(
            lang,
            "ch3_sched",
            step=ev["step"],
            sched=r["num_scheduled_tokens"],
            pos=r["num_computed_tokens_before"],
            before=r["num_computed_tokens_before"],
            after=r["num_computed_tokens_after"],
        )
    )
    # The table: every layer's K/V row per position (in D's blocks), against h[N-1].
    layers, L, R = _row_shape(_kernels(t, "D", ev["step"]))
    bs, d_blocks = t.meta["block_size"], t.first("kv_transfer", "D", req_id=rid)["local_block_ids"]
    last = n - 1
    tab = Table(title=tr(lang, "ch3_table"))
    tab.add_column(tr(lang, "col_pos"), justify="right")
    tab.add_column(tr(lang, "col_token"))
    tab.add_column(tr(lang, "col_d_slot"), justify="right")
    per_layer = layers <= 3
    for layer in range(layers) if per_layer else [None]:
        tab.add_column(
            tr(lang, "col_layer_kv", l=layer)
            if per_layer
            else tr(lang, "col_layers_kv", a=0, b=layers - 1)
        )
    tab.add_column(tr(lang, "col_h", l=layers - 1))
    for pos in _elided(n, 3, 3):
        if pos is None:
            tab.add_row(*["…"] * (4 + (layers if per_layer else 1)))
            continue
        kv = tr(lang, "cell_rewritten") if pos == last else f"✓ {L}|{R}"
        tab.add_row(
            str(pos),
            escape(_tok(run.prompt_ids[pos])),
            f"{d_blocks[pos // bs]}[{pos % bs}]",
            *[kv] * (layers if per_layer else 1),
            tr(lang, "cell_needed") if pos == last else "—",
        )
    c.print(tab)
    c.print(
        tr(
            lang,
            "ch3_explain",
            n=n,
            layers=layers,
            W=L + R,
            last=last,
            reused=f"0..{last - 1}" if last else "—",
            H=run.cfg.hidden_size,
        )
    )
    d_tok = t.first("sample", "D", req_id=rid)["token"]
    p_tok = t.first("sample", "P", req_id=rid)["token"]
    c.print(
        tr(
            lang,
            "ch3_check",
            d=d_tok,
            p=p_tok,
            verdict=tr(lang, "same" if d_tok == p_tok else "different"),
        )
    )
    from pdlab.kv_cache.manager import KVCacheManager
    from pdlab.sched.scheduler import Scheduler

    fn = Scheduler._update_waiting_for_remote_kv
    path, name = _where(fn)
    c.print(tr(lang, "ch3_src", path=path, qualname=name))
    c.print(_source(fn, "num_computed_tokens = min(", "request.num_computed_tokens =", "-= 1"))
    fn = KVCacheManager.get_computed_blocks
    path, name = _where(fn)
    c.print(tr(lang, "ch3_local", path=path, qualname=name))
    c.print(_source(fn, "max_cache_hit_length =", "max_num_blocks =", "- 1"))
    again = t.first("admit", "local", req_id=run.local_ids[1])
    c.print(
        tr(
            lang,
            "ch3_local_hit",
            hit=again["num_cached_tokens"],
            bs=bs,
            nm1=n - 1,
            expect=(n - 1) // bs * bs,
            n=n,
        )
    )


def _first_d_step(trace: Tracer, rid: str) -> dict[str, Any]:
    """What D's first step did: its route, kernels, cost and sampled token."""
    ev, _ = _steps(trace, "D", rid)[0]
    ks = _kernels(trace, "D", ev["step"])
    return {
        "route": trace.first("route", "D", step=ev["step"], req_id=rid),
        "kernels": [k for k in ks if k["layer"] == 0 and k["path"] in ("prefill", "decode")],
        "flops": sum(k["flops"] for k in ks),
        "bytes": sum(k["bytes"] for k in ks),
        "sample": trace.first("sample", "D", req_id=rid),
    }


def _split_test(rt: dict[str, Any]) -> str:
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


def _chapter4(c: Console, run: TourRun, lang: str) -> None:
    from pdlab.ui.console import kernel_brief

    rid = run.request_id
    by_pcp = {
        run.pcp: _first_d_step(run.trace, rid),
        run.other_pcp: _first_d_step(run.other_trace, rid),
    }
    sizes = sorted(by_pcp)  # 1 (upstream's default) first
    r0 = by_pcp[1]["route"]
    c.print(
        tr(
            lang,
            "ch4_intro",
            q=r0["query_len"],
            nct=r0["num_computed_tokens"],
            n=r0["num_prompt_tokens"],
            prefilling=r0["is_prefilling"],
            region=r0["region"],
        )
    )
    tab = Table(title=tr(lang, "ch4_table"))
    tab.add_column("")
    for size in sizes:
        mark = tr(lang, "main_run") if size == run.pcp else ""
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
            ("row_flops", _si(d["flops"])),
            ("row_bytes", _si(d["bytes"])),
            ("row_token", f"{d['sample']['token']} ({_tok(d['sample']['token'])})"),
            ("row_logit", f"{d['sample']['logit']:.6f}"),
        ):
            cells.setdefault(key, []).append(escape(str(val)))
    for key, vals in cells.items():
        label = key if not key.startswith("row_") else tr(lang, key)
        tab.add_row(label, *vals, end_section=key in ("is_prefilling", "row_path", "row_kernels"))
    c.print(tab)
    c.print(tr(lang, "ch4_dtype", dtype=run.trace.meta.get("dtype", "float32")))
    gathered = [k["shapes"]["rows"] for k in by_pcp[2]["kernels"] if k["name"] == "gather_cache"]
    ctx_rows = sum(gathered)
    c.print(tr(lang, "ch4_paths", ctx=ctx_rows) if ctx_rows else tr(lang, "ch4_paths_no_context"))
    sa, sb = (by_pcp[size]["sample"] for size in sizes)
    delta = f"{abs(sa['logit'] - sb['logit']):.1e}"
    if sa["token"] == sb["token"]:
        c.print(tr(lang, "ch4_same", tok=sa["token"], d=delta))
    else:
        c.print(tr(lang, "ch4_diff", a=sa["token"], b=sb["token"], d=delta))
    fresh = run.fresh_trace.filter("route")[0]
    c.print(
        tr(
            lang,
            "ch4_fresh_decode" if fresh["path"] == "decode" else "ch4_fresh_prefill",
            q=fresh["query_len"],
            t=fresh["decode_threshold"],
            region=fresh["region"],
            forward=fresh["forward"],
        )
    )


def _chapter5(c: Console, cfg: ModelConfig, lang: str) -> None:
    from pdlab.attention.cost import (
        absorb_crossover_query_len,
        decode_path_cost,
        prefill_path_cost,
    )

    H, L, R = cfg.num_attention_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    c.print(tr(lang, "ch5_intro", model=cfg.name, H=H, L=L, R=R))
    tab = Table(title=tr(lang, "ch5_table"))
    for key in (
        "col_context",
        "col_pf_flops",
        "col_dc_flops",
        "col_ratio",
        "col_pf_bytes",
        "col_dc_bytes",
        "col_ratio",
    ):
        tab.add_column(tr(lang, key), justify="right")
    costs = [
        (ctx, prefill_path_cost(cfg, ctx), decode_path_cost(cfg, ctx)) for ctx in COST_CONTEXTS
    ]
    for ctx, p, d in costs:
        tab.add_row(
            _ctx_label(ctx),
            _si(p.flops),
            _si(d.flops),
            _ratio(p.flops, d.flops),
            _si(p.bytes) + "B",
            _si(d.bytes) + "B",
            _ratio(p.bytes, d.bytes),
        )
    c.print(tab)
    ctx, p, d = costs[-1]
    upproj = sum(f for name, f, _ in p.parts if "context up-projection" in name)
    c.print(tr(lang, "ch5_upproj", mf=f"{upproj / ctx / 1e6:.1f}", W=L + R))
    c.print(
        tr(
            lang,
            "ch5_model",
            layers=cfg.num_hidden_layers,
            ctx=_ctx_label(ctx),
            pf=_si(p.flops * cfg.num_hidden_layers),
            df=_si(d.flops * cfg.num_hidden_layers),
        )
    )
    c.print(tr(lang, "ch5_cross", x=f"{absorb_crossover_query_len(cfg):.0f}"))
    c.print(tr(lang, "ch5_upstream"))
    c.print(tr(lang, "ch5_others"))


def _chapter6(c: Console, run: TourRun, lang: str) -> None:
    from pdlab.ui.console import step_table

    t, rid = run.trace, run.request_id
    tab = step_table(t, "D", title=tr(lang, "ch6_steps"))
    if lang == "zh":
        for col in tab.columns:
            col.header = STEP_TABLE_HEADERS_ZH.get(str(col.header), col.header)
    c.print(tab)
    later = t.filter("route", "D", req_id=rid)[1:]
    if later and all(
        e["query_len"] == 1
        and not e["is_prefilling"]
        and e["region"] == "decode"
        and e["path"] == "decode"
        for e in later
    ):
        c.print(tr(lang, "ch6_agree"))
    tab = Table(title=tr(lang, "ch6_outputs"))
    for key in ("col_run", "col_token_ids", "col_text"):
        tab.add_column(tr(lang, key))
    for key, label in (
        ("pd", tr(lang, "run_pd", pcp=run.pcp)),
        ("other", tr(lang, "run_pd", pcp=run.other_pcp)),
        ("local", tr(lang, "run_local", pcp=run.pcp)),
    ):
        tab.add_row(label, escape(str(run.outputs[key])), escape(repr(run.texts[key])))
    c.print(tab)
    equal = run.outputs["pd"] == run.outputs["local"] == run.outputs["other"]
    c.print(
        tr(
            lang,
            "ch6_equal",
            verdict=tr(lang, "equal" if equal else "not_equal"),
            n=len(run.outputs["local"]),
        )
    )
    freed = t.filter("free", "D", req_id=rid)
    if freed:
        c.print(tr(lang, "ch6_freed", blocks=freed[-1]["block_ids"], step=freed[-1]["step"]))


# ---- commands ----------------------------------------------------------------------------
def run_tour(args: argparse.Namespace, console: Console | None = None) -> int:
    """``pdlab tour``: run the requests, print the chapters, save what was asked for."""
    c = console or make_console()
    lang = args.lang
    run = run_requests(
        args.prompt, args.block_size, args.pcp, args.max_tokens, args.backend, args.mla_backend
    )
    preset = ModelConfig.preset(args.preset)
    if args.chapter is None:
        layers, L, R = _row_shape(run.trace.filter("kernel", "P"))
        c.rule(f"[bold]{tr(lang, 'title')}[/]")
        c.print(tr(lang, "question"))
        c.print(
            tr(
                lang,
                "settings",
                prompt=_shown(run.prompt),
                model=run.trace.meta["model"],
                layers=layers,
                L=L,
                R=R,
                bs=run.trace.meta["block_size"],
                pcp=run.pcp,
                mla=run.mla_backend,
                backend=run.trace.meta["backend"],
            )
        )
    chapters = {
        1: lambda: _chapter1(c, run, lang),
        2: lambda: _chapter2(c, run, lang),
        3: lambda: _chapter3(c, run, lang),
        4: lambda: _chapter4(c, run, lang),
        5: lambda: _chapter5(c, preset, lang),
        6: lambda: _chapter6(c, run, lang),
    }
    for number, show in chapters.items():
        if args.chapter in (None, number):
            c.print()
            c.rule(f"[bold]{tr(lang, f'ch{number}')}[/]")
            show()
    if args.json is not None:
        c.print(tr(lang, "wrote", path=run.trace.save(args.json)))
    if args.plots is not None:
        from pdlab.ui.plots import save_all

        paths = save_all(run.trace, preset, args.plots, instance="D")
        c.print(
            tr(
                lang,
                "wrote_plots",
                n=len(paths),
                dir=args.plots,
                names=", ".join(p.name for p in paths),
            )
        )
    return 0


def run_trace(args: argparse.Namespace, console: Console | None = None) -> int:
    """``pdlab trace``: any prompts, any settings; print the step table, save the trace."""
    from pdlab.engine import LLMEngine
    from pdlab.pd import PDPair
    from pdlab.request import SamplingParams
    from pdlab.ui.console import step_table

    c = console or make_console()
    prompts = args.prompts or [DEFAULT_PROMPT]
    if any(not p for p in prompts):
        raise ValueError("--prompt must not be empty")
    cache = CacheConfig(block_size=args.block_size, num_blocks=args.num_blocks)
    sched = SchedulerConfig(
        max_num_batched_tokens=args.max_num_batched_tokens,
        long_prefill_token_threshold=args.long_prefill_token_threshold,
    )
    sp = SamplingParams(max_tokens=args.max_tokens)
    cfg = ModelConfig.tiny()
    with one_thread():
        if args.pd:
            pair = PDPair(cfg, cache, sched, backend=args.backend, **routing_configs(args))
            outs, trace = pair.generate(prompts, sp), pair.tracer
        else:
            engine = LLMEngine(cfg, cache, sched, backend=args.backend, **routing_configs(args))
            outs, trace = engine.generate(prompts, sp), engine.tracer
    kind = "P/D" if args.pd else "one engine"
    title = (
        f"{kind}, block_size={args.block_size}, mla_backend={args.mla_backend}, "
        f"prefill_context_parallel_size={args.pcp}"
    )
    c.print(step_table(trace, title=title))
    for p, o in zip(prompts, outs):
        c.print(escape(f"{o.request_id} {p!r} -> {o.output_token_ids} {o.text!r}"))
    if args.json is not None:
        c.print(escape(f"wrote {trace.save(args.json)}"))
    return 0
