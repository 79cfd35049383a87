"""The glossary's rule, shared by the tests that check Chinese text against it
(``tests/contracts/test_glossary.py`` states the rule and tests it; the views', the
errors', the help's and the exercises' tests apply it to what they print)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from pdlab.catalog import TEXT
from pdlab.tools import bilingual

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "glossary.md"
_CJK_CHARS = "\u4e00-\u9fff"
_CJK = re.compile(f"[{_CJK_CHARS}]")
# Chinese punctuation and brackets: a Latin word may touch these without a space.
_FENCE = re.compile(r"```.*?```", re.S)
_CODE = re.compile(
    r"`[^`\n]*`"  # inline code
    r"|\{[^{}\n]*\}"  # a placeholder
    r"|https?://\S+"  # a URL
    r"|'[^'\n]*'|\"[^\"\n]*\""  # a quoted string
    r"|(?<![\w-])--[\w-]+(?:[ =](?![\u4e00-\u9fff])[\w.,-]+)?"  # a flag and its value
    r"|\bpdlab(?: [a-z][\w-]*)+"  # a command line: pdlab exercises check
    r"|\b(?:pip|make)(?: [a-z][\w-]*)+"  # pip install triton, make env
    r"|\b[\w.-]+/[\w./-]+"  # a path
    r"|\b[\w-]+\.(?:md|py|ipynb|json|png|toml|txt|cpp|safetensors|org|com|io)\b"  # a file
    r"|(?<![\w.])\.(?:py|ipynb|json|md)\b"  # a file type: .py
    r"|\b\w+=\w+"  # a keyword argument: solution=True
    r"|\b(?:\w+\.)*\w*_\w*\b"  # an identifier with an underscore, with its owner: Scheduler._emit
    r"|\b[A-Za-z]\w*\[[^\]\n]*\]"  # an index: row[start:end]
    r"|\b[A-Za-z]\w*(?=\()"  # a call: lm_head(
    r"|\b[A-Za-z]\w*(?= = )"  # an assignment: replicated = ~is_prefilling
    r"|\b[a-z]+-\d+\b|\b[a-z]{2,}-[a-z]\b"  # request ids: req-0, dec-a
    r"|\b[\w-]+#\d+"  # an issue: vllm#28566
    r"|“[ -~]+”"  # a quotation of upstream's English
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+'-]*[A-Za-z0-9+]|[A-Za-z]")
_PYTHON = {"True", "False", "None", "not", "and", "or"}


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _split(cell: str) -> list[str]:
    return [x.strip() for x in cell.split(",") if x.strip()]


@functools.cache
def glossary() -> tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]:
    """``(english, (chinese renderings), (renderings not used))`` for every term, read
    once per process (the file does not change while the suite runs)."""
    rows = []
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        cells = _cells(line)
        if not line.startswith("|") or len(cells) != 3 or set(cells[0]) <= {"-"}:
            continue
        if cells[0] != "English":
            rows.append((cells[0], tuple(_split(cells[1])), tuple(_split(cells[2]))))
    return tuple(rows)


@functools.cache
def _kept_names() -> tuple[tuple[str, str], ...]:
    """The glossary's names kept in English (its two-column table): (name, what it is),
    read once per process."""
    out = {}
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        cells = _cells(line)
        if line.startswith("|") and len(cells) == 2 and not set(cells[0]) <= {"-"}:
            if cells[0] != "kept in English":
                for name in _split(cells[0]):
                    out[name] = cells[1]
    return tuple(out.items())


def kept_names() -> dict[str, str]:
    """The glossary's names kept in English: name -> what it is (a fresh dict each call)."""
    return dict(_kept_names())


def _is_name(word: str) -> bool:
    """A digit, an acronym or an inner capital (H200, MLA, FLOPs, DeepSeek-V3, vLLM), or
    one letter; a compound is a name when one of its parts is (deepseek-v3, split-KV)."""
    parts = word.split("-")
    if len(parts) > 1:
        return any(_is_name(p) for p in parts if p)
    return (
        len(word) == 1
        or bool(re.search(r"\d", word))
        or word.isupper()
        or bool(re.search(r".[A-Z]", word))
    )


@functools.cache
def _renderings() -> tuple[str, ...]:
    return tuple(sorted({t for _, terms, _ in glossary() for t in terms}, key=len, reverse=True))


@functools.cache
def _pattern(variant: str) -> re.Pattern[str]:
    if _CJK.search(variant):
        return re.compile(re.escape(variant).replace(r"\ ", r"\s*"))
    return re.compile(r"(?<![\w\-.])" + re.escape(variant) + r"(?![\w])", re.IGNORECASE)


def prose(text: str) -> str:
    """``text`` as a reader sees it: comment markers of a notebook cell dropped, wrapped
    lines joined (no space between two Chinese characters or after a path cut at a ``/``,
    one elsewhere)."""
    lines = [
        re.sub(r"^\s*# ?", "", ln) if ln.lstrip().startswith("#") else ln
        for ln in text.splitlines()
    ]
    out = ""
    for ln in lines:
        ln = ln.strip()
        if not ln:
            out += "\n"
            continue
        if out and not out.endswith("\n"):
            both = _CJK.match(out[-1]) and _CJK.match(ln[0])
            out += "" if both or out[-1] in "，。：；、（“/" else " "
        out += ln
    return out


