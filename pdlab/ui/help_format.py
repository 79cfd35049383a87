"""The help formatter of every ``pdlab ... --help``, in both languages.

argparse's :mod:`textwrap` counts characters and breaks at hyphens (``tiny-trained.safetensors``
splits; Chinese runs past the terminal). :class:`HelpFormatter` breaks lines by
:func:`pdlab.ui.layout.words`, measured in terminal cells, a number kept with the word after
it; argparse's own layout is unchanged. vLLM's CLI uses argparse's formatter as it is.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

from rich.cells import cell_len

from pdlab.ui.layout import words

_SPACE = re.compile(r"[ \t\n\r\f\v]+")  # what argparse collapses (ASCII whitespace only)
_NUMBER = re.compile(r"[(（]?\d[\d.,]*\s*")  # a number alone: it goes with what follows


def _pieces(text: str) -> Iterator[str]:
    """The unbreakable pieces of ``text``, each with the spaces after it: ``words``'
    pieces, a bare number joined to the piece after it."""
    held = ""
    for _, _, piece in words(text):
        held += piece
        if not _NUMBER.fullmatch(piece):
            yield held
            held = ""
    if held:
        yield held


def _fold(piece: str, width: int) -> tuple[str, str]:
    """The most of ``piece`` that fits ``width`` cells, and the rest (only for a piece wider
    than a whole line, which has nowhere else to go)."""
    cut = 0
    while cut < len(piece) and cell_len(piece[: cut + 1]) <= width:
        cut += 1
    cut = max(cut, 1)
    return piece[:cut], piece[cut:]


def wrap(text: str, width: int) -> list[str]:
    """``text`` (whitespace collapsed) as lines of at most ``width`` cells, broken only
    between the pieces of :func:`_pieces`."""
    text = _SPACE.sub(" ", text).strip()
    width = max(width, 1)
    lines: list[str] = []
    line = ""
    for piece in _pieces(text):
        if line and cell_len(line + piece.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        if not line:
            piece = piece.lstrip()
            while cell_len(piece.rstrip()) > width:
                head, piece = _fold(piece, width)
                lines.append(head)
        line += piece
    if line.strip():
        lines.append(line.rstrip())
    return lines


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter with :func:`wrap` for the help texts and descriptions."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return wrap(text, width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(indent + ln for ln in wrap(text, width - cell_len(indent)))
