"""Every Chinese text renders each term the one way ``docs/glossary.md`` gives: the words of
every view (``pdlab/ui/text*.py``), the Chinese notebooks and their bilingual sources, the
README's Chinese section and the docs; ``tests/test_views_zh.py`` runs the same check over
what the views print.

The check is a rule, not a list of the variants someone happened to find:

1. **English in Chinese prose.** Code is stripped first (backticks, fenced blocks,
   ``{placeholders}``, paths, URLs, ``--flags`` and their values, ``pdlab <command>``,
   identifiers: any word with ``_``, a call ``f(``, an index ``x[``, a quoted string). Every
   Latin word left must then be part of a glossary rendering (``prefill 路径``, ``短
   extend``, ``token``, ...), a name (it has a digit, is an acronym, or has an inner capital:
   H200, MLA, DeepSeek, vLLM), one letter (a symbol: N, P, D), or listed in the glossary's
   table of names kept in English (Triton, Mamba, pip, ...). Anything else is an English
   term the glossary has not rendered (``仍在 prefill``, ``proxy``), and fails; the glossary's
   own English column cannot be listed as a name.
2. **Chinese synonyms.** For each term, the renderings in its "not used" column fail
   wherever they appear outside the term itself (共置 where the glossary says 非分离).
3. **Typography.** No space between two Chinese characters (``最后一层的 隐藏状态``), and a
   space between a Chinese character and a Latin letter or digit (``按roofline``).
"""

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
    lines joined (no space between two Chinese characters, one elsewhere)."""
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
            out += "" if both or out[-1] in "，。：；、（“" else " "
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
    from pdlab.catalog import (
        help as text_help,  # every --help under --lang zh (its %(default)s as code)
    )

    for english, chinese in text_help.entries().items():
        shown = re.sub(r"%\((\w+)\)[rs]", r"`\1`", chinese).replace("%%", "%")
        out[f"text_help.py[{english!r}]"] = shown
    out["text_help.py, the usage line and a choices list"] = (
        text_help.USAGE + "pdlab tour\n" + text_help.one_of("后端", ["cpu_mla", "flashmla"])
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


def test_the_glossary_names_each_term_once() -> None:
    rows = glossary()
    assert len(rows) >= 40
    english = [e for e, _, _ in rows]
    chinese = [t for _, terms, _ in rows for t in terms]
    assert len(set(english)) == len(english), "an English term is listed twice"
    assert len(set(chinese)) == len(chinese), "a Chinese rendering is listed twice"
    for e, terms, variants in rows:
        assert terms and variants, f"{e!r}: needs a Chinese rendering and the ones not used"
        assert not set(terms) & set(variants), f"{e!r}: a rendering is also listed as not used"
    wanted = {
        "prefix caching": "前缀缓存",
        "chunked prefill": "分块预填充",
        "block table": "块表",
        "prompt": "提示词",
        "short extend": "短 extend",
        "colocated": "非分离",
        "uniform decode batch": "均匀解码批次",
    }
    table = {e.split(" (")[0]: terms[0] for e, terms, _ in rows}
    for e, term in wanted.items():
        assert table[e] == term
    assert "共置" in next(v for e, _, v in rows if e.startswith("colocated"))


def test_names_kept_in_english_are_not_glossary_terms() -> None:
    """A term the glossary renders cannot be waved through as a name."""
    names = kept_names()
    assert {"Triton", "Mamba", "pdlab"} <= set(names)
    heads = {w.lower() for e, _, _ in glossary() for w in re.findall(r"\w+", e.split(" (")[0])}
    assert not {n.lower() for n in names} & heads


def test_the_glossary_renderings_pass_their_own_check() -> None:
    for e, terms, _ in glossary():
        for t in terms:
            assert violations(f"这里写{t}。" if _CJK.match(t[0]) else f"这里写 {t}。") == [], (e, t)


def test_a_variant_holding_a_rendering_is_still_found() -> None:
    # 解码行 holds 解码 (the glossary's decode); the glossary writes decode 行
    assert [v.split(":")[0] for v in violations("这一步只有解码行")] == ["'解码行'"]
    assert violations("这一步只有 decode 行，在解码实例上") == []


def test_the_rule_finds_what_no_list_names() -> None:
    # English words no glossary row lists as a variant.
    assert any("'prefill'" in v for v in violations("请求仍在 prefill，P 做完 prefill"))
    assert any("'proxy'" in v for v in violations("由 proxy 转发"))
    assert any("'widget'" in v for v in violations("拖动这个 widget 看看"))
    # Listed Chinese renderings, and the approved term is not mistaken for one.
    assert [v.split(":")[0] for v in violations("和同机引擎的结果一样")] == ["'同机引擎'"]
    assert violations("提示词长度") == [] and violations("非分离引擎") == []
    assert any("'提示'" in v for v in violations("提示长度"))
    assert any("'共置'" in v for v in violations("和共置引擎一样"))
    # Typography.
    assert any("no space" in v for v in violations("最后一层的 隐藏状态"))
    assert any("a space" in v for v in violations("按roofline 模型"))
    assert any("a space" in v for v in violations("在中Scheduler里"))
    # Code, names, symbols and wrapped notebook lines pass.
    assert violations("`num_prompt_tokens`、`latent` 和 --weights random 是代码") == []
    assert violations("提示词 {prompt} 共 N 个 token，见 vllm/v1/core/block_pool.py") == []
    assert violations("在 H200 上 vLLM 选 FLASH_ATTN_MLA（DeepSeek-V3）") == []
    assert violations("# D 的第一步是一个短\n# extend，按 decode 路径运行") == []
    assert any("'extend'" in v for v in violations("它是一个 extend"))


def test_chinese_texts_use_the_glossary() -> None:
    texts = chinese_texts()
    assert len(texts) > 100  # text.py's entries, the notebooks' cells, the README, the docs
    bad = {where: v for where, text in texts.items() if (v := violations(text))}
    assert bad == {}, f"{len(bad)} Chinese texts break the glossary:\n" + "\n".join(
        f"  {where}: {'; '.join(v)}" for where, v in bad.items()
    )


# Chinese typography forbids a line that starts with closing punctuation (避头尾): a wrap
# must carry the character before it down too. Opening brackets may start a line.
_LINE_START = re.compile(r"^[\s#>*|│┃-]*([，。？！；：、）》」』】])")


def line_start_punctuation(text: str) -> list[str]:
    """The lines of ``text`` (prose, a notebook cell, a rendered view) that start with
    closing CJK punctuation, after any comment, quote, list or table-border marks."""
    return [ln for ln in text.splitlines() if _LINE_START.match(ln)]


def test_line_start_punctuation_rule() -> None:
    assert line_start_punctuation("# 第一行\n# ，第二行") == ["# ，第二行"]
    assert line_start_punctuation("│ 。表格里") == ["│ 。表格里"]
    assert line_start_punctuation("（括号可以在行首）\n- 列表") == []


def test_no_chinese_line_starts_with_closing_punctuation() -> None:
    # A catalog entry may be a fragment that follows other words (": 调度 ..."), so a text's
    # first line is not checked; the views' wrapped output is (tests/test_views_zh.py).
    bad = {
        where: v
        for where, text in chinese_texts().items()
        if (v := line_start_punctuation(text.partition("\n")[2]))
    }
    assert bad == {}, "\n".join(f"  {where}: {v[:3]}" for where, v in bad.items())
