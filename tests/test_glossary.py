"""Every Chinese text uses the glossary's term (``docs/glossary.md``): the words of every view
(``pdlab/ui/text.py``), the Chinese notebooks and their bilingual sources, the README's
Chinese section and the docs. A variant the glossary lists as not used fails, naming the
text, the variant and the term to use instead."""

from __future__ import annotations

import re
from pathlib import Path

from pdlab.ui import bilingual
from pdlab.ui.text import TEXT

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "glossary.md"
_CJK = re.compile(r"[\u4e00-\u9fff]")
# Stripped before checking: fenced code, inline code, {placeholders}, URLs and file paths.
_CODE = re.compile(r"```.*?```|`[^`\n]*`|\{[^{}\n]*\}|https?://\S+|\b[\w.-]+/[\w./-]+", re.S)


def glossary() -> list[tuple[str, list[str], list[str]]]:
    """``(english, [chinese terms], [variants not used])`` for every row of the table."""
    rows = []
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or set(cells[0]) <= {"-"}:
            continue
        if cells[0] == "English":
            continue
        split = lambda c: [x.strip() for x in c.split(",") if x.strip()]  # noqa: E731
        rows.append((cells[0], split(cells[1]), split(cells[2])))
    return rows


def _pattern(variant: str) -> re.Pattern[str]:
    if _CJK.search(variant):
        return re.compile(re.escape(variant))
    # An English word: not when it is part of an identifier or an option (num_prompt_tokens,
    # --prompt, block_table).
    return re.compile(r"(?<![\w\-.])" + re.escape(variant) + r"(?![\w])", re.IGNORECASE)


def violations(text: str) -> list[str]:
    """``'variant' (use 'term')`` for every glossary variant in ``text``, code stripped. The
    approved terms are removed first, so 提示 is found where 提示词 is not."""
    plain = _CODE.sub(" ", text)
    found = []
    for english, terms, variants in glossary():
        rest = plain
        for t in sorted(terms, key=len, reverse=True):
            rest = rest.replace(t, " ")
        for v in variants:
            if _pattern(v).search(rest):
                found.append(f"{v!r} (use {terms[0]!r} for {english!r})")
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
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    zh = re.search(r"^## 中文.*?(?=^## |\Z)", readme, re.M | re.S)
    assert zh, "README.md has no Chinese section (a heading starting with '## 中文')"
    out["README.md, Chinese section"] = zh.group(0)
    for doc in sorted((ROOT / "docs").glob("*.md")):
        lines = doc.read_text(encoding="utf-8").splitlines()
        if doc == GLOSSARY:  # the table names the variants; its prose is checked
            lines = [ln for ln in lines if not ln.startswith("|")]
        out[str(doc.relative_to(ROOT))] = "\n".join(ln for ln in lines if _CJK.search(ln))
    return out


def test_the_glossary_names_each_term_once() -> None:
    rows = glossary()
    assert len(rows) >= 30
    english = [e for e, _, _ in rows]
    chinese = [t for _, terms, _ in rows for t in terms]
    assert len(set(english)) == len(english), "an English term is listed twice"
    assert len(set(chinese)) == len(chinese), "a Chinese term is listed twice"
    for e, terms, variants in rows:
        assert terms and variants, f"{e!r}: needs a Chinese term and the variants not used"
        assert not set(terms) & set(variants), f"{e!r}: a term is also listed as a variant"
    # The terms the issue names.
    wanted = {
        "prefix caching": "前缀缓存",
        "chunked prefill": "分块预填充",
        "block table": "块表",
        "prompt": "提示词",
        "short extend": "短 extend",
    }
    table = {e: terms[0] for e, terms, _ in rows}
    for e, term in wanted.items():
        assert table[e] == term
    assert "单机" in next(v for e, _, v in rows if e.startswith("colocated"))
    assert "潜向量" in next(t for e, t, _ in rows if e.startswith("latent"))


def test_the_glossary_terms_use_each_other() -> None:
    """A term of one row is not a variant of another (非分离 cannot be a forbidden word)."""
    for e, terms, _ in glossary():
        for t in terms:
            assert violations(t) == [], f"the glossary's own term {t!r} for {e!r}"


def test_the_check_finds_variants_and_skips_code() -> None:
    assert [v.split()[0] for v in violations("和同机引擎的结果一样")] == ["'同机引擎'"]
    assert any("'latent'" in v for v in violations("每一行 latent 都上投影"))
    assert any("'升维'" in v for v in violations("把每一行升维"))
    assert any("'提示'" in v for v in violations("提示长度"))
    assert violations("提示词长度") == []
    assert violations("`num_prompt_tokens`、`latent` 和 --prompt 是标识符") == []
    assert violations("提示词 {prompt} 共 N 个 token，见 vllm/v1/core/block_pool.py") == []


def test_chinese_texts_use_the_glossary() -> None:
    texts = chinese_texts()
    assert len(texts) > 100  # text.py's entries, the notebooks' cells, the README, the docs
    bad = {where: v for where, text in texts.items() if (v := violations(text))}
    assert bad == {}, "Chinese texts using a variant:\n" + "\n".join(
        f"  {where}: {', '.join(v)}" for where, v in bad.items()
    )
