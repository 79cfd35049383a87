"""Formatting for every view: numbers, tables (rich and HTML), and excerpts of the real source
(rich and notebook). The tour, the console views, the widgets and the notebooks all format
through here, so a number reads the same wherever it is shown.

vLLM has no equivalent; this is presentation only.
"""

from __future__ import annotations

import html
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any

from pdlab.tokenizer import printable

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
    :func:`pdlab.tokenizer.printable` shows it (a byte that is no character alone, ``\\xNN``)."""
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

    path: str  # the module as imported, e.g. pdlab/sched/scheduler.py
    qualname: str
    first_line: int  # line number of the first line shown
    text: str  # dedented
    marked: set[int]  # line numbers holding the mark

    @property
    def header(self) -> str:
        return f"# {self.path}, line {self.first_line}"


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
    return SourceExcerpt(
        path,
        getattr(obj, "__qualname__", str(obj)),
        first + lo,
        textwrap.dedent("".join(chunk)).rstrip("\n"),
        marked,
    )


def source_rich(ex: SourceExcerpt) -> Any:
    """The excerpt for a terminal: rich syntax with the file's line numbers."""
    from rich.syntax import Syntax

    return Syntax(
        ex.text,
        "python",
        line_numbers=True,
        start_line=ex.first_line,
        highlight_lines=ex.marked,
        theme="ansi_dark",
        background_color="default",
        word_wrap=True,
    )


def source_notebook(ex: SourceExcerpt) -> Any:
    """The excerpt for a notebook: highlighted code under a header naming file and line."""
    from IPython.display import Code

    return Code(f"{ex.header}\n{ex.text}\n", language="python")


def show_source(obj: Any, start: str | None = None, end: str | None = None) -> Any:
    """The real source of ``obj`` in a notebook (see :func:`source_excerpt`)."""
    return source_notebook(source_excerpt(obj, start, end))


