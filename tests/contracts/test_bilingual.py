"""Every notebook's English and Chinese versions come from one bilingual source
(``pdlab/tools/bilingual.py``): the committed ``.py`` twins are exactly what the source renders
to, and they share every code cell but the language line."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdlab.tools import bilingual

ROOT = Path(__file__).resolve().parents[2]


NAMES = sorted(bilingual.NOTEBOOKS)


def test_every_notebook_has_a_source_and_both_languages() -> None:
    notebooks = {p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py")}
    rendered = {t.name for targets in bilingual.NOTEBOOKS.values() for t in targets.values()}
    assert notebooks == rendered, "a notebook is not rendered from a bilingual source"
    sources = {p.stem for p in (ROOT / bilingual.SOURCE_DIR).glob("*.py")}
    assert sources == set(bilingual.NOTEBOOKS)


@pytest.mark.parametrize("lang", bilingual.LANGS)
@pytest.mark.parametrize("name", NAMES)
def test_committed_notebooks_are_rendered_from_the_source(name: str, lang: str) -> None:
    source = (ROOT / bilingual.source_path(name)).read_text(encoding="utf-8")
    target = bilingual.NOTEBOOKS[name][lang]
    committed = (ROOT / target).read_text(encoding="utf-8")
    assert committed == bilingual.render(source, lang), (
        f"{target} is stale: run `python -m pdlab.tools.bilingual` "
        "then `jupytext --sync notebooks/*.py`"
    )


@pytest.mark.parametrize("name", NAMES)
def test_code_cells_are_shared_and_markdown_is_per_language(name: str) -> None:
    source = (ROOT / bilingual.source_path(name)).read_text(encoding="utf-8")
    _, en = bilingual.split_cells(bilingual.render(source, "en"))
    _, zh = bilingual.split_cells(bilingual.render(source, "zh"))
    assert len(en) == len(zh)
    for (m_en, b_en), (m_zh, b_zh) in zip(en, zh):
        assert m_en == m_zh
        if "[markdown]" in m_en:
            assert any("\u4e00" <= ch <= "\u9fff" for ch in b_zh)
        else:
            assert b_en.replace('LANG = "en"', 'LANG = "zh"') == b_zh


def test_bad_sources_are_refused() -> None:
    with pytest.raises(ValueError, match="lang='fr'"):
        bilingual.render("# %%\nx = 1\n", "fr")
    with pytest.raises(ValueError, match="without a language tag"):
        bilingual.render("# %% [markdown]\n# hi\n", "en")
    with pytest.raises(ValueError, match="no '# %%' cell markers"):
        bilingual.render("x = 1\n", "en")
