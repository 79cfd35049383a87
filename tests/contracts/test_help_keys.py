"""Every ``pdlab ... --help`` text is a catalog key, rendered by the one catalog function
(issue 38, "One engine, one door"): rewording a help is an edit beside its Chinese, so the
English cannot change and leave the Chinese behind.

Two checks. The source: every ``help=``, ``description=`` and ``epilog=`` of the code that
builds the ``pdlab`` parser is a ``Help("help_...")`` call (read from the syntax tree, so a
literal, an f-string or a constant holding words fails, naming the file and line). The
parsers: every parser :func:`pdlab.cli.build_parser` makes, in both languages, holds
:class:`pdlab.catalog.Help` keys of ``pdlab/catalog/help.py`` until a help is printed, and
prints each as :func:`pdlab.catalog.text` renders it, Chinese under ``zh``.
"""

from __future__ import annotations

import argparse
import ast
import string
import subprocess
import sys
from pathlib import Path

import pytest

from pdlab.catalog import Help, text
from pdlab.catalog.help import TEXT_HELP
from pdlab.cli import _parsers, build_parser

ROOT = Path(__file__).resolve().parents[2]
WORDS = ("help", "description", "epilog")
ARGPARSE_CALLS = {
    "ArgumentParser",
    "add_argument",
    "add_parser",
    "add_subparsers",
    "add_argument_group",
    "add_mutually_exclusive_group",
}
# Maintainers' tools, run as ``python -m pdlab.tools.X``: not the pdlab command, English only.
MAINTAINER_TOOLS = {"pdlab/tools/aot.py", "pdlab/tools/bilingual.py", "pdlab/tools/gpu_check.py"}
# The keys :func:`pdlab.catalog.help.render` and ``words`` use themselves, not a parser.
RENDERING_KEYS = {
    "help_list_sep",
    "help_choice",
    "help_one_of",
    "help_then",
    "help_ap_positionals",
    "help_ap_options",
}


