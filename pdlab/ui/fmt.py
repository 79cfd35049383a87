"""Formatting for every view: numbers, HTML tables and excerpts of the real source, so a number
reads the same wherever it is shown. :class:`FitTable` (:mod:`pdlab.ui.layout`) is importable
from here. vLLM has no equivalent; this is presentation only.
"""

from __future__ import annotations

import html
import inspect
import re
import textwrap
from dataclasses import dataclass
from typing import Any

from pdlab.engine.tokenizer import printable
from pdlab.ui.layout import FitTable  # noqa: F401 - re-exported: every view imports it here

# ---- numbers -----------------------------------------------------------------------------
_SI = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


def si(x: float, unit: str = "", digits: int = 3) -> str:
    """``x`` with an SI prefix and ``digits`` significant digits: ``si(3.4e10, "FLOP")`` is
    ``"34 GFLOP"``."""
    for prefix, scale in _SI:
        if abs(x) >= scale:
            return f"{x / scale:.{digits}g} {prefix}{unit}"
    return f"{x:.{digits}g} {unit}".rstrip()


def seconds(x: float, digits: int = 3) -> str:
    """A duration with the prefix people use for it: ``seconds(2.1e-5)`` is ``"21 µs"``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(x) >= scale:
            return f"{x / scale:.{digits}g} {unit}"
    return "0 s" if x == 0 else f"{x / 1e-9:.{digits}g} ns"


def flops(x: float) -> str:
    return si(x, "FLOP")


def nbytes(x: float) -> str:
    return si(x, "B")


def ratio(a: float, b: float) -> str:
    """``a / b`` as ``"120×"`` (two significant digits below 10)."""
    r = a / b if b else float("inf")
    return f"{r:.0f}×" if r >= 10 else f"{r:.2g}×"


def tokens(n: int) -> str:
    """A context length as people say it: ``4096`` is ``"4K"``."""
    return f"{n // 1024}K" if n and n % 1024 == 0 else str(n)


def token_char(i: int) -> str:
    """A byte-tokenizer id as a printable character: ``␣`` for a space, otherwise as
    :func:`pdlab.engine.tokenizer.printable` shows it (a byte that is no character alone,
    ``\\xNN``)."""
    return "␣" if i == 32 else printable([i], quote=False)


def span(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}–{hi}"


def elided(n: int, head: int, tail: int) -> list[int | None]:
    """Indices ``0..n-1``, with ``None`` standing for a run left out when ``n`` is long."""
    if n <= head + tail + 1:
        return list(range(n))
    return [*range(head), None, *range(n - tail, n)]


# ---- tables ------------------------------------------------------------------------------
_TABLE = "border-collapse:collapse;font-family:var(--jp-code-font-family,monospace);font-size:12px"
_CELL = "border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top;"
_NOWRAP = _CELL + "white-space:nowrap;"
_WRAP = _CELL + "white-space:pre-wrap;word-break:break-word;"


def esc(x: Any) -> str:
    return html.escape(str(x))


def html_table(headers: list[str], rows: list[list[Any]], raw: bool = False) -> str:
    """A small HTML table; cells are escaped unless ``raw``. The last column wraps."""
    cell = (lambda c: str(c)) if raw else esc
    styles = [_NOWRAP] * (len(headers) - 1) + [_WRAP]
    head = "".join(f"<th style='{st}'>{esc(h)}</th>" for st, h in zip(styles, headers))
    body = "".join(
        "<tr>" + "".join(f"<td style='{st}'>{cell(c)}</td>" for st, c in zip(styles, r)) + "</tr>"
        for r in rows
    )
    return f"<table style='{_TABLE}'><tr>{head}</tr>{body}</table>"


# ---- the real source ---------------------------------------------------------------------
@dataclass
class SourceExcerpt:
    """Lines of a function's real source, with where they live."""

    path: str  # the module as imported, e.g. pdlab/engine/core/sched/scheduler.py
    qualname: str
    first_line: int  # line number of the first line shown
    text: str  # dedented
    marked: set[int]  # line numbers holding the mark


