"""``pdlab train``: train the tiny model on pdlab's own corpus and save a checkpoint.

The loop is :func:`pdlab.model.train.train`; this command adds the progress bar (rich, on
stderr), the loss curve (a PNG) and the checkpoint (safetensors, DeepSeek parameter names,
the run's settings in its metadata). ``pdlab trace --weights PATH`` (and ``pd``, ``tour``)
then run it. The defaults reproduce the checkpoint pdlab ships
(``pdlab/model/tiny-trained.safetensors``) on a machine with the same torch and threads.
vLLM has no counterpart: it serves checkpoints and never trains one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pdlab.cli.args import check_output_path, positive_float, positive_int


def add_arguments(sub: Any) -> None:
    """``pdlab train`` on the parser's subparsers."""
    from pdlab.config.train import TrainConfig

    d = TrainConfig()
    t = sub.add_parser("train", help="train the tiny model on pdlab's own corpus (a few minutes)")
    t.add_argument("--steps", type=positive_int, default=d.steps)
    t.add_argument("--batch-size", type=positive_int, default=d.batch_size)
    t.add_argument("--seq-len", type=positive_int, default=d.seq_len, help="bytes per sequence")
    t.add_argument("--lr", type=positive_float, default=d.lr, help="peak learning rate")
    t.add_argument("--seed", type=int, default=d.seed, help="seeds the model and the batches")
    t.add_argument(
        "--threads",
        type=positive_int,
        default=1,
        help="torch threads (default 1: on a shared machine more threads wait on each other; "
        "the result can depend on the number)",
    )
    t.add_argument(
        "--out",
        type=Path,
        default=Path("tiny-trained.safetensors"),
        metavar="PATH",
        help="the checkpoint to write (default %(default)s)",
    )
    t.add_argument(
        "--plot",
        type=Path,
        metavar="PATH",
        help="the loss curve PNG (default: next to --out, ending -loss.png)",
    )


def save_loss_plot(losses: list[float], path: Path, title: str) -> Path:
    """The training loss per step, log scale, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.semilogy(range(1, len(losses) + 1), losses, lw=1)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per byte)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(args: argparse.Namespace) -> int:
    import torch
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from pdlab.config.train import TrainConfig
    from pdlab.model import corpus
    from pdlab.model.train import metadata, train
    from pdlab.model.weights import save_checkpoint
    from pdlab.tokenizer import ByteTokenizer, printable

    if args.seed < 0:
        raise ValueError(f"--seed {args.seed} is invalid: expected an integer >= 0")
    if not args.out.name.endswith(".safetensors"):
        raise ValueError(f"--out {args.out} is invalid: expected a path ending in .safetensors")
    plot = args.plot or args.out.with_name(args.out.name[: -len(".safetensors")] + "-loss.png")
    check_output_path("--out", args.out)
    check_output_path("--plot", plot)
    cfg = TrainConfig(
        steps=args.steps,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        lr=args.lr,
        warmup_steps=min(TrainConfig().warmup_steps, args.steps // 10),
        seed=args.seed,
    )
    torch.set_num_threads(args.threads)
    out = Console()
    err = Console(stderr=True)
    n = len(corpus.entries())
    threads = f"{args.threads} thread" + ("s" if args.threads > 1 else "")
    out.print(f"pdlab train: the tiny model on {n} corpus lines (English and Chinese)")
    out.print(
        f"{cfg.steps} steps of {cfg.batch_size} x {cfg.seq_len} bytes, seed {cfg.seed}, {threads}"
    )
    columns = (
        TextColumn("[bold]train[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    every = max(1, cfg.steps // 10)  # without a terminal, a line each tenth of the run

    def on_step(i: int, loss: float) -> None:
        bar.update(task, advance=1, loss=f"{loss:.3f}")
        if not err.is_terminal and ((i + 1) % every == 0 or i + 1 == cfg.steps):
            err.print(f"step {i + 1}/{cfg.steps} loss {loss:.3f}")

    with Progress(*columns, console=err, transient=not err.is_terminal) as bar:
        task = bar.add_task("train", total=cfg.steps, loss="-")
        result = train(cfg, on_step=on_step)
    meta = metadata(result, cfg)
    path = save_checkpoint(result.model, args.out, meta)
    save_loss_plot(
        result.losses,
        plot,
        f"pdlab train: tiny model, seed {cfg.seed}, {cfg.steps} steps of "
        f"{result.tokens_per_step} bytes",
    )
    rate = cfg.steps * result.tokens_per_step / result.seconds
    out.print(f"trained in {result.seconds:.0f} s ({rate:,.0f} bytes/s)")
    out.print(
        f"loss {meta['final_loss']} nats/byte (the last {min(20, cfg.steps)} steps), "
        f"{meta['corpus_loss']} over the corpus"
    )
    out.print(escape(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)"))
    out.print(escape(f"wrote {plot} (the loss curve)"))
    tok = ByteTokenizer()
    for prompt in corpus.DEFAULT_PROMPTS.values():
        ids = result.model.greedy_generate(tok.encode(prompt), 32)
        out.print(escape(f"{prompt!r} -> {printable(ids)}"))
    out.print(escape(f"run it: pdlab trace --weights {path}"))
    sys.stdout.flush()
    return 0
