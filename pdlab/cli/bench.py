"""``pdlab bench paths|kernels|sched``: its arguments and what it runs.

The measurements themselves are in ``pdlab/tools/bench.py`` (``paths``),
``pdlab/tools/bench_kernels.py`` and ``pdlab/tools/bench_sched.py``; this module checks the
request (a context the model cannot hold or the memory cannot fit is one line) and prints,
in ``--lang`` (the words are in ``pdlab/catalog/bench.py``; ``--json`` writes the same
numbers and English notes in both languages). Upstream's counterpart is
``vllm/entrypoints/cli/benchmark/``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pdlab.catalog import Help
from pdlab.cli.args import BACKENDS, int_list, positive_int, speculative_tokens
from pdlab.engine.config import PRESETS
from pdlab.errors import PdlabValueError, Phrase


def add_arguments(sub: Any) -> None:
    b = sub.add_parser("bench", help=Help("help_cmd_bench"))
    bsub = b.add_subparsers(dest="bench", required=True, metavar="WHAT")
    bp = bsub.add_parser("paths", help=Help("help_bench_paths"))
    bp.add_argument("--preset", choices=sorted(PRESETS), default="deepseek-v3")
    bp.add_argument(
        "--context", type=int_list, default=[1024, 4096, 16384], help=Help("help_bench_context")
    )
    bp.add_argument("--heads", type=positive_int, help=Help("help_bench_heads"))
    bp.add_argument("--repeats", type=positive_int, default=3)
    bp.add_argument("--backend", choices=BACKENDS)
    bp.add_argument(
        "--num-speculative-tokens",
        type=speculative_tokens,
        metavar="K",
        help=Help("help_bench_num_spec"),
    )
    bk = bsub.add_parser("kernels", help=Help("help_bench_kernels"))
    bk.add_argument("--quick", action="store_true")
    bs = bsub.add_parser("sched", help=Help("help_bench_sched"))
    bs.add_argument("--requests", type=positive_int, default=256)
    bs.add_argument("--steps", type=positive_int, default=200)
    for x in (bp, bk, bs):
        x.add_argument("--json", type=Path, metavar="PATH", help=Help("help_bench_json"))


def _check_paths_fit(preset: str, contexts: list[int], heads: int | None) -> None:
    """``--context`` within the model's positions, and the prefill path's up-projected
    context (one chunk of at most 65536 tokens, per head K and V, about three copies)
    within free memory: the OS would grant more and then kill the process mid-run."""
    import torch

    from pdlab.engine.config import ModelConfig
    from pdlab.engine.input_processor import available_bytes

    cfg = ModelConfig.preset(preset)
    longest = max(contexts)
    if longest > cfg.max_position_embeddings:
        bound = f"max_position_embeddings={cfg.max_position_embeddings}"
        allowed = Phrase("err_x_at_most_of", bound=bound, whose=preset)
        raise PdlabValueError(
            "err_option_invalid", option="--context", value=longest, allowed=allowed
        )
    h = heads or cfg.num_attention_heads
    elem = 2 if torch.cuda.is_available() else 4
    need = 3 * min(longest, 65536) * h * (cfg.qk_nope_head_dim + cfg.v_head_dim) * elem
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    free = available_bytes(dev)
    if free is not None and need > 0.8 * free:
        raise PdlabValueError(
            "err_context_needs", n=longest, need=need / 2**30, heads=h, free=free / 2**30
        )


@contextlib.contextmanager
def progress_bar(what: str, lang: str = "en") -> Iterator[Callable[[int, int, str], None]]:
    """A ``progress(done, total, label)`` callback: a rich progress bar on stderr when
    stderr is a terminal (gone when done), nothing otherwise, so a pipe or a log file gets
    only the results. ``what`` and the labels are in ``lang`` already."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import Progress

    from pdlab.catalog import text

    err = Console(stderr=True)
    if not err.is_terminal:
        yield lambda done, total, label: None
        return
    with Progress(console=err, transient=True) as prog:
        task = prog.add_task(escape(what), total=None)

        def progress(done: int, total: int, label: str) -> None:
            description = escape(text(lang, "bench_progress", what=what, label=label))
            prog.update(task, completed=done, total=total, description=description)

        yield progress


def run(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from pdlab.catalog import text
    from pdlab.ui.console import make_console

    lang = getattr(args, "lang", None) or "en"
    console = make_console()
    if args.bench == "paths":
        from pdlab.tools.bench import bench_paths, render_paths_table, render_spec_table

        _check_paths_fit(args.preset, args.context, args.heads)
        with progress_bar(text(lang, "bench_what_paths"), lang) as progress:
            timing = {"repeats": args.repeats, "backend": args.backend, "progress": progress}
            k = args.num_speculative_tokens
            res = bench_paths(
                args.preset, args.context, args.heads, **timing, num_speculative_tokens=k, lang=lang
            )
        console.print(render_paths_table(res, lang))
        if "spec" in res:
            console.print(render_spec_table(res, lang))
    elif args.bench == "kernels":
        from pdlab.tools.bench_kernels import bench_kernels, render_table

        with progress_bar(text(lang, "bench_what_kernels"), lang) as progress:
            res = bench_kernels(quick=args.quick, progress=progress, lang=lang)
        console.print(render_table(res, lang))
    else:
        from pdlab.tools.bench_sched import bench_scheduler, summary

        res = bench_scheduler(num_requests=args.requests, steps=args.steps)
        console.print(escape(summary(res, lang)))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(res, indent=1, default=str))
        print(text(lang, "wrote", path=args.json))
    return 0
