"""``pdlab exercises``: list, start, check, hint, solution (``pdlab/exercises/``).

Progress is kept in the working folder (``.pdlab-exercises.json``): ``start N DIR`` and
``check N FILE`` use the folder of DIR or FILE, ``list``, ``hint`` and ``solution`` the
``--dir`` folder (default: the current one). ``check`` exits 1 when the submission fails.

``start`` keeps ``--lang`` in the folder's progress file, so a later command without it
speaks the learner's language.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pdlab.catalog import LANGS, Help


def add_arguments(sub: argparse._SubParsersAction) -> None:
    ex = sub.add_parser("exercises", help=Help("help_cmd_exercises"))
    ex.add_argument("--lang", choices=LANGS, help=Help("help_ex_lang"))
    ex.add_argument("--dir", type=Path, default=Path("."), help=Help("help_ex_dir"))
    acts = ex.add_subparsers(dest="action", required=True, metavar="ACTION")
    lst = acts.add_parser("list", help=Help("help_ex_list"))
    s = acts.add_parser("start", help=Help("help_ex_start"))
    s.add_argument("n", type=int, metavar="N")
    s.add_argument("folder", nargs="?", type=Path, metavar="DIR", help=Help("help_ex_start_dir"))
    s.add_argument("--force", action="store_true", help=Help("help_ex_force"))
    c = acts.add_parser("check", help=Help("help_ex_check"))
    c.add_argument("n", type=int, metavar="N")
    c.add_argument("file", nargs="?", type=Path, metavar="FILE")
    c.add_argument("--seed", type=int, help=Help("help_ex_seed"))
    h = acts.add_parser("hint", help=Help("help_ex_hint"))
    h.add_argument("n", type=int, metavar="N")
    so = acts.add_parser("solution", help=Help("help_ex_solution"))
    so.add_argument("n", type=int, metavar="N")
    so.add_argument("--yes", action="store_true", help=Help("help_ex_yes"))
    for action in (lst, s, c, h, so):  # after the action too (its own dest: a subparser's
        # default would overwrite the one given before the action)
        action.add_argument("--lang", dest="lang_after", choices=LANGS, help=Help("help_ex_lang"))


def _lang(args: argparse.Namespace, folder: Path) -> str:
    """The language asked for (after the action, or before it), else the folder's."""
    from pdlab.exercises import progress

    # A damaged file's one line is in English here: the language is not known yet.
    return args.lang_after or args.lang or progress.load(folder).lang or "en"


def run(args: argparse.Namespace) -> int:
    import pdlab.exercises as ex
    from pdlab.catalog import text
    from pdlab.exercises.loader import check_file

    lang = _lang(args, args.dir)
    if args.action == "list":
        return _list(args.dir, lang)
    if args.action == "start":
        folder = args.folder or args.dir
        lang = _lang(args, folder)
        try:
            path = ex.start(args.n, folder, lang, force=args.force)
        except FileExistsError as e:
            print(e)
            return 0
        function, typed = ex.get(args.n).function, ex.as_typed(path)
        print(text(lang, "ex_started_file", path=typed, function=function, n=args.n))
        return 0
    if args.action == "check":
        file = args.file or args.dir / ex.get(args.n).file_name
        lang = _lang(args, file.parent)
        check_file(file, lang, args.n)
        result = ex.check(args.n, file, lang, args.seed, folder=file.parent, quiet=True)
        _print(str(result))
        return 0 if result.passed else 1
    if args.action == "hint":
        _print(ex.hint(args.n, args.dir, lang))
        return 0
    ex.get(args.n)
    if not args.yes:
        sys.stdout.write(text(lang, "ex_confirm", n=args.n))
        sys.stdout.flush()
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes", "是"):
            print(text(lang, "ex_not_shown"))
            return 0
    print(text(lang, "ex_solution_of", n=args.n))
    print(ex.solution_text(args.n, lang))
    return 0


def _print(text: str) -> None:
    Console(highlight=False, soft_wrap=True).print(escape(text))


def _list(folder: Path, lang: str) -> int:
    import pdlab.exercises as ex
    from pdlab.catalog import text
    from pdlab.exercises import progress

    p = progress.load(folder, lang)
    t = Table(title=text(lang, "ex_list_title"))
    for key in ("ex_col_n", "ex_col_title", "ex_col_status", "ex_col_last", "ex_col_hints"):
        t.add_column(text(lang, key))
    items = ex.exercises()
    for e in items:
        status = (
            "passed" if e.number in p.passed else "started" if e.number in p.started else "todo"
        )
        last = {True: "last_pass", False: "last_fail", None: "todo"}[p.last_result(e.number)]
        hints = f"{p.hints_used(e.number)}/{len(e.hints[lang])}"
        words = (text(lang, f"ex_{status}"), text(lang, f"ex_{last}"))
        t.add_row(str(e.number), escape(e.title[lang]), *words, hints)
    console = Console(highlight=False, width=80)
    console.print(t)
    passed = len(set(p.passed) & {e.number for e in items})
    console.print(text(lang, "ex_progress_in", dir=folder, passed=passed, total=len(items)))
    return 0