def violations(text: str) -> list[str]:
    """Every break of the three rules in ``text``, each naming what to write instead."""
    plain = _CODE.sub(" ", _FENCE.sub(" ", prose(text)))
    found: list[str] = []
    rows = glossary()
    # 2. a rendering the glossary does not use (the term itself removed first, so 提示 is
    # found where 提示词 is not)
    rest = plain
    for t in _renderings():
        rest = _pattern(t).sub(" ", rest)
    for english, terms, variants in rows:
        for v in variants:
            # a variant that holds a rendering (解码行 holds 解码) is looked for where only
            # the renderings holding it (none, or 提示词 for 提示) are removed
            hit = _pattern(v).search(rest)
            if not hit and any(t in v for t in _renderings()):
                around = plain
                for t in _renderings():
                    if v in t and t != v:
                        around = _pattern(t).sub(" ", around)
                hit = _pattern(v).search(around)
            if hit:
                found.append(f"{v!r}: write {terms[0]!r} for {english!r}")
    # 1. an English word no rendering or name accounts for
    names = kept_names()
    heads = {e.split(" (")[0].lower(): terms[0] for e, terms, _ in rows}
    for line in rest.splitlines():
        if not _CJK.search(line):
            continue
        for m in _WORD.finditer(line):
            w = m.group(0)
            if _is_name(w) or w in names or w in _PYTHON:
                continue
            hint = heads.get(w.lower())
            found.append(
                f"{w!r}: English in Chinese prose; "
                + (f"the glossary renders it {hint!r}" if hint else "render it in the glossary")
            )
    # 3. typography (code replaced by a Latin placeholder, so its spacing still counts)
    typo = _CODE.sub("x", _FENCE.sub("x", re.sub("“[ -~]+”", "“”", prose(text))))
    for m in re.finditer(f"[{_CJK_CHARS}] +[{_CJK_CHARS}]", typo):
        found.append(f"{m.group(0)!r}: no space between Chinese characters")
    for m in re.finditer(f"[{_CJK_CHARS}][A-Za-z0-9]|[A-Za-z0-9][{_CJK_CHARS}]", typo):
        found.append(f"{m.group(0)!r}: a space between Chinese and Latin")
    return found


def chinese_texts() -> dict[str, str]:
    """Every Chinese text the project ships, by where it lives."""
    out = {f"text.py[{k!r}]": v["zh"] for k, v in TEXT.items()}
    for name, targets in bilingual.NOTEBOOKS.items():
        source = (ROOT / bilingual.source_path(name)).read_text(encoding="utf-8")
        _, cells = bilingual.split_cells(source)
        for i, (marker, body) in enumerate(cells):
            if marker.split()[-1:] == ["zh"]:
                out[f"{bilingual.source_path(name)} cell {i}"] = body
        _, cells = bilingual.split_cells((ROOT / targets["zh"]).read_text(encoding="utf-8"))
        for i, (marker, body) in enumerate(cells):
            if "[markdown]" in marker:
                out[f"{targets['zh']} cell {i}"] = body
    from pdlab.catalog import Help
    from pdlab.catalog import (
        help as text_help,  # every --help (its %(default)s and {values} as code)
    )

    for key, entry in text_help.TEXT_HELP.items():
        shown = re.sub(r"%\((\w+)\)[rs]|\{(\w+)\}", r"`\1\2`", entry["zh"])
        out[f"help.py[{key!r}]"] = shown.replace("%%", "%")
    listing = Help("help_gpu").listing(("cpu_mla", "flashmla"))
    out["help.py, the usage line and a choices list"] = (
        text_help.USAGE + "pdlab tour\n" + text_help.render(listing, "zh")
    )
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    zh = re.search(r"^## 中文.*?(?=^## |\Z)", readme, re.M | re.S)
    assert zh, "README.md has no Chinese section (a heading starting with '## 中文')"
    out["README.md, Chinese section"] = zh.group(0)
    for doc in sorted((ROOT / "docs").glob("*.md")):
        body = _FENCE.sub("", doc.read_text(encoding="utf-8"))
        lines = body.splitlines()
        if doc == GLOSSARY:  # the tables name the renderings; its prose is checked
            lines = [ln for ln in lines if not ln.startswith("|")]
        if doc.stem.endswith("_zh"):  # a Chinese doc: every line
            out[str(doc.relative_to(ROOT))] = "\n".join(lines)
        else:  # an English doc (or the glossary's prose): its Chinese parts
            out[str(doc.relative_to(ROOT))] = "\n".join(_chinese_part(ln) for ln in lines)
    return out


def _chinese_part(line: str) -> str:
    """A line of a doc as Chinese prose: whole where Chinese dominates it, else only its
    Chinese runs (the link label 中文版 in an English sentence)."""
    plain = _CODE.sub(" ", line)
    names = kept_names()
    words = [w for w in _WORD.findall(plain) if not (_is_name(w) or w in names or w in _PYTHON)]
    cjk, latin = len(_CJK.findall(plain)), sum(map(len, words))
    if cjk >= latin / 2:
        return line
    return " ".join(re.findall(f"[{_CJK_CHARS}，。：；、（）“”]+", line))


_LINE_START = re.compile(r"^[\s#>*|│┃-]*([，。？！；：、）》」』】])")


def line_start_punctuation(text: str) -> list[str]:
    """The lines of ``text`` (prose, a notebook cell, a rendered view) that start with
    closing CJK punctuation, after any comment, quote, list or table-border marks."""
    return [ln for ln in text.splitlines() if _LINE_START.match(ln)]
