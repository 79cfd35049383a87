"""The ``pdlab`` command (mirrors the role of ``vllm/entrypoints/cli``).

Subcommands: ``tour`` (the guided walkthrough), ``trace`` (any prompt, any settings, its step
table and trace), ``pd`` (prefill/decode disaggregation, in one process or two), ``bench``
(``paths``, ``kernels``, ``sched``), ``doctor`` (what works on this machine), ``notebooks``
(copy the shipped notebooks out) and ``lab`` (JupyterLab on them; ``pdlab/lab.py``). Bad
options exit with code 2 and a message naming the option.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any


def _int_list(text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of integers"
        ) from None
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected integers >= 1")
    return vals


def build_parser() -> argparse.ArgumentParser:
    from pdlab.config import PRESETS, ROUTING_RULES
    from pdlab.tour import positive_int

    p = argparse.ArgumentParser(
        prog="pdlab",
        description=(
            "Run the prefill/decode path of an LLM inference engine: paged KV cache, vLLM-v1 "
            "scheduler, MLA kernels, P/D disaggregation."
        ),
    )
    from pdlab import __version__

    p.add_argument("--version", action="version", version=f"pdlab {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # -- tour and trace (pdlab/tour.py) --
    from pdlab import tour

    tour.add_tour_arguments(
        sub.add_parser("tour", help="guided walkthrough: why D runs the last prompt token again")
    )
    tour.add_trace_arguments(
        sub.add_parser(
            "trace", help="run any prompt with any settings; print or save its step table"
        )
    )

    pd = sub.add_parser("pd", help="prefill/decode disaggregation: P and D in one process or two")
    pd.add_argument(
        "--procs",
        type=int,
        choices=(1, 2),
        default=2,
        help="1: both engines in this process; 2: two processes over torch.distributed (default)",
    )
    pd.add_argument(
        "--role",
        choices=("prefill", "decode"),
        help="run one side only (two machines): prefill holds the prompts",
    )
    pd.add_argument(
        "--prompt",
        action="append",
        dest="prompts",
        metavar="TEXT",
        help="a prompt (repeat for a batch)",
    )
    pd.add_argument("--max-tokens", type=positive_int, default=8)
    pd.add_argument("--rule", choices=ROUTING_RULES, default="query_len")
    pd.add_argument("--block-size", type=positive_int, default=4)
    pd.add_argument("--host", default="127.0.0.1")
    pd.add_argument("--port", type=int, default=0, help="0 picks a free port")
    pd.add_argument("--backend", choices=("torch", "triton"), default="torch")
    pd.add_argument("--timeout", type=float, default=120.0, help="seconds, for every wait")

    b = sub.add_parser("bench", help="measurements: paths, kernels, sched")
    bsub = b.add_subparsers(dest="bench", required=True, metavar="WHAT")
    bp = bsub.add_parser("paths", help="D's one-token step through both MLA paths")
    bp.add_argument("--preset", choices=sorted(PRESETS), default="deepseek-v3")
    bp.add_argument(
        "--context",
        type=_int_list,
        default=[1024, 4096, 16384],
        help="comma-separated context lengths (default 1024,4096,16384)",
    )
    bp.add_argument("--heads", type=positive_int, help="override the preset's head count")
    bp.add_argument("--repeats", type=positive_int, default=3)
    bp.add_argument("--backend", choices=("torch", "triton"))
    bk = bsub.add_parser("kernels", help="each kernel (GPU: GB/s and TFLOP/s vs peak)")
    bk.add_argument("--quick", action="store_true")
    bs = bsub.add_parser("sched", help="the scheduler's time per step")
    bs.add_argument("--requests", type=positive_int, default=256)
    bs.add_argument("--steps", type=positive_int, default=200)
    for x in (bp, bk, bs):
        x.add_argument("--json", type=Path, metavar="PATH", help="also write results as JSON")

    d = sub.add_parser("doctor", help="check what works on this machine")
    d.add_argument(
        "--aot", action="store_true", help="also compile every Triton kernel for sm_80 and sm_90"
    )

    nb = sub.add_parser(
        "notebooks", help="copy the notebooks into a folder (default ./pdlab-notebooks)"
    )
    nb.add_argument("dir", nargs="?", type=Path, default=Path("pdlab-notebooks"), metavar="DIR")
    nb.add_argument("--force", action="store_true", help="overwrite copies you have edited")
    lab = sub.add_parser("lab", help="open the notebooks in JupyterLab")
    lab.add_argument(
        "--dir",
        type=Path,
        help="serve this folder (the notebooks are copied in if missing); default: the "
        "checkout's notebooks/, or ./pdlab-notebooks",
    )
    lab.add_argument("--port", type=int, help="default: JupyterLab's (8888, or the next free)")
    lab.add_argument("--ip", help="address to listen on (default localhost; 0.0.0.0 for all)")
    lab.add_argument(
        "--notebook", metavar="NAME", help="open this one, e.g. 05 or 05_pd_decode_side"
    )
    lab.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    return p


def _notebooks(args: argparse.Namespace) -> int:
    from pdlab.lab import copy_notebooks

    paths = copy_notebooks(args.dir, force=args.force)
    for path in paths:
        print(path)
    print(f"{len(paths)} notebooks in {args.dir}; open them with: pdlab lab --dir {args.dir}")
    return 0


def _write_json(path: Path | None, data: Any) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1, default=str))
        print(f"wrote {path}")


def _bench(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from pdlab.ui.console import make_console

    console = make_console()
    if args.bench == "paths":
        from pdlab.bench import bench_paths, render_paths_table

        res = bench_paths(
            args.preset, args.context, args.heads, repeats=args.repeats, backend=args.backend
        )
        console.print(render_paths_table(res))
    elif args.bench == "kernels":
        from pdlab.kernels.bench import bench_kernels, render_table

        with Progress(console=console, transient=True) as prog:
            task = prog.add_task("kernels", total=None)

            def progress(done: int, total: int, label: str) -> None:
                prog.update(task, completed=done, total=total, description=label)

            res = bench_kernels(quick=args.quick, progress=progress)
        console.print(render_table(res))
    else:
        from pdlab.sched.bench import bench_scheduler

        res = bench_scheduler(num_requests=args.requests, steps=args.steps)
        console.print(
            f"scheduler, {res['num_requests']} running requests decoding: "
            f"median {res['median_us']:.0f} us per step "
            f"({res['us_per_request']:.2f} us per request), mean "
            f"{res['mean_us']:.0f} us over {res['steps']} steps"
        )
    _write_json(args.json, res)
    return 0


def _pd(args: argparse.Namespace) -> int:
    from pdlab.config import CacheConfig, ModelConfig, SchedulerConfig
    from pdlab.request import SamplingParams
    from pdlab.ui.console import render_pd_result

    prompts = args.prompts or [
        "Why does the decode instance run the last prompt token again?",
        "The KV cache holds keys and values, not hidden states.",
    ]
    ids = [list(p.encode("utf-8")) for p in prompts]
    if any(not i for i in ids):
        print("pdlab pd: error: --prompt must not be empty", file=sys.stderr)
        return 2
    cfg, cache = ModelConfig.tiny(), CacheConfig(block_size=args.block_size)
    sched = SchedulerConfig(rule=args.rule, kv_transfer_timeout_s=min(args.timeout, 30.0))
    sp = SamplingParams(max_tokens=args.max_tokens)
    if args.role is not None:
        from pdlab import pd_procs

        if args.port == 0:
            print(
                "pdlab pd: error: --role needs --port (the same on both machines)", file=sys.stderr
            )
            return 2
        if args.role == "prefill":
            s = pd_procs.run_prefill(
                ids,
                sp,
                cfg,
                cache,
                sched,
                args.host,
                args.port,
                args.backend,
                timeout_s=args.timeout,
            )
        else:
            s = pd_procs.run_decode(
                cfg, cache, sched, args.host, args.port, args.backend, timeout_s=args.timeout
            )
        print(
            json.dumps(
                {
                    "role": s.role,
                    "outputs": s.outputs,
                    "steps": s.steps,
                    "free_blocks": f"{s.num_free_blocks}/{s.num_blocks}",
                    "peer_failed": s.peer_failed,
                },
                indent=1,
            ),
            flush=True,
        )
        sys.stderr.flush()
        # Leave without interpreter teardown: the transport's receiver thread is blocked in
        # a gloo recv that teardown would abort ("terminate called ...").
        os._exit(0 if not s.peer_failed else 1)
    if args.procs == 1:
        from pdlab.pd import PDPair

        pair = PDPair(cfg, cache, sched, backend=args.backend)
        outs = pair.generate(ids, sp)
        outputs = {
            o.request_id: {"output_token_ids": o.output_token_ids, "text": o.text} for o in outs
        }
        return render_pd_result(pair.tracer, prompts, outputs, errors={})
    from pdlab.pd_procs import run_pd_procs

    res = run_pd_procs(
        ids, cfg, cache, sched, sp, args.host, args.port, args.backend, timeout_s=args.timeout
    )
    outputs = res.prefill.outputs if res.prefill else {}
    return render_pd_result(res.tracer, prompts, outputs, errors=res.errors)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "doctor":
            from pdlab import doctor

            return doctor.main(aot=args.aot)
        if args.command == "bench":
            return _bench(args)
        if args.command == "pd":
            return _pd(args)
        if args.command == "notebooks":
            return _notebooks(args)
        if args.command == "lab":
            from pdlab.lab import run_lab

            return run_lab(args.dir, args.port, args.ip, args.notebook, args.no_browser)
        from pdlab import tour

        if args.command == "tour":
            return tour.run_tour(args)
        return tour.run_trace(args)
    except ValueError as e:
        parser.exit(2, f"pdlab {args.command}: error: {e}\n")


if __name__ == "__main__":
    sys.exit(main())
