"""The catalog's error messages (``pdlab/catalog/errors.py``) and the exceptions that carry
them (``pdlab/errors.py``): every ``err_`` key renders in both languages, an exception's
English is its key's, a message read back from text is the exception it was, and no
``raise`` builds by hand a message of a family the catalog holds.
"""

from __future__ import annotations

import ast
import pickle
import re
import string
from importlib import import_module
from pathlib import Path

import pytest

from pdlab.catalog import TEXT
from pdlab.errors import (
    PdlabError,
    PdlabTypeError,
    Phrase,
    error_text,
    invalid,
    one_line,
    parse,
)

ROOT = Path(__file__).resolve().parents[2]
_CJK = re.compile("[\u4e00-\u9fff]")
_PHRASE = Phrase("err_x_int_ge", n=1)  # a value that is itself a phrase


def _sample(key: str) -> dict[str, object]:
    """A value for each field of ``key``'s templates: a phrase where the catalog's phrases
    go, else a number (every conversion and format spec takes one)."""
    fields = {
        f
        for lang in ("en", "zh")
        for _, f, _, _ in string.Formatter().parse(TEXT[key][lang])
        if f is not None
    }
    phrase_fields = {"allowed", "x", "note", "who", "where", "why"}
    return {f: _PHRASE if f in phrase_fields else 1.5 for f in fields}


ERR_KEYS = sorted(k for k in TEXT if k.startswith("err_"))


def test_the_catalog_holds_the_errors():
    assert len(ERR_KEYS) >= 150, len(ERR_KEYS)
    assert {"err_invalid", "err_no_free_blocks", "err_x_int_ge"} <= set(ERR_KEYS)


@pytest.mark.parametrize("key", ERR_KEYS)
def test_every_error_key_renders_in_both_languages(key):
    values = _sample(key)
    en, zh = (Phrase(key, **values).render(lang) for lang in ("en", "zh"))
    for lang, out in (("en", en), ("zh", zh)):
        assert "{" not in out and "}" not in out, (key, lang, out)
    assert not _CJK.search(en), (key, en)
    words = re.sub(r"`[^`]*`|\b\w+=\S+", "", TEXT[key]["en"])
    if re.search(r"[a-z]{4,} [a-z]{3,}", re.sub(r"\{[^}]*\}", "", words)) and not key.startswith(
        ("err_os_", "err_x_none", "err_n_v", "err_n_p", "err_n_d")
    ):
        assert _CJK.search(zh), (key, zh)  # an English sentence has a Chinese one


def test_an_exception_keeps_its_class_and_its_english():
    """``except ValueError`` still catches it; ``str()`` is the key's English; the name a
    reader sees (the engine's one line, the CLI's parentheses) is the built-in one."""
    e = invalid("SamplingParams.max_tokens", 0, Phrase("err_x_int_ge", n=1))
    assert isinstance(e, ValueError) and isinstance(e, PdlabError)
    assert str(e) == "SamplingParams.max_tokens=0 is invalid: expected an integer >= 1"
    assert one_line(e) == f"ValueError: {e}"
    t = PdlabTypeError("err_invalid", name="x", value="y", allowed=Phrase("err_x_str"))
    assert isinstance(t, TypeError) and one_line(t).startswith("TypeError: x='y'")
    back = pickle.loads(pickle.dumps(e))  # over a pipe (pdlab pd), with its key
    assert type(back) is type(e) and back.key == e.key and str(back) == str(e)
    assert error_text(back, "zh") == error_text(e, "zh")


@pytest.mark.parametrize(
    "call",
    [
        lambda: import_module("pdlab.engine.request").SamplingParams(temperature=-1),
        lambda: import_module("pdlab.engine.config").CacheConfig(block_size=0),
        lambda: import_module("pdlab.engine.core.block_pool").BlockPool(2).get_new_blocks(5),
        lambda: import_module(
            "pdlab.engine.distributed.kv_transfer.base"
        ).validate_kv_transfer_params({"do_remote_prefill": True, "do_remote_decode": True}),
    ],
)
def test_a_message_read_back_from_text_is_the_exception_it_was(call):
    """The grader and the trace hold an error as text (``ValueError: ...``): read back from
    the catalog's own templates, its Chinese is the exception's, type included."""
    with pytest.raises(PdlabError) as info:
        call()
    e = info.value
    assert parse(str(e)).render("zh") == e.text("zh")
    assert error_text(one_line(e), "zh") == f"ValueError：{e.text('zh')}"
    assert _CJK.search(e.text("zh"))


# ---- no message of a family the catalog holds is built by hand ------------------------
# A room another branch is reworking now (issue 38): it raises with keys once it lands.
NOT_YET: tuple[str, ...] = ("pdlab/tools/aot",)
_EXCEPTIONS = {
    "ValueError",
    "TypeError",
    "RuntimeError",
    "LookupError",
    "KeyError",
    "ArgumentTypeError",
}
# What marks a message of the catalog's families ("x=v is invalid: expected ...", ...)
_FAMILY = re.compile(r"is invalid|is out of range|is unknown|: expected |is not (?:an?|trained)")


def _literal(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_literal(v) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp):
        return _literal(node.left) + _literal(node.right)
    return ""


def hand_built() -> list[str]:
    """``file:line: message`` for each built-in exception made with a family's text."""
    out = []
    for path in sorted([*ROOT.glob("pdlab/**/*.py"), *ROOT.glob("kernels/*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(NOT_YET):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            f = node.func
            name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
            said = _literal(node.args[0])
            if name in _EXCEPTIONS and _FAMILY.search(said):
                out.append(f"{rel}:{node.lineno}: {said!r}")
    return out


def test_no_raise_builds_a_family_message_by_hand():
    offenders = hand_built()
    assert not offenders, "raise these with a catalog key (pdlab/errors.py):\n" + "\n".join(
        offenders
    )