def source_excerpt(
    obj: Any, start: str | None = None, end: str | None = None, mark: str | None = None
) -> SourceExcerpt:
    """The source of ``obj`` from the first line containing ``start`` through the first
    line after it containing ``end`` (the whole of it when they are None). Read from the
    package with ``inspect``, so what a reader sees cannot drift from what runs."""
    lines, first = inspect.getsourcelines(obj)
    lo, hi = 0, len(lines)
    if start is not None:
        found = next((i for i, s in enumerate(lines) if start in s), None)
        if found is None:
            raise ValueError(f"start={start!r} is not in the source of {obj!r}")
        lo = found
    if end is not None:
        found = next((i for i in range(lo, len(lines)) if end in lines[i]), None)
        if found is None:
            raise ValueError(f"end={end!r} is not in the source of {obj!r} after start")
        hi = found + 1
    chunk = lines[lo:hi]
    module = inspect.getmodule(obj)
    path = module.__name__.replace(".", "/") + ".py" if module else "?"
    marked = {first + lo + j for j, s in enumerate(chunk) if mark and mark in s}
    code = textwrap.dedent("".join(chunk)).rstrip("\n")
    return SourceExcerpt(path, getattr(obj, "__qualname__", str(obj)), first + lo, code, marked)


def source_rich(ex: SourceExcerpt) -> Any:
    """The excerpt for a terminal: rich syntax with the file's line numbers."""
    from rich.syntax import Syntax

    look = {"theme": "ansi_dark", "background_color": "default", "word_wrap": True}
    lines = {"line_numbers": True, "start_line": ex.first_line, "highlight_lines": ex.marked}
    return Syntax(ex.text, "python", **lines, **look)


def show_source(obj: Any, start: str | None = None, end: str | None = None) -> Any:
    """The real source of ``obj`` in a notebook (see :func:`source_excerpt`): highlighted
    code under a header naming file and line."""
    from IPython.display import Code

    ex = source_excerpt(obj, start, end)
    return Code(f"# {ex.path}, line {ex.first_line}\n{ex.text}\n", language="python")


# ---- tables that fit the terminal ----------------------------------------------------------


def wrap_cells(text: str, width: int = 80, indent: str = "  ") -> list[str]:
    """``text`` cut into lines of at most ``width`` terminal cells (a Chinese character is
    two), breaking where ``pdlab/ui/layout.py`` allows (never inside an identifier); lines
    after the first start with ``indent``."""
    import io

    from rich.console import Console
    from rich.text import Text

    console = Console(width=width, file=io.StringIO(), color_system=None)
    room = width - len(indent)
    text = re.sub(r"\S+", lambda m: _fold_path(m.group(0), room), text)
    lines = [t.plain.strip() for t in Text(text).wrap(console, room)]
    return [lines[0]] + [indent + line for line in lines[1:]] if lines else [""]


def _fold_path(word: str, room: int) -> str:
    """A path too long for one line, cut after a ``/`` into pieces that fit (a line break
    between them), so that it is never folded inside a name (``no/su`` ``ch``); any other
    word is returned as it is."""
    from rich.cells import cell_len

    if cell_len(word) <= room or "/" not in word:
        return word
    pieces, line = [], ""
    for part in re.split(r"(?<=/)", word):
        if line and cell_len(line + part) > room:
            pieces.append(line)
            line = ""
        line += part
    return "\n".join([*pieces, line])


def widget_error_html(e: BaseException, lang: str) -> str:
    """What a notebook widget shows for an exception its observer caught (an observer's
    exception is otherwise invisible): the traceback in English, as it always was; in
    Chinese the message in Chinese (``pdlab/errors.py``), and under it, for an error that
    is not a bad setting (a ``ValueError`` or ``TypeError``), the traceback to report."""
    import traceback

    from pdlab.catalog import text
    from pdlab.errors import builtin_name, error_text

    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    if lang != "zh":
        return f"<pre style='color:#b00'>{html.escape(tb)}</pre>"
    line = html.escape(
        text("zh", "show_error_kind", kind=builtin_name(e), message=error_text(e, "zh"))
    )
    if isinstance(e, (ValueError, TypeError)):
        return f"<pre style='color:#b00'>{line}</pre>"
    return (
        f"<pre style='color:#b00'>{line}</pre><details><summary>{text('zh', 'show_error_report')}"
        f"</summary><pre>{html.escape(tb)}</pre></details>"
    )
