"""One source per stub and reference solution, in both languages: the code once, its English
docstrings and comments, and after each of them its Chinese, on lines marked ``# zh:``. The
English file is the source with the marked lines left out; the Chinese file is the source
with each marked block put in place of the docstring or comment block just above it. The
source stays a runnable module (the marked lines are comments), so the reference solutions
are imported from it as they are. ``pdlab exercises start N`` and ``solution N`` render it
in the learner's language (:func:`render`).

Like ``pdlab/tools/bilingual.py`` with ``notebooks/src/`` for the notebooks: the two languages
cannot drift in their code. pdlab's own; it mirrors no upstream file.

A Chinese block after a docstring keeps each of its lines as it will be shown, after the
marker's indent; after comments it holds their words; after a line of code, the words of
that line's trailing comment::

    # Cache the blocks: later requests can hit them.
    # zh: 缓存这些块：之后的请求才能命中。
    l = torch.zeros(h)  # running sum of exp(score - m)
    # zh: `exp(score - m)` 的运行和
"""

from __future__ import annotations

import importlib.resources

from pdlab.catalog import check_lang

MARK = "# zh:"


def _kind(line: str) -> str:
    s = line.lstrip()
    if s.startswith(MARK):
        return "zh"
    if s.startswith("#"):
        return "comment"
    if s.startswith(('"""', 'r"""')):
        return "doc"
    return "code"


def _units(source: str) -> list[tuple[str, list[str]]]:
    """``source``'s lines grouped: a docstring (from its opening line to its closing one), a
    run of comment lines, a run of marked Chinese lines, or one line of code."""
    lines, units, i = source.split("\n"), [], 0
    while i < len(lines):
        kind, j = _kind(lines[i]), i + 1
        if kind == "doc":
            opened = lines[i].lstrip().removeprefix("r")[3:]
            if '"""' not in opened:
                while '"""' not in lines[j]:
                    j += 1
                j += 1
        elif kind in ("comment", "zh"):
            while j < len(lines) and _kind(lines[j]) == kind:
                j += 1
        units.append((kind, lines[i:j]))
        i = j
    return units


def _unmark(line: str) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    rest = line.lstrip()[len(MARK) :].removeprefix(" ")
    return indent + rest if rest else ""


def _commented(line: str) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    return f"{indent}# {line.lstrip()}".rstrip()


def render(source: str, lang: str = "en") -> str:
    """The stub or solution ``source`` in ``lang``: English leaves the marked lines out,
    Chinese puts each marked block in place of the docstring or comments above it, or of
    the trailing comment of the line of code above it."""
    out: list[tuple[str, list[str]]] = []
    for kind, lines in _units(source):
        if kind != "zh":
            out.append((kind, lines))
        elif check_lang(lang) == "zh":
            above_kind, above = out[-1]
            zh = [_unmark(line) for line in lines]
            if above_kind == "code":
                code = above[0][: above[0].index("  # ") + 2]  # up to its trailing comment
                zh = [code + "# " + zh[0].lstrip()]
            elif above_kind == "comment":
                zh = [_commented(line) for line in zh]
            out[-1] = (above_kind, zh)
    check_lang(lang)
    return "\n".join(line for _, lines in out for line in lines)


def read(kind: str, file_name: str, lang: str = "en") -> str:
    """``stubs/`` or ``solutions/`` (``kind``) ``file_name``, rendered in ``lang``."""
    source = importlib.resources.files(f"pdlab.exercises.{kind}").joinpath(file_name)
    return render(source.read_text(encoding="utf-8"), lang)


def slip(slug: str, old: str, new: str) -> str:
    """The reference solution of ``slug`` with ``old`` written as ``new``."""
    text = read("solutions", f"{slug}.py")
    assert old in text, old
    return text.replace(old, new)
