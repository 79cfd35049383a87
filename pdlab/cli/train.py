"""``pdlab train``: train the tiny model on pdlab's own corpus and save a checkpoint.

The loop is :func:`pdlab.tools.train.train` (the main model, then DeepSeek-V3's MTP layer
with the main model frozen; its greedy acceptance rates measured on the corpus and printed);
this command adds the progress bars (rich, on stderr), the loss curve (a PNG) and the
checkpoint (safetensors, DeepSeek parameter names, the run's settings in its metadata).
``pdlab trace --weights PATH`` (and ``pd``, ``tour``) then run it. Every line it prints, and
the loss curve, is in ``--lang`` (the words are in ``pdlab/catalog/bench.py``:
:func:`header_lines`, :func:`step_line` and :func:`summary_lines` build them); the
checkpoint's metadata is the same in both languages. The defaults reproduce the checkpoint
pdlab ships (``pdlab/engine/model_executor/tiny-trained.safetensors``) on a machine with the
same torch and threads. vLLM has no counterpart: it serves checkpoints and never trains one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pdlab.catalog import Help
from pdlab.cli.args import check_output_path, positive_float, positive_int, seed_int
from pdlab.errors import PdlabValueError, Phrase


def add_arguments(sub: Any) -> None:
    from pdlab.tools.train_config import TrainConfig

    d = TrainConfig()
    t = sub.add_parser("train", help=Help("help_cmd_train"))
    t.add_argument("--steps", type=positive_int, default=d.steps)
    t.add_argument("--batch-size", type=positive_int, default=d.batch_size)
    t.add_argument(
        "--seq-len", type=positive_int, default=d.seq_len, help=Help("help_train_seq_len")
    )
    t.add_argument("--lr", type=positive_float, default=d.lr, help=Help("help_train_lr"))
    t.add_argument(
        "--mtp-steps", type=positive_int, default=d.mtp_steps, help=Help("help_train_mtp_steps")
    )
    t.add_argument("--main-from", type=Path, metavar="PATH", help=Help("help_train_main_from"))
    t.add_argument("--seed", type=seed_int, default=d.seed, help=Help("help_train_seed"))
    t.add_argument("--threads", type=positive_int, default=1, help=Help("help_train_threads"))
    out = Path("tiny-trained.safetensors")
    t.add_argument("--out", type=Path, default=out, metavar="PATH", help=Help("help_train_out"))
    t.add_argument("--plot", type=Path, metavar="PATH", help=Help("help_train_plot"))


def save_loss_plot(result: Any, cfg: Any, path: Path, lang: str = "en") -> Path:
    """The training loss per step of ``result``, log scale, as a PNG (the MTP phase's beside
    it, counted from its own first step), labelled in ``lang`` (English where no installed
    font has Chinese glyphs: :func:`pdlab.ui.plots.lang_fonts`)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from pdlab.catalog import text
    from pdlab.ui.plots import lang_fonts

    with lang_fonts(lang) as lang:
        fig, ax = plt.subplots(figsize=(7, 3.6))
        for losses, key in ((result.losses, "tr_plot_main"), (result.mtp_losses, "tr_plot_mtp")):
            if losses:
                ax.semilogy(range(1, len(losses) + 1), losses, lw=1, label=text(lang, key))
        if result.mtp_losses:
            ax.legend()
        ax.set_xlabel(text(lang, "tr_plot_x"))
        ax.set_ylabel(text(lang, "tr_plot_y"))
        tokens = result.tokens_per_step
        title = text(lang, "tr_plot_title", seed=cfg.seed, steps=cfg.steps, tokens=tokens)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return path


def header_lines(
    n_lines: int, cfg: Any, threads: int, main_from: Path | None, lang: str = "en"
) -> list[str]:
    """What ``pdlab train`` prints before it starts (rich markup, escaped): the corpus, the
    steps, the main model's source and the MTP phase."""
    from rich.markup import escape

    from pdlab.catalog import text

    key = "tr_threads" if threads > 1 else "tr_thread"
    settings = dict(steps=cfg.steps, bs=cfg.batch_size, seq=cfg.seq_len, seed=cfg.seed)
    lines = [
        text(lang, "tr_head", n=n_lines),
        text(lang, "tr_settings", threads=text(lang, key, n=threads), **settings),
    ]
    if main_from is not None:
        lines.append(text(lang, "tr_main_from", path=main_from))
    lines.append(text(lang, "tr_then_mtp", steps=cfg.mtp_steps))
    return [escape(line) for line in lines]


def step_line(name: str, i: int, steps: int, loss: float, lang: str = "en") -> str:
    """The line a step prints where stderr is no terminal (plain text): ``name`` is the
    phase's name in ``lang`` already, ``i`` counts from 1."""
    from pdlab.catalog import text

    return text(lang, "tr_step", name=name, i=i, n=steps, loss=f"{loss:.3f}")


