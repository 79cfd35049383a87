"""docs/reading-d-first-step.md and its Chinese twin: every stop names a file that exists and
a function or method that is in it, the two languages list the same stops in the same order,
and D's first step is followed in at most 16 files, as many as the guide says (issue 38)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDES = {
    "en": ROOT / "docs/reading-d-first-step.md",
    "zh": ROOT / "docs/reading-d-first-step_zh.md",
}
# "12. `path.py`, `Class.method`" (the Chinese with a full-width comma, "Back in"/"回到" allowed)
STOP = re.compile(r"^\d+\. [^`\n]*`((?:pdlab|kernels)/[\w/]+\.py)`[,，]\s*`([\w.]+)`", re.M)
NUMBERS = {"eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16}


def stops(lang: str) -> list[tuple[str, str]]:
    return STOP.findall(GUIDES[lang].read_text(encoding="utf-8"))


def defined(path: str) -> set[str]:
    """Top-level functions and classes of ``path``, and ``Class.method`` for their methods."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names |= {
                f"{node.name}.{item.name}"
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
    return names


@pytest.mark.parametrize("lang", sorted(GUIDES))
def test_every_stop_names_a_function_that_is_in_its_file(lang: str) -> None:
    found = stops(lang)
    assert len(found) >= 10, f"{GUIDES[lang].name}: stops not found ({len(found)})"
    for path, name in found:
        assert (ROOT / path).is_file(), f"{GUIDES[lang].name}: {path} does not exist"
        assert name in defined(path), f"{GUIDES[lang].name}: {path} has no {name}"


def test_both_languages_list_the_same_stops() -> None:
    assert stops("en") == stops("zh")


def test_the_path_is_followed_in_at_most_sixteen_files_as_the_guide_says() -> None:
    text = GUIDES["en"].read_text(encoding="utf-8")
    files = set(re.findall(r"`((?:pdlab|kernels)/[\w/]+\.py)`", text))
    assert {path for path, _ in stops("en")} <= files
    assert len(files) <= 16
    zh = GUIDES["zh"].read_text(encoding="utf-8")
    assert set(re.findall(r"`((?:pdlab|kernels)/[\w/]+\.py)`", zh)) == files
    said = re.search(r"(\w+) files; nothing else is needed", text)
    assert said and NUMBERS.get(said.group(1).lower()) == len(files), (said, len(files))