def _name(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def words_not_keyed(source: str, where: str) -> list[str]:
    """Each ``help=``/``description=``/``epilog=`` in ``source`` that is no ``Help(...)``."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or _name(node.func) not in ARGPARSE_CALLS:
            continue
        for kw in node.keywords:
            v = kw.value
            keyed = isinstance(v, ast.Call) and getattr(v.func, "id", None) == "Help"
            if kw.arg in WORDS and not keyed:
                bad.append(f"{where}:{v.lineno}: {kw.arg}={ast.unparse(v)[:60]}")
    return bad


def parser_sources() -> list[Path]:
    """Every pdlab module that builds an argparse parser or adds to one."""
    found = []
    for path in sorted((ROOT / "pdlab").rglob("*.py")):
        src = path.read_text(encoding="utf-8")
        if any(w in src for w in ("add_argument(", "add_parser(", "ArgumentParser(")):
            found.append(path)
    return found


def slots(p: argparse.ArgumentParser) -> list[tuple[str, object]]:
    """Where ``p`` holds pdlab's words: its description and epilog, each action's help,
    each subcommand's help (argparse's group titles are argparse's own)."""
    out: list[tuple[str, object]] = [("description", p.description), ("epilog", p.epilog)]
    for a in p._actions:
        out.append(("/".join(a.option_strings) or a.dest, a.help))
        if isinstance(a, argparse._SubParsersAction):
            out += [(c.dest, c.help) for c in a._choices_actions]
    return [(n, v) for n, v in out if v is not None and v != argparse.SUPPRESS]


def test_the_cli_source_writes_no_help_in_words() -> None:
    sources = parser_sources()
    names = {p.relative_to(ROOT).as_posix() for p in sources}
    assert {"pdlab/cli/__init__.py", "pdlab/cli/tour.py", "pdlab/cli/args.py"} <= names
    assert MAINTAINER_TOOLS <= names, "a maintainers' tool moved: update the list"
    bad = []
    for path in sources:
        rel = path.relative_to(ROOT).as_posix()
        if rel not in MAINTAINER_TOOLS:
            bad += words_not_keyed(path.read_text(encoding="utf-8"), rel)
    assert bad == [], "help in words, not a catalog key:\n" + "\n".join(bad)


def test_the_source_check_catches_words() -> None:
    src = (
        'p.add_argument("--a", help="plain words")\n'
        'p.add_argument("--b", help=f"chapter {n}")\n'
        "p.add_argument('--c', help=WORDS)\n"
        'argparse.ArgumentParser(description="Run it.")\n'
        'p.add_argument("--d", help=Help("help_lang"))\n'
        "sub.add_parser('x', help=Help('help_cmd_tour'))\n"
        'bar.update(task, description="not argparse")\n'
        "p.add_argument_group('g', description=WORDS)\n"
    )
    bad = words_not_keyed(src, "x.py")
    assert [b.split(":")[1] for b in bad] == ["1", "2", "3", "4", "8"], bad


@pytest.mark.parametrize("lang", ("en", "zh"))
def test_every_parser_holds_keys_and_prints_their_words(lang: str) -> None:
    parsers = _parsers(build_parser(lang))
    assert len(parsers) >= 19
    seen = 0
    for p in parsers:
        held = slots(p)
        for name, h in held:
            assert isinstance(h, Help), (p.prog, name, h)
            assert h.key == "" or h.key in TEXT_HELP, (p.prog, name, h.key)
            assert h.key or h.choices, (p.prog, name)
        p.format_help()  # renders in place
        for (name, h), (_, shown) in zip(held, slots(p), strict=True):
            assert type(shown) is str, (p.prog, name)
            if h.key:
                values = {
                    k: text(lang, "help_list_sep").join(map(str, v)) if isinstance(v, tuple) else v
                    for k, v in h.values.items()
                }
                assert shown.startswith(text(lang, h.key, **values)), (p.prog, name)
            for choice in h.choices:
                assert choice in shown, (p.prog, name, choice)
            seen += 1
    assert seen > 100


def test_the_chinese_help_is_each_key_s_chinese() -> None:
    en, zh = _parsers(build_parser("en")), _parsers(build_parser("zh"))
    for a, b in zip(en, zh, strict=True):
        keys = [h.key for _, h in slots(a)]
        a.format_help(), b.format_help()
        for key, (name, x), (_, y) in zip(keys, slots(a), slots(b), strict=True):
            assert x != y, (a.prog, name, key, x)  # every key has its Chinese
    assert "用法" in zh[0].format_help() and "usage:" in en[0].format_help()


def test_every_key_has_both_languages_with_the_same_fields() -> None:
    def fields(s: str) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(s) if f}

    for key, entry in TEXT_HELP.items():
        assert key.startswith("help_") and set(entry) == {"en", "zh"}, key
        assert entry["en"].strip() and entry["zh"].strip(), key
        assert entry["en"] != entry["zh"], key
        assert fields(entry["en"]) == fields(entry["zh"]), key
        percent = [s for s in ("%(default)s", "%(default)r", "%%") if s in entry["en"]]
        assert all(s in entry["zh"] for s in percent), key


def test_every_key_is_used() -> None:
    """A key no parser holds any more (the option removed) is stale."""
    used = {h.key for p in _parsers(build_parser()) for _, h in slots(p)}
    assert sorted(set(TEXT_HELP) - used - RENDERING_KEYS) == []
    assert RENDERING_KEYS <= set(TEXT_HELP)


def test_a_new_option_in_words_is_caught(monkeypatch) -> None:
    from pdlab.cli import tour

    original = tour.add_trace_arguments

    def with_a_new_option(p: argparse.ArgumentParser) -> None:
        original(p)
        p.add_argument("--new-thing", help="a help nobody keyed")

    monkeypatch.setattr(tour, "add_trace_arguments", with_a_new_option)
    trace = next(p for p in _parsers(build_parser("zh")) if p.prog == "pdlab trace")
    loose = [(n, h) for n, h in slots(trace) if not isinstance(h, Help)]
    assert loose == [("--new-thing", "a help nobody keyed")]


def test_no_run_that_prints_no_help_loads_the_help_texts() -> None:
    code = (
        "import sys\n"
        "from pdlab.cli import build_parser, parse\n"
        "parse(['trace'])\n"
        "parse(['--lang', 'zh', 'trace'])\n"
        "try:\n"
        "    parse(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('pdlab.catalog.help' in sys.modules)\n"
        "build_parser('en').format_help()\n"
        "print('pdlab.catalog.help' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split()[-2:] == ["False", "True"], r.stdout + r.stderr
