"""pdlab's exceptions: each carries a catalog key and its values, and how one is reported.

An error is raised as ``PdlabValueError("err_invalid", name=..., value=..., allowed=...)``
(or one of its siblings below, which keep Python's own classes, so every ``except
ValueError`` still catches it): its ``str()`` is the English the catalog renders
(``pdlab/catalog/errors.py``), and :func:`error_text` renders the same key and values in
Chinese under ``--lang zh``, so no English is read back to find the Chinese. A value may
be a :class:`Phrase` (what ``expected`` allows, a note), rendered in the same language.
An exception that carries no key (an ``OSError``, torch's own) is shown whole after a
Chinese lead-in. vLLM's messages are English only; it has no counterpart.

A caught exception travels inside the engine as one line of text (:func:`one_line`: a
request whose forward raises, a KV read that fails), in a ``RequestOutput``, over a pipe,
in the trace; vLLM's engine core logs the traceback and reports the request as errored.
"""

from __future__ import annotations

import argparse
import re
import string
from typing import Any

UNTRANSLATED = "（原文）"  # the lead-in of a message that carries no key
_CJK = re.compile("[\u4e00-\u9fff]")
_PUNCT = "，。：；、（）“”！？"  # Chinese punctuation: touches Latin text without a space
_FORMATTER = string.Formatter()
_NEXT_TO_PUNCT = re.compile(f" *([{_PUNCT}]) *")  # no space touches Chinese punctuation


def _glue(left: str, right: str) -> str:
    """``left + right``, with the space the glossary's typography wants between a Chinese
    character and Latin text (none between two Chinese characters or at punctuation)."""
    if not left or not right:
        return left + right
    a, b = left[-1], right[0]
    if a.isspace() or b.isspace() or a in _PUNCT or b in _PUNCT:
        return left + right
    if bool(_CJK.match(a)) != bool(_CJK.match(b)):
        return left + " " + right
    return left + right


class Phrase:
    """A catalog key and its values, rendered in whichever language the message is: what
    an ``expected`` clause allows, or a note inside one."""

    __slots__ = ("key", "values")

    def __init__(self, key: str, /, **values: Any) -> None:
        self.key, self.values = key, values

    def render(self, lang: str) -> str:
        return render(lang, self.key, self.values)

    def __str__(self) -> str:
        return self.render("en")

    def __repr__(self) -> str:
        return f"Phrase({self.key!r}, {self.values!r})"


def render(lang: str, key: str, values: dict[str, Any]) -> str:
    """The catalog's template for ``key`` in ``lang`` filled with ``values`` (a
    :class:`Phrase` rendered in ``lang`` first); the Chinese spaced by the glossary's rule."""
    from pdlab.catalog import TEXT, check_lang

    template = TEXT[key][check_lang(lang)]
    out = ""
    for literal, field, spec, conv in _FORMATTER.parse(template):
        out = _glue(out, literal) if lang == "zh" else out + literal
        if field is None:
            continue
        value = values[field]
        if isinstance(value, Phrase):
            piece = value.render(lang)
        else:
            piece = format(_FORMATTER.convert_field(value, conv), spec or "")
        out = _glue(out, piece) if lang == "zh" else out + piece
    return _NEXT_TO_PUNCT.sub(r"\1", out) if lang == "zh" else out


class PdlabError(Exception):
    """An error that carries its catalog key and values; ``str()`` is the English."""

    def __init__(self, key: str, /, **values: Any) -> None:
        self.key, self.values = key, values
        super().__init__(render("en", key, values))

    def text(self, lang: str) -> str:
        return render(lang, self.key, self.values)

    def __reduce__(self) -> tuple[Any, ...]:  # over a pipe (pdlab pd) with its key
        return _rebuild, (type(self), self.key, self.values)


def _rebuild(cls: type[PdlabError], key: str, values: dict[str, Any]) -> PdlabError:
    return cls(key, **values)


class PdlabValueError(PdlabError, ValueError):
    pass


class PdlabTypeError(PdlabError, TypeError):
    pass


class PdlabRuntimeError(PdlabError, RuntimeError):
    pass


class PdlabLookupError(PdlabError, LookupError):
    pass


class PdlabArgumentTypeError(PdlabError, argparse.ArgumentTypeError):
    """A command-line value pdlab's own argument types refuse (``pdlab/cli/args.py``)."""


def invalid(name: str, value: Any, allowed: Phrase, cls: type[PdlabError] = PdlabValueError):
    """``name=value is invalid: expected <allowed>``, the family most checks raise."""
    return cls("err_invalid", name=name, value=value, allowed=allowed)


def keyed(e: BaseException) -> PdlabError | None:
    """The key-carrying exception behind ``e``: ``e`` itself, or the one it was raised
    from or during (argparse wraps an argument type's error in its own)."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, PdlabError):
            return e
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None


def error_text(e: BaseException | str, lang: str) -> str:
    """What a reader of ``lang`` sees for ``e`` (its first line): the English as raised;
    in Chinese, the catalog's rendering of its key, or, for an exception with no key (or
    a message that crossed the trace as text), the Chinese the fallback translator finds,
    else the English whole after :data:`UNTRANSLATED`."""
    if lang != "zh":
        return str(e)
    if isinstance(e, PdlabError):
        return e.text("zh")
    from pdlab.ui.text_errors import zh_error

    return zh_error(str(e))


def one_line(e: BaseException) -> str:
    """``"<ExceptionType>: <first line of the message>"``, at most 300 characters."""
    text = str(e).strip().splitlines()
    return f"{_builtin_name(e)}: {text[0] if text else ''}"[:300]


def _builtin_name(e: BaseException) -> str:
    """The name a reader knows: a :class:`PdlabError` by the built-in class it keeps
    (``ValueError``), as it was named before it carried a key."""
    if isinstance(e, PdlabError):
        return next(b for b in type(e).__mro__ if not issubclass(b, PdlabError)).__name__
    return type(e).__name__


def cli_message(e: BaseException, lang: str = "en") -> str:
    """What ``pdlab <command>: error: ...`` prints: a ``ValueError``/``TypeError`` (or an
    exception marked ``one_line = True``) is its own first line, since its message names the
    argument, the value and what is allowed; anything else adds its type in parentheses."""
    text = error_text(e, lang).strip().splitlines()
    if (isinstance(e, (ValueError, TypeError)) or getattr(e, "one_line", False)) and text:
        return text[0]
    return f"{text[0]} ({_builtin_name(e)})" if text else _builtin_name(e)


def os_reason(e: OSError) -> Phrase | str:
    """What the operating system said, as its own English (``e.strerror``) with the
    catalog's Chinese for its errno; a reason the catalog lacks stays as the OS said it."""
    import errno

    from pdlab.catalog import TEXT

    key = f"err_os_{errno.errorcode.get(e.errno or 0, '')}"
    why = e.strerror or str(e)
    return Phrase(key, strerror=why) if key in TEXT else why


def noted(x: Any, note: str, **values: Any) -> Phrase:
    """``x (note)``: an allowed value and the catalog's note ``note`` after it."""
    return Phrase("err_x_note", x=x, note=Phrase(note, **values))


def either(a: Any, b: Any) -> Phrase:
    """``a or b``."""
    return Phrase("err_x_or", a=a, b=b)
