"""Exercise text cut to the terminal: :func:`reflow` writes a statement out at a width,
:func:`wrap80` cuts a verdict's lines to 80 columns (a Chinese character takes two). The
words themselves are the catalog's (``pdlab/catalog/exercises.py``)."""

from __future__ import annotations

from rich.cells import cell_len


def wrap80(text: str, width: int = 80) -> str:
    """Each line of ``text`` cut to ``width`` terminal columns (a Chinese character takes
    two), at a space where there is one, continued two columns in; lines of a table (box
    drawing) are left whole."""
    out = []
    for line in text.splitlines():
        if line.lstrip()[:1] in _BOX:
            out.append(line)
        else:
            out += _cut(line, width, "  ")
    return "\n".join(out)


def reflow(text: str, width: int = 80) -> str:
    """Paragraphs (separated by blank lines) and ``*`` items re-wrapped to ``width``
    columns: how a statement is written out, whatever its source lines' lengths."""
    out: list[str] = []
    for para in text.split("\n\n"):
        items: list[list[str]] = []
        for line in para.splitlines():
            if line.lstrip().startswith("* ") or not items:
                items.append([line.rstrip()])
            else:
                items[-1].append(line.strip())
        for item in items:
            joined = item[0]
            for piece in item[1:]:
                tight = _cjk(piece[:1]) or joined[-1:] in _CJK_PUNCT
                glue = "" if _cjk(joined[-1:]) and tight else " "
                joined += glue + piece
            lead = len(joined) - len(joined.lstrip())
            indent = " " * (lead + (2 if joined.lstrip().startswith("* ") else 0))
            out += _cut(joined, width, indent)
        out.append("")
    return "\n".join(out[:-1])


def _cut(line: str, width: int, indent: str) -> list[str]:
    out = []
    while cell_len(line) > width:
        cut, cells = 0, 0
        for i, ch in enumerate(line):
            cells += cell_len(ch)
            if cells > width:
                break
            cut = i + 1
        space = line.rfind(" ", len(indent) + 1, cut + 1)
        if space > width // 3 and not (_cjk(line[cut - 1 : cut]) and _cjk(line[cut : cut + 1])):
            cut = space
        out.append(line[:cut].rstrip())
        line = indent + line[cut:].lstrip()
    out.append(line)
    return out


_CJK_PUNCT = set("，。：；、（）“”？！")
_BOX = set("┏┃┡│└━┗┳╇┻┓┩┛")


def _cjk(s: str) -> bool:
    return any(cell_len(ch) == 2 for ch in s)
