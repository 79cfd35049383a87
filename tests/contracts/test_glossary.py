"""Every Chinese text renders each term the one way ``docs/glossary.md`` gives: the words of
every view (``pdlab/ui/text*.py``), the Chinese notebooks and their bilingual sources, the
README's Chinese section and the docs; ``tests/lab/test_views_zh.py`` runs the same check over
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

import re

from glossary_rule import (  # noqa: F401 - the rule, shared with the views' tests
    _CJK,
    chinese_texts,
    glossary,
    kept_names,
    line_start_punctuation,
    violations,
)


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


def test_line_start_punctuation_rule() -> None:
    assert line_start_punctuation("# 第一行\n# ，第二行") == ["# ，第二行"]
    assert line_start_punctuation("│ 。表格里") == ["│ 。表格里"]
    assert line_start_punctuation("（括号可以在行首）\n- 列表") == []


def test_no_chinese_line_starts_with_closing_punctuation() -> None:
    # A catalog entry may be a fragment that follows other words (": 调度 ..."), so a text's
    # first line is not checked; the views' wrapped output is (tests/lab/test_views_zh.py).
    bad = {
        where: v
        for where, text in chinese_texts().items()
        if (v := line_start_punctuation(text.partition("\n")[2]))
    }
    assert bad == {}, "\n".join(f"  {where}: {v[:3]}" for where, v in bad.items())
