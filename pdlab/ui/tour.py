"""``pdlab tour`` and ``pdlab trace``, run from their parsed arguments (``pdlab/cli/tour.py``).

The tour runs one demonstration (:func:`pdlab.demo.run_demo` with ``compare=True``) and
prints seven chapters about its trace: 1-3 in :mod:`pdlab.ui.tour_kv`, 4-6 in
:mod:`pdlab.ui.tour_route`, 7 in :mod:`pdlab.ui.tour_designs`. ``pdlab trace`` runs any
prompts with any settings and prints the step table.

Upstream (vLLM 0.33.0): ``vllm/v1/core/sched/scheduler.py``, ``vllm/v1/core/kv_cache_manager.py``,
``vllm/v1/worker/gpu/model_runner.py`` (Model Runner V2, the default; V1 is
``vllm/v1/worker/gpu_model_runner.py``), ``vllm/v1/attention/backends/utils.py`` and
``vllm/model_executor/layers/attention/mla_attention.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape

from pdlab.catalog import text
from pdlab.engine.config import CacheConfig, ModelConfig, SchedulerConfig
from pdlab.errors import PdlabValueError
from pdlab.ui import tour_sims
from pdlab.ui.choices import routing_reason
from pdlab.ui.console import make_console, request_errors

DEFAULT_PROMPT = "Why run the last token twice?"


# ---- what the arguments allow (pdlab/cli/tour.py defines them) ---------------------------
TOUR_MAX_TOKENS = 512
# The kernels the tour and trace run by default (``pdlab doctor`` reports it).
DEFAULT_BACKEND = "torch"
CHAPTERS = 7  # chapters 1-3 in tour_kv.py, 4-6 in tour_route.py, 7 in tour_designs.py
# What each chapter reads of the demonstration: "run" (the P/D pair and the colocated
# engine) and the parts of pdlab.demo.PARTS. Chapter 5 is the cost model alone; chapter 7
# runs its own designs and simulation (tour_designs.py), from the prompt alone.
NEEDS: dict[int, frozenset[str]] = {
    1: frozenset({"run"}),
    2: frozenset({"run"}),
    3: frozenset({"run", "again"}),
    4: frozenset({"run", "variants", "fresh"}),
    5: frozenset(),
    6: frozenset({"run", "variants"}),
    7: frozenset(),
}


def tour_needs(args: argparse.Namespace) -> set[str]:
    """What this tour must run: its chapters' needs; the whole tour's opening, ``--json`` and
    ``--plots`` read the pair's trace too. ``"engine"`` when any model runs at all."""
    chapters = range(1, CHAPTERS + 1) if args.chapter is None else (args.chapter,)
    need = set().union(*(NEEDS[n] for n in chapters))
    if args.chapter is None or args.json is not None or args.plots is not None:
        need.add("run")
    if need or 7 in chapters or args.plots is not None:
        need.add("engine")
    return need


# ---- commands ----------------------------------------------------------------------------
def page(text: str, height: int) -> None:
    """Print ``text`` (with its colours), through ``less -R`` when it is longer than
    ``height`` lines and ``less`` is there; plainly otherwise."""
    less = shutil.which("less")
    if less is None or text.count("\n") < height:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    with contextlib.suppress(KeyboardInterrupt):
        subprocess.run([less, "-R"], input=text, text=True, check=False)


def run_tour(
    args: argparse.Namespace, model_config: ModelConfig, console: Console | None = None
) -> int:
    """``pdlab tour``: run the demonstration (the tiny ``model_config`` the arguments ask
    for), print the chapters, save what was asked for. On a terminal (and without
    ``--no-pager``) the chapters go through :func:`page`."""
    c = console or make_console()
    if console is None and getattr(args, "pager", False) and sys.stdout.isatty():
        with c.capture() as captured:
            code = _tour(args, model_config, c)
        page(captured.get(), c.height)
        return code
    return _tour(args, model_config, c)


def _tour_designs() -> Any:
    from pdlab.ui import tour_designs  # imported for chapter 7 only: the engine, the sim

    return tour_designs


@dataclass
class PromptOnly:
    """What chapter 7 reads of a demonstration, when the tour runs no P/D pair for it."""

    prompt_ids: list[int]
    cfg: ModelConfig
    block_size: int


def _tour(args: argparse.Namespace, cfg: ModelConfig, c: Console) -> int:
    if not args.prompt:
        raise PdlabValueError("err_empty_prompt")
    # Chapter 7's simulations do not depend on the prompt: they run on another core while
    # this process imports torch and runs the engine (pdlab/ui/tour_sims.py).
    sims = None
    if tour_sims.shows_chapter7(args):
        sims = tour_sims.take_started() or tour_sims.start_sims()
    try:
        return _chapters(args, cfg, c, sims)
    finally:
        if sims is not None:
            sims.close()


