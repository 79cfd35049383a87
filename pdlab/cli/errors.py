"""How ``pdlab <command>`` reports an error: one line, in the reader's language.

A pdlab exception carries its catalog key (``pdlab/errors.py``), so its Chinese is rendered,
not translated. argparse's own messages come from the standard library (``Lib/argparse.py``,
Python 3.11 to 3.13), not from pdlab: the catalog holds their few shapes as ``err_ap_`` keys
(an unknown option, a bad choice, a missing value, ...), read back from argparse's English
with :func:`pdlab.errors.parse`; ``argument --x: ...`` around a message from one of pdlab's
own argument types (``pdlab/cli/args.py``) renders that message from its key. vLLM's CLI
has no counterpart: its errors are English only.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import NoReturn

from pdlab.catalog import text
from pdlab.errors import cli_message, error_text, keyed


def error_line(prog: str, e: BaseException | str, lang: str) -> str:
    """What ``pdlab <command>`` prints for an error, newline included: ``prog: error:
    message`` in English (one line, as it always was), the Chinese wrapped at 80 columns."""
    lang = "zh" if lang == "zh" else "en"  # a command without --lang has None
    message = cli_message(e, lang) if isinstance(e, BaseException) else error_text(e, lang)
    line = text(lang, "show_error_line", prog=prog, message=message)
    if lang != "zh":
        return line + "\n"
    from pdlab.ui.fmt import wrap_cells

    return "\n".join(wrap_cells(line)) + "\n"


def chinese_parser_errors(parsers: list[argparse.ArgumentParser]) -> None:
    """Make each parser's error (a bad option, a missing value, ...) print its usage line as
    argparse does (option names are identifiers), headed 用法： as the Chinese ``--help``
    heads it, and the error in Chinese."""
    for parser in parsers:
        parser.error = functools.partial(_parser_error, parser)  # type: ignore[method-assign]


def argparse_zh(message: str, error: BaseException | None = None) -> str:
    """argparse's ``message`` in Chinese. ``error`` is the exception being handled when
    argparse called ``error()``: an ``ArgumentError`` whose cause is one of pdlab's
    key-carrying argument type errors is rendered from its key."""
    own = keyed(error) if isinstance(error, argparse.ArgumentError) else None
    if own is not None and error.argument_name:  # type: ignore[union-attr]
        return text("zh", "err_ap_argument", opt=error.argument_name, rest=own.text("zh"))  # type: ignore[union-attr]
    head, sep, rest = message.partition(": ")
    if message.startswith("argument ") and sep:
        opt = head.removeprefix("argument ")
        return text("zh", "err_ap_argument", opt=opt, rest=error_text(rest, "zh"))
    return error_text(message, "zh")


def _parser_error(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    from pdlab.catalog.help import USAGE

    usage = parser.format_usage()  # argparse's "usage: " is as wide as 用法： (7 cells)
    sys.stderr.write(
        USAGE + usage.removeprefix("usage: ") if usage.startswith("usage: ") else usage
    )
    parser.exit(2, error_line(parser.prog, argparse_zh(message, sys.exc_info()[1]), "zh"))
