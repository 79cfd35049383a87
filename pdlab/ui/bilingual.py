"""One notebook source, two languages: notebooks 05 (English) and 06 (Chinese) are written
from ``notebooks/src/pd_decode_side.py``, 07 and 08 from ``notebooks/src/pd_designs.py``,
so their code cannot drift apart.

The source is a jupytext percent-format file whose markdown cells carry a language tag
(``# %% [markdown] en`` or ``# %% [markdown] zh``); code cells have no tag and are shared.
A line ``LANG = "en"`` in a code cell becomes ``LANG = "zh"`` in the Chinese notebook, so
widgets and helpers that take ``lang=`` show Chinese labels there. Writing the ``.py``
twins is all this module does; ``jupytext --sync`` (``make notebooks``) makes the ``.ipynb``.

vLLM has no equivalent; this is a documentation tool.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

LANGS = ("en", "zh")
# Each bilingual source and the notebook it renders to in each language.
NOTEBOOKS: dict[Path, dict[str, Path]] = {
    Path("notebooks/src/pd_decode_side.py"): {
        "en": Path("notebooks/05_pd_decode_side.py"),
        "zh": Path("notebooks/06_pd_decode_side_zh.py"),
    },
    Path("notebooks/src/pd_designs.py"): {
        "en": Path("notebooks/07_pd_designs.py"),
        "zh": Path("notebooks/08_pd_designs_zh.py"),
    },
}
SOURCE, TARGETS = next(iter(NOTEBOOKS.items()))  # notebooks 05 and 06
_CELL = re.compile(r"^# %%(.*)$", re.MULTILINE)
_TAG = re.compile(r"^\s*\[markdown\]\s+(en|zh)\s*$")


def split_cells(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The header before the first cell, then ``(marker line, body)`` for every cell."""
    marks = list(_CELL.finditer(text))
    if not marks:
        raise ValueError("the source has no '# %%' cell markers")
    cells = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        cells.append((m.group(0), text[m.end() : end]))
    return text[: marks[0].start()], cells


def render(text: str, lang: str) -> str:
    """The notebook source for ``lang``: that language's markdown cells, every code cell."""
    if lang not in LANGS:
        raise ValueError(f"lang={lang!r} is invalid: expected one of {LANGS}")
    header, cells = split_cells(text)
    out = [header]
    for marker, body in cells:
        tag = _TAG.match(marker[len("# %%") :])
        if tag is not None:
            if tag.group(1) != lang:
                continue
            marker = "# %% [markdown]"
        elif "[markdown]" in marker:
            raise ValueError(f"markdown cell without a language tag: {marker!r}")
        else:
            body = re.sub(r'^LANG = "en"(?=\s|$)', f'LANG = "{lang}"', body, flags=re.MULTILINE)
        out.append(marker + body)
    return "".join(out)


def write_all(root: Path = Path(".")) -> list[Path]:
    """Write every ``.py`` notebook from its source; returns the paths written."""
    written = []
    for source, targets in NOTEBOOKS.items():
        text = (root / source).read_text(encoding="utf-8")
        for lang, target in targets.items():
            path = root / target
            path.write_text(render(text, lang), encoding="utf-8")
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=Path("."), help="the repository root")
    args = p.parse_args(argv)
    for path in write_all(args.root):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
