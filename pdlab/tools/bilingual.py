"""One notebook source, two languages: every notebook is written in English and in Chinese
from one source in ``notebooks/src/`` (:data:`NOTEBOOKS`), so the two languages' code cannot
drift apart.

Each source is a jupytext percent-format file whose markdown cells carry a language tag
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

from pdlab.errors import Phrase, invalid

LANGS = ("en", "zh")
SOURCE_DIR = Path("notebooks/src")
# source name (notebooks/src/NAME.py) -> the notebook it renders to, per language
NOTEBOOKS: dict[str, dict[str, Path]] = {
    name: {"en": Path(f"notebooks/{en}.py"), "zh": Path(f"notebooks/{zh}.py")}
    for name, en, zh in (
        ("paged_kv_cache", "01_paged_kv_cache", "01_paged_kv_cache_zh"),
        ("scheduler", "02_scheduler", "02_scheduler_zh"),
        ("mla_two_forms", "03_mla_two_forms", "03_mla_two_forms_zh"),
        ("kernels", "04_kernels", "04_kernels_zh"),
        ("pd_decode_side", "05_pd_decode_side", "05_pd_decode_side_zh"),
        ("pd_designs", "07_pd_designs", "07_pd_designs_zh"),
    )
}


def source_path(name: str) -> Path:
    return SOURCE_DIR / f"{name}.py"


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
        raise invalid("lang", lang, Phrase("err_x_one_of", choices=LANGS))
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
    """Write every notebook's ``.py`` in both languages; returns the paths written."""
    written = []
    for name, targets in NOTEBOOKS.items():
        text = (root / source_path(name)).read_text(encoding="utf-8")
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
