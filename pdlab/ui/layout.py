"""Layout for every console view: :class:`FitTable` (a table that reads whole at the width
it is printed at) and line breaking (:func:`words`, installed into rich on import).

Rich breaks a line only at spaces and folds a longer word at the edge, which splits
identifiers in Chinese text (no spaces: ``decode_thre|shold``) and strands a unit (``0`` /
``s``). Here a line may break between two CJK characters and between CJK and Latin text,
never inside a Latin word or identifier, never between a number and its unit, never before
closing CJK punctuation or after an opening one. It is rich's own word splitter replaced
(``rich._wrap.words``, which ``divide_line`` looks up at each call), so every view, table
cell and caption wraps the same way, in both languages.

vLLM has no equivalent; this is presentation only.
"""

from __future__ import annotations

import re
from typing import Any

from rich import _wrap

from pdlab.errors import either, invalid

# ---- line breaking ------------------------------------------------------------------------
_CJK = "\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
_OPEN = "（「『【《〈“‘［｛"  # never at a line's end
_CLOSE = "，。、；：？！）」』】》〉”’…］｝％"  # never at a line's start
_UNIT = r"(?:[kMGTPµmn]?(?:FLOPs?|B|s|Hz)|GB/s|TB/s|%|tokens?)"
_PLAIN = rf"[^\s{_CJK}{_OPEN}{_CLOSE}]"
_WORD = re.compile(
    rf"\s*[{_OPEN}]*"
    rf"(?:\d[\d.,]*\s{_UNIT}(?![A-Za-z0-9_]){_PLAIN}*"  # a number and its unit
    rf"|{_PLAIN}+"  # a Latin word, an identifier, a number
    rf"|[{_CJK}]"  # one CJK character
    rf"|\S)"
    rf"[{_CLOSE}]*\s*"
)


def words(text: str) -> Any:
    """``(start, end, word)`` for each unbreakable piece of ``text`` with the spaces after
    it, as ``rich._wrap.words`` yields them (see the module docstring for the rules)."""
    position = 0
    m = _WORD.match(text, position)
    while m is not None and m.end() > position:
        yield m.start(), m.end(), m.group(0)
        position = m.end()
        m = _WORD.match(text, position)


if hasattr(_wrap, "words"):  # rich breaks lines with words: divide_line looks it up
    _wrap.words = words


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
            raise invalid("stack", stack, either("'rows'", "'columns'"))
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
        column = {"header": header, "justify": justify, "short": short, "under": under}
        self.columns.append({**column, "means": means or header})

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
            caption_justify="left",  # a centred paragraph wraps raggedly
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

    def _stacked(self, width: int = 80) -> Any:
        from rich.cells import cell_len
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        parts: list[Any] = [f"[bold]{self.title}[/]"] if self.title else []
        heads = [c["header"] for c in self.columns]
        if self.stack == "rows":
            blocks = [(None, list(zip(heads, cells))) for cells, _ in self.rows]
        else:
            blocks = [
                (heads[j], [(cells[0], cells[j]) for cells, _ in self.rows])
                for j in range(1, len(heads))
            ]

        def cells(x: str) -> list[int]:
            return [Text.from_markup(line).cell_len for line in x.split("\n")]

        for head, pairs in blocks:
            # The values stay whole on their lines; the labels take what is left and wrap at
            # their spaces; with too little left even for that, each value goes under its
            # label. Padding: two cells at each edge and between the columns.
            value_w = max((w for _, v in pairs for w in cells(v)), default=0)
            label_w = max((w for k, _ in pairs for w in cells(k)), default=0)
            label_words = [w for k, _ in pairs for w in Text.from_markup(k).plain.split()]
            longest_word = max((cell_len(w) for w in label_words), default=0)
            room = width - value_w - 6
            grid = Table.grid(padding=(0, 2), pad_edge=True)
            if label_w <= room or longest_word <= room:
                fit = {"no_wrap": True} if label_w <= room else {"width": room}
                grid.add_column(style="bold" if self.stack == "rows" else None, **fit)
                grid.add_column(no_wrap=value_w <= width - 6, overflow="fold")
                for label, value in pairs:
                    grid.add_row(label, value)
            else:
                grid.add_column(overflow="fold")
                for label, value in pairs:
                    grid.add_row(f"[bold]{label}[/]" if self.stack == "rows" else label)
                    grid.add_row("  " + value.replace("\n", "\n  "))
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
        if not said:  # no header was shortened: nothing to explain
            return ""
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
                if short and src._legend():
                    yield src._legend()
                break
        else:
            yield self._stacked(width)
        yield from self.notes
