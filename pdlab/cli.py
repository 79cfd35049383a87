"""The ``pdlab`` command (mirrors the role of ``vllm/entrypoints/cli``).

Subcommands: ``tour`` (the guided walkthrough), ``trace`` (any prompt, any settings, its step
table and trace), ``pd`` (prefill/decode disaggregation, in one process or two), ``bench``
(``paths``, ``kernels``, ``sched``), ``doctor`` (what works on this machine), ``notebooks``
(copy the shipped notebooks out) and ``lab`` (JupyterLab on them; ``pdlab/tools/lab.py``). Bad
options exit with code 2 and a message naming the option; so does every other error (a bad
environment variable, an unwritable output path, an allocation that fails, a peer that never
comes): one line ``pdlab <command>: error: ...``, never a traceback. Output paths are checked
before any work starts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
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


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number > 0")
    return v


def _port(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"{v} is not a port in [0, 65535]")
    return v


def build_parser() -> argparse.ArgumentParser:
    from pdlab.config import PRESETS
    from pdlab.ui.tour import add_routing_arguments, positive_int

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

    # -- tour and trace (pdlab/ui/tour.py) --
    from pdlab.ui import tour

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
    add_routing_arguments(pd)
    pd.add_argument("--block-size", type=positive_int, default=4)
    pd.add_argument("--host", default="127.0.0.1")
    pd.add_argument("--port", type=_port, default=0, help="0 picks a free port")
    pd.add_argument("--backend", choices=("torch", "triton"), default="torch")
    pd.add_argument(
        "--timeout", type=_positive_float, default=120.0, help="seconds, for every wait"
    )

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


def check_output_path(option: str, path: Path | None, is_dir: bool = False) -> None:
    """Raise ``ValueError`` unless ``path`` can be written (a file, or a directory to write
    files into): checked before the work, so a long run never ends in a failed save."""
    if path is None:
        return
    if path.exists():
        if is_dir and not path.is_dir():
            raise ValueError(f"{option} {path} is a file: expected a directory")
        if not is_dir and path.is_dir():
            raise ValueError(f"{option} {path} is a directory: expected a file path")
    base = path if is_dir else path.parent
    while not base.exists():  # the first folder that exists must take new entries
        base = base.parent
    if not base.is_dir():
        raise ValueError(f"{option} {path} is not writable: {base} is a file, not a directory")
    try:
        with tempfile.TemporaryFile(dir=base):
            pass
    except OSError as e:
        raise ValueError(f"{option} {path} is not writable: {e.strerror} in {base}") from None
    if path.exists() and not path.is_dir() and not os.access(path, os.W_OK):
        raise ValueError(f"{option} {path} is not writable: permission denied")


def _check_outputs(args: argparse.Namespace) -> None:
    check_output_path("--json", getattr(args, "json", None))
    check_output_path("--plots", getattr(args, "plots", None), is_dir=True)


def _check_env() -> None:
    """A bad ``PDLAB_BACKEND`` or ``PDLAB_CHECK_INDICES`` is one line before any work."""
    from pdlab.kernels import backend, checks

    backend.get_backend()
    checks.index_checks_enabled()


def _check_paths_fit(preset: str, contexts: list[int], heads: int | None) -> None:
    """``--context`` within the model's positions, and the prefill path's up-projected
    context (one chunk of at most 65536 tokens, per head K and V, about three copies)
    within free memory: the OS would grant more and then kill the process mid-run."""
    import torch

    from pdlab.config import ModelConfig
    from pdlab.input_processor import available_bytes

    cfg = ModelConfig.preset(preset)
    longest = max(contexts)
    if longest > cfg.max_position_embeddings:
        raise ValueError(
            f"--context {longest} is invalid: expected at most max_position_embeddings="
            f"{cfg.max_position_embeddings} of {preset}"
        )
    h = heads or cfg.num_attention_heads
    elem = 2 if torch.cuda.is_available() else 4
    need = 3 * min(longest, 65536) * h * (cfg.qk_nope_head_dim + cfg.v_head_dim) * elem
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    free = available_bytes(dev)
    if free is not None and need > 0.8 * free:
        raise ValueError(
            f"--context {longest} needs about {need / 2**30:.1f} GiB for the prefill path "
            f"with {h} heads and {free / 2**30:.1f} GiB is free: expected a shorter context "
            "or fewer --heads"
        )


def _notebooks(args: argparse.Namespace) -> int:
    from pdlab.tools.lab import copy_notebooks

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
        from pdlab.tools.bench import bench_paths, render_paths_table

        _check_paths_fit(args.preset, args.context, args.heads)
        res = bench_paths(
            args.preset, args.context, args.heads, repeats=args.repeats, backend=args.backend
        )
        console.print(render_paths_table(res))
    elif args.bench == "kernels":
        from pdlab.tools.bench_kernels import bench_kernels, render_table

        with Progress(console=console, transient=True) as prog:
            task = prog.add_task("kernels", total=None)

            def progress(done: int, total: int, label: str) -> None:
                prog.update(task, completed=done, total=total, description=label)

            res = bench_kernels(quick=args.quick, progress=progress)
        console.print(render_table(res))
    else:
        from pdlab.tools.bench_sched import bench_scheduler

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
    from pdlab.ui.tour import routing_configs

    sched = SchedulerConfig(kv_transfer_timeout_s=min(args.timeout, 30.0))
    routing = routing_configs(args)
    sp = SamplingParams(max_tokens=args.max_tokens)
    if args.role is not None:
        from pdlab.disagg import procs as pd_procs

        if args.port == 0:
            raise ValueError("--role needs --port (the same on both machines)")
        if args.procs is not None:
            raise ValueError("--procs does not go with --role (each command runs one side)")
        if args.role == "decode" and args.prompts:
            raise ValueError("--prompt goes to --role prefill, which holds the prompts")
        try:
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
                    engine_kwargs=routing,
                )
            else:
                s = pd_procs.run_decode(
                    cfg,
                    cache,
                    sched,
                    args.host,
                    args.port,
                    args.backend,
                    timeout_s=args.timeout,
                    engine_kwargs=routing,
                )
        except Exception as e:  # noqa: BLE001 - one line, then leave (see os._exit below)
            print(f"pdlab pd: error: {_one_line(e)}", file=sys.stderr, flush=True)
            os._exit(2)
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
        if s.peer_failed:
            peer = "decode" if args.role == "prefill" else "prefill"
            print(
                f"pdlab pd: error: the {peer} peer failed ({s.peer_failed}); this side "
                "stopped and freed its blocks",
                file=sys.stderr,
            )
        sys.stderr.flush()
        # Leave without interpreter teardown: the transport's receiver thread is blocked in
        # a gloo recv that teardown would abort ("terminate called ...").
        os._exit(0 if not s.peer_failed else 2)
    if args.procs == 1:
        from pdlab.disagg.pair import PDPair

        pair = PDPair(cfg, cache, sched, backend=args.backend, **routing)
        outs = pair.generate(ids, sp)
        outputs = {
            o.request_id: {"output_token_ids": o.output_token_ids, "text": o.text} for o in outs
        }
        return render_pd_result(pair.tracer, prompts, outputs, errors={})
    from pdlab.disagg.procs import run_pd_procs

    res = run_pd_procs(
        ids,
        cfg,
        cache,
        sched,
        sp,
        args.host,
        args.port,
        args.backend,
        timeout_s=args.timeout,
        **routing,
    )
    if res.errors:
        why = "; ".join(f"{role}: {err}" for role, err in sorted(res.errors.items()))
        for side in (res.prefill, res.decode):
            if side is not None and side.peer_failed:
                why += f"; {side.role} stopped and freed its blocks ({side.peer_failed})"
        raise ValueError(why)
    outputs = res.prefill.outputs if res.prefill else {}
    return render_pd_result(res.tracer, prompts, outputs, errors=res.errors)


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    if (isinstance(e, (ValueError, TypeError)) or getattr(e, "one_line", False)) and text:
        return text[0]
    return f"{text[0]} ({type(e).__name__})" if text else type(e).__name__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _check_outputs(args)
        if args.command != "doctor":  # the doctor reports a bad variable as a FAIL line
            _check_env()
        if args.command == "doctor":
            from pdlab.tools import doctor

            return doctor.main(aot=args.aot)
        if args.command == "bench":
            return _bench(args)
        if args.command == "pd":
            return _pd(args)
        if args.command == "notebooks":
            return _notebooks(args)
        if args.command == "lab":
            from pdlab.tools.lab import run_lab

            return run_lab(args.dir, args.port, args.ip, args.notebook, args.no_browser)
        from pdlab.ui import tour

        if args.command == "tour":
            return tour.run_tour(args)
        return tour.run_trace(args)
    except KeyboardInterrupt:
        parser.exit(130, f"pdlab {args.command}: interrupted\n")
    except Exception as e:  # noqa: BLE001 - every error is one line, never a traceback
        parser.exit(2, f"pdlab {args.command}: error: {_one_line(e)}\n")


if __name__ == "__main__":
    sys.exit(main())
