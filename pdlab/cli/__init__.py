"""The ``pdlab`` command (mirrors the role of ``vllm/entrypoints/cli/main.py``).

Subcommands: ``tour`` (the guided walkthrough) and ``trace`` (any prompt, any settings, its
step table; both in ``pdlab/ui/tour.py``, their arguments in ``tour.py``), ``pd``
(prefill/decode disaggregation, in one process or two; ``pd.py``), ``sim`` (D's decode
batch as requests arrive, per first-token design and routing; ``sim.py``), ``bench``
(``paths``, ``kernels``, ``sched``; ``bench.py``), ``train`` (the tiny model on pdlab's own
corpus; ``train.py``), ``doctor`` (what works on this machine), ``notebooks`` (copy the
shipped notebooks out) and ``lab`` (JupyterLab on them; ``pdlab/tools/lab.py``). Argument
types and the shared options are in ``args.py``.
Bad options exit with code 2 and a message naming the option; so does every other error (a
bad environment variable, an unwritable output path, an allocation that fails, a peer that
never comes): one line ``pdlab <command>: error: ...``, never a traceback. ``--lang`` goes
anywhere on the line (before the command, after it, after an action such as ``exercises
check``): :func:`pull_lang` takes it out before argparse reads the rest, so every
subcommand, present and future, accepts it.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
import time
from collections.abc import Callable
from pathlib import Path

STARTED = time.monotonic()  # when the command began: pd's --timeout counts from here


def build_parser(lang: str = "en") -> argparse.ArgumentParser:
    """The ``pdlab`` parser, its help in ``lang``: catalog keys rendered when a help is printed
    (``pdlab/catalog/help.py``), wrapped by ``pdlab/ui/help_format.py``."""
    from pdlab.catalog import LANGS, Help

    p = argparse.ArgumentParser(prog="pdlab", description=Help("help_pdlab"))
    from pdlab import __version__

    version = f"pdlab {__version__}"
    p.add_argument("--version", action="version", version=version, help=Help("help_ap_version"))
    p.add_argument("--lang", choices=LANGS, help=Help("help_lang"))
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # -- tour and trace (pdlab/cli/tour.py; the commands in pdlab/ui/tour.py) --
    from pdlab.cli import tour

    tour.add_tour_arguments(sub.add_parser("tour", help=Help("help_cmd_tour")))
    tour.add_trace_arguments(sub.add_parser("trace", help=Help("help_cmd_trace")))

    from pdlab.cli import bench, exercises, pd, sim, train

    pd.add_arguments(sub)
    sim.add_arguments(sub)
    bench.add_arguments(sub)
    train.add_arguments(sub)
    exercises.add_arguments(sub)

    d = sub.add_parser("doctor", help=Help("help_cmd_doctor"))
    d.add_argument("--aot", action="store_true", help=Help("help_doctor_aot"))

    nb = sub.add_parser("notebooks", help=Help("help_cmd_notebooks"))
    nb.add_argument("dir", nargs="?", type=Path, default=Path("pdlab-notebooks"), metavar="DIR")
    nb.add_argument("--force", action="store_true", help=Help("help_notebooks_force"))
    lab = sub.add_parser("lab", help=Help("help_cmd_lab"))
    lab.add_argument("--dir", type=Path, help=Help("help_lab_dir"))
    lab.add_argument("--port", type=int, help=Help("help_lab_port"))
    lab.add_argument("--ip", help=Help("help_lab_ip"))
    lab.add_argument("--notebook", metavar="NAME", help=Help("help_lab_notebook"))
    lab.add_argument("--no-browser", action="store_true", help=Help("help_lab_no_browser"))
    for command in sub.choices.values():  # every command lists --lang in its --help
        if not any("--lang" in a.option_strings for a in command._actions):
            command.add_argument("--lang", choices=LANGS, default="en", help=Help("help_lang"))
    from pdlab.ui.help_format import HelpFormatter

    for parser in _parsers(p):
        parser.formatter_class = HelpFormatter
        for a in parser._actions:
            if isinstance(a, argparse._HelpAction):
                a.help = Help("help_ap_help")
        original = parser.format_help
        parser.format_help = functools.partial(_format_help, parser, original, lang)  # type: ignore[method-assign]
    _short_choices(p)
    return p


def _format_help(parser: argparse.ArgumentParser, original: Callable[[], str], lang: str) -> str:
    from pdlab.catalog.help import format_help

    return format_help(parser, original, lang)


def _parsers(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``p`` and every parser below it (subcommands, their actions)."""
    out = [p]
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for child in dict.fromkeys(a.choices.values()):
                out += _parsers(child)
    return out


def _short_choices(p: argparse.ArgumentParser, limit: int = 24) -> None:
    """An option whose ``{a,b,c}`` would be longer than ``limit`` shows a short metavar in
    the usage line (which argparse cannot wrap inside one option) and lists its choices in
    its help (unless its words name them all), so every ``--help`` fits 80 columns."""
    from pdlab.catalog import Help

    for parser in _parsers(p):
        for a in parser._actions:
            if not a.option_strings or a.choices is None or a.metavar is not None:
                continue
            names = tuple(str(c) for c in a.choices)
            if len("{" + ",".join(names) + "}") <= limit:
                continue
            a.metavar = a.dest.upper().replace("-", "_")
            a.help = (a.help or Help("")).listing(names)