# ---- tables that fit the terminal ----------------------------------------------------------
class FitTable:
    """A rich table that reads whole at the width it is printed at.

    Built like :class:`rich.table.Table` (``add_column``, ``add_row``), it picks its layout
    when rendered, from the width rich reports: the table with its full column headers;
    the same with the short headers given to ``add_column`` and a legend under it; the
    short headers without the outer border; and, where no table fits, a stacked layout
    (``stack="rows"``: one block of ``header  value`` lines per row; ``stack="columns"``,
    for a table whose first column labels its rows: one block per value column). A table
    layout counts as fitting only when every cell gets its whole width (headers may wrap at
    their spaces), so no value is cut or folded; a wider terminal shows more. ``notes`` are
    lines printed under the table in every layout."""

    def __init__(
        self,
        title: str | None = None,
        *,
        stack: str = "rows",
        legend: str = "",
        caption: str | None = None,
    ) -> None:
        if stack not in ("rows", "columns"):
            raise ValueError(f"stack={stack!r} is invalid: expected 'rows' or 'columns'")
        self.title, self.stack, self.legend, self.caption = title, stack, legend, caption
        self.columns: list[dict[str, Any]] = []
        self.rows: list[tuple[list[str], bool]] = []
        self.notes: list[str] = []

    def add_column(
        self,
        header: str,
        justify: str = "left",
        short: str | None = None,
        means: str = "",
        under: str | None = None,
    ) -> None:
        """A column; ``short`` is its narrow header, explained in the legend as ``means``
        (default: the full header). ``under`` names an earlier column (by header): when
        the short headers do not fit either, this column's cells go under that one's."""
        self.columns.append(
            {
                "header": header,
                "justify": justify,
                "short": short,
                "means": means or header,
                "under": under,
            }
        )

    def _merged(self) -> FitTable:
        """This table with every ``under`` column moved beneath its host column."""
        heads = [c["header"] for c in self.columns]
        host = {j: heads.index(c["under"]) for j, c in enumerate(self.columns) if c["under"]}
        out = FitTable(self.title, stack=self.stack, legend=self.legend, caption=self.caption)
        for j, c in enumerate(self.columns):
            if j in host:
                continue
            guests = [self.columns[g] for g, h in host.items() if h == j]
            label = "/".join(x["short"] or x["header"] for x in [c, *guests])
            out.add_column(c["header"], c["justify"], label if guests else c["short"], c["means"])
        for cells, end in self.rows:
            merged = [
                "\n".join([cells[j], *(cells[g] for g, h in host.items() if h == j)])
                for j in range(len(cells))
                if j not in host
            ]
            out.add_row(*merged, end_section=end)
        for c in self.columns:  # what the moved columns' short labels stand for
            if c["under"] and c["short"]:
                out.columns[-1].setdefault("extra", []).append((c["short"], c["means"]))
        out.notes = self.notes
        return out

    def add_row(self, *cells: str, end_section: bool = False) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"a row of {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(([str(c) for c in cells], end_section))

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def _table(self, short: bool, bare: bool) -> Any:
        from rich import box
        from rich.table import Table
        from rich.text import Text

        t = Table(
            title=self.title,
            caption=self.caption,
            box=box.SIMPLE_HEAD if bare else box.HEAVY_HEAD,
            show_edge=not bare,
            pad_edge=not bare,
            collapse_padding=bare,  # two cells between columns, the box's space included
        )
        for j, col in enumerate(self.columns):
            widths = [
                max((Text.from_markup(line).cell_len for line in r[j].split("\n")), default=0)
                for r, _ in self.rows
            ]
            t.add_column(
                (col["short"] or col["header"]) if short else col["header"],
                justify=col["justify"],
                min_width=max(widths, default=0) or None,
                overflow="fold",
            )
        for cells, end in self.rows:
            t.add_row(*cells, end_section=end)
        return t

    def _stacked(self) -> Any:
        from rich.console import Group
        from rich.table import Table

        parts: list[Any] = [f"[bold]{self.title}[/]"] if self.title else []
        heads = [c["header"] for c in self.columns]
        if self.stack == "rows":
            blocks = [(None, list(zip(heads, cells))) for cells, _ in self.rows]
        else:
            blocks = [
                (heads[j], [(cells[0], cells[j]) for cells, _ in self.rows])
                for j in range(1, len(heads))
            ]
        for head, pairs in blocks:
            grid = Table.grid(padding=(0, 2), pad_edge=True)
            grid.add_column(no_wrap=True, style="bold" if self.stack == "rows" else None)
            grid.add_column(overflow="fold")
            for label, value in pairs:
                grid.add_row(label, value)
            parts += ([f"[bold]{head}[/]"] if head else []) + [grid, ""]
        if self.caption:
            parts.append(self.caption)
        return Group(*parts)

    @staticmethod
    def _fit(table: Any, console: Any, options: Any, width: int) -> bool:
        """Give each column of ``table`` at least its cells' width (its ``min_width``) and
        share what is left among the headers that would wrap, fewest extra cells first;
        False when the cells alone are wider than ``width``. Done here because rich, short
        of room, narrows the widest columns first, whatever their minimum."""
        wide = options.update_width(10**4)
        ranges = [table._measure_column(console, wide, col) for col in table.columns]
        room = width - table._extra_width
        if sum(r.minimum for r in ranges) > room:
            return False
        if sum(r.maximum for r in ranges) > room:
            widths = [r.minimum for r in ranges]
            spare = room - sum(widths)
            for j in sorted(range(len(ranges)), key=lambda j: ranges[j].span):
                add = min(spare, ranges[j].maximum - widths[j])
                widths[j], spare = widths[j] + add, spare - add
            for j, col in enumerate(table.columns):
                col.width = widths[j] - table._get_padding_width(j)
        return True

    def _legend(self) -> str:
        said: dict[str, str] = {}
        for c in self.columns:  # the first column to use a short label says it
            for short, means in [(c["short"], c["means"]), *c.get("extra", [])]:
                if short and short != means and "/" not in short:
                    said.setdefault(short, means)
        return self.legend + ", ".join(f"{k} = {v}" for k, v in said.items())

    def __rich_console__(self, console: Any, options: Any) -> Any:
        width = options.max_width
        has_short = any(c["short"] for c in self.columns)
        merged = self._merged() if any(c["under"] for c in self.columns) else None
        layouts = [(self, False, False), (self, True, False), (self, True, True)]
        if merged is not None:
            layouts.append((merged, True, True))
        for src, short, bare in layouts:
            if short and not has_short and src is self:
                continue
            table = src._table(short, bare)
            if self._fit(table, console, options, width):
                yield table
                if short:
                    yield src._legend()
                break
        else:
            yield self._stacked()
        yield from self.notes