def summary_lines(
    result: Any,
    meta: dict[str, str],
    cfg: Any,
    checkpoint: Path,
    plot: Path,
    samples: list[tuple[str, str]],
    lang: str = "en",
) -> list[str]:
    """What ``pdlab train`` prints once trained (rich markup, escaped): the rates, the
    losses and acceptance as the checkpoint's metadata records them, the files written and
    each ``(prompt, completion)`` of ``samples``."""
    from rich.markup import escape

    from pdlab.catalog import text

    def loss(phase: str, steps: int) -> str:  # phase "" (the main model) or "mtp_"
        final, corpus = meta[f"{phase}final_loss"], meta[f"{phase}corpus_loss"]
        return text(lang, f"tr_{phase}loss", final=final, k=min(20, steps), corpus=corpus)

    lines = []
    if result.losses:
        rate = cfg.steps * result.tokens_per_step / result.seconds
        lines.append(text(lang, "tr_trained", s=f"{result.seconds:.0f}", rate=f"{rate:,.0f}"))
    lines.append(loss("", cfg.steps))
    if result.mtp_losses:
        a = [float(x) for x in meta["mtp_acceptance"].split(",")]  # as recorded
        lines += [
            text(lang, "tr_mtp_trained", s=f"{result.mtp_seconds:.0f}"),
            loss("mtp_", cfg.mtp_steps),
            text(lang, "tr_acceptance", a1=f"{a[0]:.1%}", a2=f"{a[1]:.1%}"),
            text(lang, "tr_length", k1=f"{1 + a[0]:.2f}", k2=f"{1 + a[0] + a[1]:.2f}"),
        ]
    mb = f"{checkpoint.stat().st_size / 1e6:.2f}"
    lines.append(text(lang, "tr_wrote_checkpoint", path=checkpoint, mb=mb))
    lines.append(text(lang, "tr_wrote_plot", path=plot))
    for prompt, completion in samples:
        lines.append(text(lang, "tr_sample", prompt=repr(prompt), completion=completion))
    lines.append(text(lang, "tr_run_it", path=checkpoint))
    return [escape(line) for line in lines]


def run(args: argparse.Namespace) -> int:
    import torch
    from rich import progress
    from rich.console import Console
    from rich.markup import escape

    from pdlab.catalog import text
    from pdlab.engine.model_executor.model_loader import save_checkpoint
    from pdlab.engine.tokenizer import ByteTokenizer, printable
    from pdlab.tools import corpus
    from pdlab.tools.train import metadata, train
    from pdlab.tools.train_config import TrainConfig

    lang = getattr(args, "lang", None) or "en"
    if not args.out.name.endswith(".safetensors"):
        allowed = Phrase("err_x_safetensors_path")
        raise PdlabValueError("err_option_invalid", option="--out", value=args.out, allowed=allowed)
    plot = args.plot or args.out.with_name(args.out.name[: -len(".safetensors")] + "-loss.png")
    check_output_path("--out", args.out)
    check_output_path("--plot", plot)
    same = ("steps", "batch_size", "seq_len", "lr", "seed", "mtp_steps")  # TrainConfig's names
    warmup = min(TrainConfig().warmup_steps, args.steps // 10)
    cfg = TrainConfig(**{name: getattr(args, name) for name in same}, warmup_steps=warmup)
    torch.set_num_threads(args.threads)
    out, err = Console(), Console(stderr=True)
    for line in header_lines(len(corpus.entries()), cfg, args.threads, args.main_from, lang):
        out.print(line)
    columns = (
        progress.TextColumn("[bold]{task.description}[/]"),
        progress.BarColumn(),
        progress.MofNCompleteColumn(),
        progress.TextColumn(escape(text(lang, "tr_loss_word")) + " {task.fields[loss]}"),
        progress.TimeElapsedColumn(),
        progress.TimeRemainingColumn(),
    )
    tasks: dict[str, Any] = {}

    def reporter(key: str, steps: int) -> Any:
        every = max(1, steps // 10)  # without a terminal, a line each tenth of the run
        name = text(lang, key)

        def on_step(i: int, loss: float) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(escape(name), total=steps, loss="-")
            bar.update(tasks[name], advance=1, loss=f"{loss:.3f}")
            if not err.is_terminal and ((i + 1) % every == 0 or i + 1 == steps):
                err.print(escape(step_line(name, i + 1, steps, loss, lang)))

        return on_step

    with progress.Progress(*columns, console=err, transient=not err.is_terminal) as bar:
        on_main = reporter("tr_task_main", cfg.steps)
        on_mtp = reporter("tr_task_mtp", cfg.mtp_steps)
        result = train(cfg, on_step=on_main, on_mtp_step=on_mtp, main_from=args.main_from)
    meta = metadata(result, cfg)
    path = save_checkpoint(result.model, args.out, meta)
    save_loss_plot(result, cfg, plot, lang)
    tok = ByteTokenizer()
    samples = [
        (prompt, printable(result.model.greedy_generate(tok.encode(prompt), 32)))
        for prompt in corpus.DEFAULT_PROMPTS.values()
    ]
    for line in summary_lines(result, meta, cfg, path, plot, samples, lang):
        out.print(line)
    sys.stdout.flush()
    return 0