def pull_lang(argv: list[str]) -> tuple[list[str], str | None]:
    """``argv`` without its ``--lang X`` / ``--lang=X`` (the last one wins), and ``X``.
    Nothing after ``--`` is touched; a ``--lang`` without a value is left for argparse."""
    rest: list[str] = []
    lang = None
    words = iter(argv)
    for a in words:
        if a == "--":
            rest += [a, *words]
        elif a.startswith("--lang="):
            lang = a.split("=", 1)[1]
        elif a == "--lang" and (value := next(words, None)) is not None:
            lang = value
        else:
            rest.append(a)
    return rest, lang


def _check_env(args: argparse.Namespace) -> None:
    """A bad ``PDLAB_BACKEND``, ``PDLAB_CHECK_INDICES`` or ``--backend`` (triton missing, or
    ``TRITON_INTERPRET`` off without a GPU) is one line before any work."""
    from pdlab.kernels import backend, checks

    backend.get_backend()
    checks.index_checks_enabled()
    if getattr(args, "backend", None) is not None:
        backend.check(args.backend, "flag")


def _import_torch_for_the_main_thread() -> None:
    """Import torch with SIGINT blocked: the threads it starts keep the block, so a Ctrl-C
    always reaches the main thread, even while ``pdlab/disagg/launch.py`` starts P and D
    with SIGINT ignored (an ignored signal that another thread took would be lost). One that
    comes during the import is raised right after it."""
    import signal
    import threading

    if "torch" in sys.modules or threading.current_thread() is not threading.main_thread():
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        import torch  # noqa: F401
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _runs_kernels(args: argparse.Namespace) -> bool:
    """False for a command that runs no model: the kernel settings do not matter to it,
    and it starts without torch (``pdlab sim`` imports it only to measure ``--gpu here``)."""
    if args.command == "sim":
        return False
    if args.command == "tour":
        from pdlab.ui.tour import tour_needs

        return "engine" in tour_needs(args)
    return True


def parse(argv: list[str] | None = None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """The parser and the arguments of ``argv`` (default ``sys.argv[1:]``), ``--lang``
    taken from wherever it stands."""
    from pdlab.catalog import LANGS

    argv, lang = pull_lang(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser("zh" if lang == "zh" else "en")  # its --help in that language
    if lang is not None and lang not in LANGS:
        command = next((a for a in argv if not a.startswith("-")), None)
        where = parser._subparsers._group_actions[0].choices.get(command, parser)
        where.error(f"argument --lang: invalid choice: {lang!r} (choose from 'en', 'zh')")
    if lang == "zh":  # argparse's errors in Chinese too
        from pdlab.cli.errors import chinese_parser_errors

        chinese_parser_errors(_parsers(parser))
    args = parser.parse_args(argv)
    if lang is not None:
        args.lang = lang
    return parser, args


def _interrupted(command: str, lang: str | None = "en") -> None:
    from pdlab.catalog import text

    sys.stderr.write(text("zh" if lang == "zh" else "en", "show_interrupted", prog=command) + "\n")
    sys.stderr.flush()
    sys.exit(130)


def main(argv: list[str] | None = None) -> int:
    try:  # Ctrl-C at any moment: one line, exit 130 (nothing heavy is imported before this)
        parser, args = parse(argv)
    except KeyboardInterrupt:
        _interrupted("pdlab")
    try:
        from pdlab.cli.args import check_outputs

        check_outputs(args)
        if args.command == "pd":
            from pdlab.cli import pd

            pd.before_imports(args)  # --role decode: P's port, within --timeout
        if args.command == "tour":
            from pdlab.ui import tour_sims

            tour_sims.before_imports(args)  # chapter 7's simulations, on another core
        if _runs_kernels(args):
            _import_torch_for_the_main_thread()
            if args.command != "doctor":
                _check_env(args)  # the doctor reports a bad variable as a FAIL line
        if args.command == "doctor":
            from pdlab.tools import doctor

            return doctor.main(aot=args.aot, lang=args.lang)
        if args.command in ("bench", "pd", "sim", "train", "exercises"):  # pdlab/cli/<command>.py
            return importlib.import_module(f"pdlab.cli.{args.command}").run(args)
        if args.command == "notebooks":
            from pdlab.catalog import text
            from pdlab.tools.lab import copy_notebooks

            paths = copy_notebooks(args.dir, force=args.force)
            for path in paths:
                print(path)
            print(text(args.lang, "nbs_copied", n=len(paths), dir=args.dir))
            return 0
        if args.command == "lab":
            from pdlab.tools.lab import run_lab

            return run_lab(
                args.dir, args.port, args.ip, args.notebook, args.no_browser, lang=args.lang
            )
        from pdlab.cli import tour

        return tour.run_tour(args) if args.command == "tour" else tour.run_trace(args)
    except KeyboardInterrupt:
        _interrupted(f"pdlab {args.command}", args.lang)
    except Exception as e:  # noqa: BLE001 - every error is one line, never a traceback
        from pdlab.cli.errors import error_line

        parser.exit(2, error_line(f"pdlab {args.command}", e, args.lang))
    finally:
        if args.command == "tour":
            from pdlab.ui import tour_sims

            tour_sims.close_started()  # grids started for a tour that never showed them
