"""``pdlab train``: train the tiny model on pdlab's own corpus and save a checkpoint.

The loop is :func:`pdlab.model.train.train` (the main model, then DeepSeek-V3's MTP layer
with the main model frozen; its greedy acceptance rates measured on the corpus and
printed); this command adds the progress bars (rich, on stderr), the loss curve (a PNG) and
the checkpoint (safetensors, DeepSeek parameter names,
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
    t.add_argument(
        "--mtp-steps",
        type=positive_int,
        default=d.mtp_steps,
        help="steps of the MTP layer (DeepSeek-V3's drafter), the main model frozen",
    )
    t.add_argument(
        "--main-from",
        type=Path,
        metavar="PATH",
        help="read the main model from this checkpoint (made with the same settings) and "
        "train only its MTP layer",
    )
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


def save_loss_plot(
    losses: list[float], path: Path, title: str, mtp_losses: list[float] | None = None
) -> Path:
    """The training loss per step, log scale, as a PNG (the MTP phase's beside it, counted
    from its own first step)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    if losses:
        ax.semilogy(range(1, len(losses) + 1), losses, lw=1, label="main model (token i + 1)")
    if mtp_losses:
        ax.semilogy(
            range(1, len(mtp_losses) + 1), mtp_losses, lw=1, label="MTP layer (token i + 2)"
        )
        ax.legend()
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
        mtp_steps=args.mtp_steps,
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
        TextColumn("[bold]{task.description}[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    if args.main_from is not None:
        out.print(escape(f"the main model from {args.main_from}, not trained"))
    out.print(f"then the MTP layer: {cfg.mtp_steps} steps, the main model frozen")
    tasks: dict[str, Any] = {}

    def reporter(name: str, steps: int) -> Any:
        every = max(1, steps // 10)  # without a terminal, a line each tenth of the run

        def on_step(i: int, loss: float) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(name, total=steps, loss="-")
            bar.update(tasks[name], advance=1, loss=f"{loss:.3f}")
            if not err.is_terminal and ((i + 1) % every == 0 or i + 1 == steps):
                err.print(f"{name} step {i + 1}/{steps} loss {loss:.3f}")

        return on_step

    with Progress(*columns, console=err, transient=not err.is_terminal) as bar:
        result = train(
            cfg,
            on_step=reporter("train", cfg.steps),
            on_mtp_step=reporter("mtp", cfg.mtp_steps),
            main_from=args.main_from,
        )
    meta = metadata(result, cfg)
    path = save_checkpoint(result.model, args.out, meta)
    save_loss_plot(
        result.losses,
        plot,
        f"pdlab train: tiny model, seed {cfg.seed}, {cfg.steps} steps of "
        f"{result.tokens_per_step} bytes",
        result.mtp_losses,
    )
    if result.losses:
        rate = cfg.steps * result.tokens_per_step / result.seconds
        out.print(f"trained in {result.seconds:.0f} s ({rate:,.0f} bytes/s)")
    out.print(
        f"loss {meta['final_loss']} nats/byte (the last {min(20, cfg.steps)} steps), "
        f"{meta['corpus_loss']} over the corpus"
    )
    if result.mtp_losses:
        a = [float(x) for x in meta["mtp_acceptance"].split(",")]  # as recorded
        out.print(f"MTP layer trained in {result.mtp_seconds:.0f} s (the main model frozen)")
        out.print(
            f"MTP loss {meta['mtp_final_loss']} on token i + 2 (the last "
            f"{min(20, cfg.mtp_steps)} steps), {meta['mtp_corpus_loss']} over the corpus"
        )
        out.print(
            f"MTP acceptance (greedy, every corpus prefix): first draft {a[0]:.1%}, "
            f"second {a[1]:.1%}"
        )
        out.print(
            f"mean acceptance length with the bonus token: {1 + a[0]:.2f} at K = 1, "
            f"{1 + a[0] + a[1]:.2f} at K = 2"
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
