"""``pdlab sim``: the step-level simulator of a decode instance (``pdlab/sim/``), every
routing against every first-token design by default, as a table; ``--plots DIR`` writes
the figures, ``--json PATH`` the numbers. A progress bar goes to stderr when it is a
terminal. vLLM has no counterpart.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pdlab.catalog import LANGS, Help
from pdlab.cli.args import number, positive_float, positive_int, seed_int
from pdlab.errors import PdlabValueError, Phrase, os_reason

GPU_CHOICES = ("H100", "H800", "H200", "B200", "here")


def _nonnegative_float(text: str) -> float:
    ok = lambda v: 0 <= v < float("inf")
    return number(text, float, ok, Phrase("err_x_num_ge", n=0), "err_value_invalid")


def _duration(text: str) -> float:
    from pdlab.sim.simulator import MAX_SIM_DURATION_S as top

    return number(text, float, lambda v: 0 < v <= top, Phrase("err_x_num_gt_le", a=0, b=f"{top:g}"))


def _gpu(text: str) -> str:
    """A GPU name in any case (``h200``), as the other commands take it."""
    return next((name for name in GPU_CHOICES if name.lower() == text.lower()), text)


def _speculative_tokens(text: str) -> int:
    ok = lambda v: 0 <= v <= 16
    return number(text, int, ok, Phrase("err_x_int_to", a=0, b=16), "err_value_invalid")


def _num_gpus(text: str) -> int:
    from pdlab.sim.costs import MAX_GPUS as top

    ok = lambda v: 1 <= v <= top
    return number(text, int, ok, Phrase("err_x_int_to", a=1, b=top), "err_value_invalid")


def _rate(text: str) -> float:
    ok = lambda v: 0 <= v <= 1
    return number(text, float, ok, Phrase("err_x_num_range", a=0, b=1), "err_value_invalid")


def add_arguments(sub: Any) -> None:
    from pdlab.engine.distributed.kv_transfer.base import FIRST_TOKEN_MODES as MODES
    from pdlab.sim import DISTRIBUTIONS, ROUTINGS

    s = sub.add_parser("sim", help=Help("help_cmd_sim"))
    s.add_argument(
        "--gpu", type=_gpu, choices=GPU_CHOICES, default="H200", help=Help("help_sim_gpu")
    )
    s.add_argument("--design", choices=(*MODES, "all"), default="all")
    s.add_argument("--routing", choices=(*ROUTINGS, "all"), default="all")
    s.add_argument("--batch-size", type=positive_int, default=64, help=Help("help_sim_batch_size"))
    s.add_argument("--context", type=positive_int, default=4096, help=Help("help_sim_context"))
    s.add_argument("--rate", type=_nonnegative_float, default=20.0, help=Help("help_sim_rate"))
    s.add_argument(
        "--prompt-len", type=positive_int, default=4096, help=Help("help_sim_prompt_len")
    )
    s.add_argument("--prompt-dist", choices=DISTRIBUTIONS, default="fixed")
    s.add_argument("--output-len", type=positive_int, default=64, help=Help("help_sim_output_len"))
    s.add_argument("--duration", type=_duration, default=5.0, help=Help("help_sim_duration"))
    s.add_argument(
        "--num-speculative-tokens",
        type=_speculative_tokens,
        default=0,
        metavar="K",
        help=Help("help_sim_num_spec"),
    )
    s.add_argument("--acceptance-rate", type=_rate, help=Help("help_sim_acceptance"))
    s.add_argument(
        "--kv-cache-dtype", choices=("auto", "fp8"), default="auto", help=Help("help_sim_kv_dtype")
    )
    s.add_argument("--num-gpus", type=_num_gpus, default=144, help=Help("help_sim_num_gpus"))
    s.add_argument(
        "--weight-dtype", choices=("fp8", "bf16"), default="fp8", help=Help("help_sim_weight_dtype")
    )
    s.add_argument("--seed", type=seed_int, default=0)
    s.add_argument(
        "--launch-us", type=_nonnegative_float, default=5.0, help=Help("help_sim_launch_us")
    )
    s.add_argument("--link-gbps", type=positive_float, default=50.0, help=Help("help_sim_link"))
    s.add_argument("--lang", choices=LANGS, default="en", help=Help("help_lang"))
    s.add_argument("--plots", type=Path, metavar="DIR", help=Help("help_sim_plots"))
    s.add_argument("--json", type=Path, metavar="PATH", help=Help("help_sim_json"))


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from pdlab.catalog import text
    from pdlab.disagg.designs import MODES
    from pdlab.engine.config import ModelConfig
    from pdlab.sim import ROUTINGS
    from pdlab.sim.profiles import device_profile
    from pdlab.sim.report import run_grid
    from pdlab.sim.simulator import (
        MTP_ACCEPTANCE_RATE,
        SimConfig,
        arrival_rate_allowed,
        max_arrival_rate,
    )
    from pdlab.ui.console import make_console
    from pdlab.ui.sim_report import sim_table, write_plots

    if args.acceptance_rate is not None and not args.num_speculative_tokens:
        raise PdlabValueError(
            "err_option_without",
            option="--acceptance-rate",
            value=f"{args.acceptance_rate:g}",
            needed="--num-speculative-tokens",
        )
    top = max_arrival_rate(args.duration)
    if args.rate > top:  # the arrivals the run would step through
        allowed = arrival_rate_allowed(top, f"--duration {args.duration:g}")
        raise PdlabValueError(
            "err_option_invalid", option="--rate", value=f"{args.rate:g}", allowed=allowed
        )
    acceptance = MTP_ACCEPTANCE_RATE if args.acceptance_rate is None else args.acceptance_rate
    same = ("batch_size", "context", "prompt_len", "prompt_dist", "output_len", "seed")
    same += ("num_speculative_tokens", "kv_cache_dtype", "num_gpus", "weight_dtype")
    given = {name: getattr(args, name) for name in same}  # options named as SimConfig's fields
    timing = {"arrival_rate": args.rate, "duration_s": args.duration}
    base = SimConfig(**given, **timing, acceptance_rate=acceptance)
    profile = device_profile(
        args.gpu, link_bytes_per_s=args.link_gbps * 1e9, launch_overhead_s=args.launch_us * 1e-6
    )
    designs = MODES if args.design == "all" else (args.design,)
    routings = ROUTINGS if args.routing == "all" else (args.routing,)
    model = ModelConfig.deepseek_v3()
    gpu = args.gpu.lower() if args.gpu != "here" else "h200"
    if sys.stderr.isatty():
        with Progress(transient=True, console=Console(stderr=True)) as bar:
            task = bar.add_task("simulating", total=len(designs) * len(routings))

            def tick(i: int, n: int, t: float) -> None:
                bar.update(task, completed=i + min(t / base.duration_s, 1.0))

            rows, runs = run_grid(base, model, profile, gpu, designs, routings, tick)
    else:
        rows, runs = run_grid(base, model, profile, gpu, designs, routings)
    console = make_console()
    console.print(sim_table(rows, profile, args.lang))
    if not any(r["arrivals"] for r in rows):  # the TTFT columns show 0 for "nothing to time"
        console.print(text(args.lang, "sim_no_arrivals", s=args.duration, rate=args.rate))
    if args.plots is not None:
        for p in write_plots(rows, runs, args.plots):
            print(p)
    if args.json is not None:
        data = json.dumps({"profile": profile.__dict__, "rows": rows}, indent=1) + "\n"
        try:
            args.json.write_text(data)
        except OSError as e:  # a full disk, a device that refuses: the option and the path
            raise PdlabValueError(
                "err_not_writable", option="--json", path=args.json, why=os_reason(e)
            ) from None
    return 0