def _chapters(args: argparse.Namespace, cfg: ModelConfig, c: Console, sims: Any) -> int:
    from pdlab.engine.tokenizer import encode
    from pdlab.ui import tour_kv, tour_route
    from pdlab.ui.console import weights_line
    from pdlab.ui.tour_kv import printer, say

    lang, put = args.lang, printer(c, args.lang)
    need = tour_needs(args)
    demo = None
    if "run" in need:
        from pdlab.demo import PARTS, run_demo  # the engine: torch

        same = ("block_size", "pcp", "mla_backend", "max_tokens", "backend", "gpu", "model_runner")
        settings = {name: getattr(args, name) for name in same}  # run_demo's keywords too
        k, compare = args.num_speculative_tokens or 0, need & set(PARTS)
        demo = run_demo(
            args.prompt, model_config=cfg, compare=compare, num_speculative_tokens=k, **settings
        )
        traces = (demo.trace, demo.other_trace, demo.fresh_trace)
        failed = [e for t in traces if t is not None for e in request_errors(t)]
        if failed:  # the chapters read what the requests computed: there is nothing to show
            for e in failed:
                c.print(f"[red]✗[/] {say(lang, 'st_failed', **e)}")
            put("tour_failed")
            return 1
    prompt = PromptOnly(encode(args.prompt), cfg, args.block_size)
    preset = ModelConfig.preset(args.preset)
    if args.chapter is None:
        layers, L, R = tour_kv.row_shape(demo.trace.filter("kernel", "P"))
        c.rule(f"[bold]{say(lang, 'title')}[/]")
        put("question")
        meta = demo.trace.meta
        shape = {"layers": layers, "L": L, "R": R, "bs": demo.block_size, "pcp": demo.pcp}
        run = {"mla": demo.mla_backend, "backend": meta["backend"], "runner": demo.model_runner}
        said, why = tour_kv.shown(demo.prompt), routing_reason(meta["routing"]["D"], lang)
        put("settings", prompt=said, model=meta["model"], why=why, **shape, **run)
        put("how_to_read", n=CHAPTERS)
        c.print(escape(weights_line(demo.trace, lang)))
    chapters = {
        1: lambda: tour_kv.chapter1(c, demo, lang),
        2: lambda: tour_kv.chapter2(c, demo, lang),
        3: lambda: tour_kv.chapter3(c, demo, lang),
        4: lambda: tour_route.chapter4(c, demo, lang),
        5: lambda: tour_route.chapter5(c, preset, lang),
        6: lambda: tour_route.chapter6(c, demo, lang),
        7: lambda: _tour_designs().chapter7(c, demo or prompt, lang, sims),  # engine, sim
    }
    for number, show in chapters.items():
        if args.chapter in (None, number):
            c.print()
            c.rule(f"[bold]{say(lang, f'ch{number}')}[/]")
            show()
    if args.json is not None:
        put("wrote", path=demo.trace.save(args.json))
    if args.plots is not None:
        from pdlab.ui.plots import save_all

        paths = save_all(demo.trace, preset, args.plots, instance="D", lang=lang)
        paths += _tour_designs().save_plots(demo or prompt, args.plots, lang)
        put("wrote_plots", n=len(paths), dir=args.plots, names=", ".join(p.name for p in paths))
    return 0


def run_trace(
    args: argparse.Namespace,
    model_config: ModelConfig,
    routing: dict[str, Any],
    console: Console | None = None,
) -> int:
    """``pdlab trace``: any prompts, any settings (the tiny ``model_config`` and the
    ``routing`` configurations the arguments ask for); print the step table, save the
    trace."""
    from pdlab.disagg.pair import PDPair
    from pdlab.engine.llm_engine import LLMEngine, one_thread
    from pdlab.engine.request import SamplingParams
    from pdlab.ui.console import generation_line, step_table, weights_line

    c = console or make_console()
    prompts = args.prompts or [DEFAULT_PROMPT]
    if any(not p for p in prompts):
        raise PdlabValueError("err_empty_prompt")
    cache = CacheConfig(block_size=args.block_size, num_blocks=args.num_blocks)
    sched = SchedulerConfig(
        max_num_batched_tokens=args.max_num_batched_tokens,
        long_prefill_token_threshold=args.long_prefill_token_threshold,
    )
    sp = SamplingParams(max_tokens=args.max_tokens)
    with one_thread():
        if args.pd:
            pair = PDPair(model_config, cache, sched, backend=args.backend, **routing)
            outs, trace = pair.generate(prompts, sp), pair.tracer
        else:
            engine = LLMEngine(model_config, cache, sched, backend=args.backend, **routing)
            outs, trace = engine.generate(prompts, sp), engine.tracer
    kind = "P/D" if args.pd else text(args.lang, "v_one_engine")
    routing = next(iter(trace.meta["routing"].values()))
    title = (
        f"{kind}, model_runner={routing['model_runner']}, block_size={args.block_size}, "
        f"mla_backend={routing['mla_backend']} ({routing_reason(routing, args.lang)}), "
        f"prefill_context_parallel_size={args.pcp}"
    )
    c.print(escape(weights_line(trace, args.lang)))
    c.print(step_table(trace, title=escape(title), lang=args.lang))
    for p, o in zip(prompts, outs):
        c.print(generation_line(o.request_id, p, vars(o), args.lang))
    if args.json is not None:
        c.print(escape(text(args.lang, "wrote", path=trace.save(args.json))))
    return 1 if any(o.error for o in outs) else 0
