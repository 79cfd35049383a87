"""Every ``pdlab ... --help``: Chinese under ``--lang zh`` (``pdlab/catalog/help.py``), and
wrapped so that it fits the terminal and never splits an identifier, in both languages
(``pdlab/ui/help_format.py``).

The parsers are read off :func:`pdlab.cli.build_parser` itself (the top level, every
subcommand, every action below it), so a new option or subcommand is checked the day it is
added (that each help is a catalog key with its Chinese is
``tests/contracts/test_help_keys.py``'s). Each help is rendered
with ``format_help()`` at 80 and 120 columns (``COLUMNS``, which argparse reads) and
compared with the same help unwrapped (a very wide terminal): every run of Latin text
(identifiers, paths, file names, flags, numbers) must come out whole, every number stay
on the line of the word after it, and every line fit by display cells (a CJK character is
two). The Chinese must pass the glossary's rule (``tests/contracts/test_glossary.py``) and hold none
of argparse's English words.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import subprocess
import sys
from collections import Counter

import pytest
from glossary_rule import violations
from rich.cells import cell_len

from pdlab.catalog import help as text_help
from pdlab.catalog import text
from pdlab.cli import _parsers, build_parser

WIDTHS = (80, 120)
UNWRAPPED = 100_000  # COLUMNS wide enough that argparse wraps nothing
# A run of Latin text: what no line break may fall inside (CJK and its punctuation, and
# spaces, are where breaks go).
_LATIN = re.compile(
    r"[^\s\u2e80-\u2fff\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]+"
)
# A number and the word after it ("400 Gb/s", "5 秒", "0 to 16"): they share a line.
_NUMBER_WORD = re.compile(r"(?<![\w.,])\d[\d.,]* (?:[A-Za-z%]|[\u4e00-\u9fff])")
ENGLISH_WORDS = (
    "usage:",
    "positional arguments",
    "options:",
    "show this help message",
    "show program's version",
    "one of:",
)
_EN_ONE_OF = re.compile(r"(?:^|; )one of: [^;]*$")
_ZH_ONE_OF = re.compile(rf"(?:^|；){text('zh', 'help_one_of', names='')}.*$")


@functools.cache
def parsers(lang: str) -> tuple[argparse.ArgumentParser, ...]:
    """Every parser, its help texts rendered in ``lang`` (as printing a help does)."""
    ps = tuple(_parsers(build_parser(lang)))
    for p in ps:
        text_help.words(p, lang)
    return ps


def render(parser: argparse.ArgumentParser, columns: int) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        return parser.format_help()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def split_runs(wrapped: str, unwrapped: str) -> list[str]:
    """What the wrapping broke: the runs of Latin text of ``unwrapped`` missing from
    ``wrapped``, and the number-and-word pairs it put on two lines."""
    lost = Counter(_LATIN.findall(unwrapped)) - Counter(_LATIN.findall(wrapped))
    pairs = Counter(_NUMBER_WORD.findall(unwrapped)) - Counter(_NUMBER_WORD.findall(wrapped))
    return sorted(lost.elements()) + [f"number parted from its word: {p!r}" for p in pairs]


def too_wide(text: str, columns: int) -> list[str]:
    return [f"{cell_len(ln)} cells: {ln!r}" for ln in text.splitlines() if cell_len(ln) > columns]


def prose_of(help_text: str) -> str:
    """A rendered help as prose: the usage block dropped, and each line's left column
    (option names, metavars, choices, subcommand names: identifiers, as argparse prints
    them) taken off; headings, descriptions and help texts stay, as wrapped."""
    out, in_usage = [], True
    for line in help_text.splitlines():
        if in_usage:
            in_usage = bool(line.strip())
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent in (2, 4):  # an option or a subcommand, then its help after two spaces
            rest = re.split(r" {2,}", line.strip(), maxsplit=1)
            line = rest[1] if len(rest) > 1 else ""
        out.append(line)
    return "\n".join(out)


def _progs(lang: str) -> list[str]:
    return [p.prog for p in parsers(lang)]


def test_every_parser_is_reached() -> None:
    progs = _progs("en")
    assert len(progs) >= 19 and progs == _progs("zh")
    for prog in ("pdlab", "pdlab tour", "pdlab bench paths", "pdlab exercises check"):
        assert prog in progs


def test_under_zh_every_help_text_is_chinese_and_lists_its_choices_in_chinese() -> None:
    listed = 0
    for p in parsers("zh"):
        for s in text_help.help_strings(p):
            assert re.search("[\u4e00-\u9fff]", s), (p.prog, s)
            assert not _EN_ONE_OF.search(s), (p.prog, s)
            listed += bool(_ZH_ONE_OF.search(s))
    assert listed >= 5  # --gpu, --mla-backend, sim's --design, --routing, --prompt-dist


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("lang", ("en", "zh"))
def test_every_help_fits_and_splits_nothing(lang: str, columns: int) -> None:
    bad = []
    for p in parsers(lang):
        wrapped = render(p, columns)
        bad += [f"{p.prog}: {x}" for x in too_wide(wrapped, columns)]
        bad += [f"{p.prog}: split {x!r}" for x in split_runs(wrapped, render(p, UNWRAPPED))]
    assert bad == [], "\n".join(bad)


def test_the_checks_fail_on_argparse_s_own_wrapping() -> None:
    """argparse's formatter (textwrap) splits ``tiny-trained.safetensors`` at its hyphen at
    80 columns, and counts a CJK character as one column: both are caught."""
    train = next(p for p in parsers("en") if p.prog == "pdlab train")
    plain = argparse.HelpFormatter
    old = train.formatter_class
    train.formatter_class = plain
    try:
        broken = split_runs(render(train, 80), render(train, UNWRAPPED))
    finally:
        train.formatter_class = old
    assert broken == ["tiny-trained.safetensors)"]
    zh = next(p for p in parsers("zh") if p.prog == "pdlab tour")
    zh.formatter_class = plain
    try:
        assert too_wide(render(zh, 80), 80)
    finally:
        zh.formatter_class = old


def test_the_wrapping_keeps_numbers_with_their_words() -> None:
    from pdlab.ui.help_format import wrap

    text = "P->D link, GB/s (default 50: one 400 Gb/s port per GPU), 模拟 5 秒，默认 0 到 16"
    for width in range(12, 40):
        lines = wrap(text, width)
        assert all(cell_len(ln) <= width for ln in lines), (width, lines)
        joined = "\n".join(lines)
        for pair in ("400 Gb/s", "5 秒", "0 到", "P->D"):
            assert pair in joined, (width, lines)


@pytest.mark.parametrize("columns", WIDTHS)
def test_the_chinese_help_is_chinese(columns: int) -> None:
    bad = []
    for p in parsers("zh"):
        text = render(p, columns)
        assert text.startswith(f"{text_help.USAGE}{p.prog}"), text
        bad += [f"{p.prog}: {w!r}" for w in ENGLISH_WORDS if w in text]
        bad += [f"{p.prog}: {v}" for v in violations(prose_of(text))]
    assert bad == [], "\n".join(bad)


def test_the_english_help_keeps_argparse_s_words() -> None:
    for p in parsers("en"):
        text = render(p, 80)
        assert text.startswith(f"usage: {p.prog}") and "options:" in text
        assert not re.search("[\u4e00-\u9fff]", text), p.prog
    top = render(parsers("en")[0], 80)
    assert "en or zh (Simplified Chinese), anywhere on the line" in top


def test_every_command_lists_lang_and_none_says_english_only() -> None:
    for lang in ("en", "zh"):
        for p in parsers(lang)[1:]:
            text = render(p, 120)
            if p.prog.count(" ") > 1 and not p.prog.startswith("pdlab exercises "):
                continue  # bench's actions: --lang goes before them (or anywhere)
            assert "--lang {en,zh}" in text, p.prog
            assert "English only" not in text, p.prog


def test_pdlab_lang_zh_help_from_the_shell() -> None:
    env = {**os.environ, "COLUMNS": "80"}
    r = subprocess.run(
        [sys.executable, "-m", "pdlab", "--lang", "zh", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("用法： pdlab") and "位置参数：" in r.stdout and "选项：" in r.stdout
    assert not [w for w in ENGLISH_WORDS if w in r.stdout] and not too_wide(r.stdout, 80)
    # --version and an English command never import the translations
    code = (
        "import sys\n"
        "from pdlab.cli import parse\n"
        "parse(['trace'])\n"
        "try:\n"
        "    parse(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "parse(['--lang', 'zh', 'trace'])\n"
        "print('pdlab.catalog.help' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "False", r.stdout + r.stderr
