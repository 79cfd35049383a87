"""pdlab's exceptions: each carries a catalog key and its values, and how one is reported.

An error is raised as ``PdlabValueError("err_invalid", name=..., value=..., allowed=...)``
(or one of its siblings below, which keep Python's own classes, so every ``except
ValueError`` still catches it): its ``str()`` is the English the catalog renders
(``pdlab/catalog/errors.py``), and :func:`error_text` renders the same key and values in
Chinese under ``--lang zh``, so no English is read back to find the Chinese. A value may
be a :class:`Phrase` (what ``expected`` allows, a note), rendered in the same language.
A message that crossed a process or the trace as text is read back with :func:`parse`
from the catalog's own English templates (so its Chinese cannot drift from the raise
site's); one the catalog does not hold (an ``OSError``'s, torch's) is shown whole after a
Chinese lead-in. vLLM's messages are English only; it has no counterpart.

A caught exception travels inside the engine as one line of text (:func:`one_line`: a
request whose forward raises, a KV read that fails), in a ``RequestOutput``, over a pipe,
in the trace; vLLM's engine core logs the traceback and reports the request as errored.
"""

from __future__ import annotations

import argparse
import functools
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


class Names(tuple):
    """Names a value may take, shown bare in English (``auto, triton, torch``) and each as
    code in Chinese (```auto```、```triton```), as an identifier is."""

    def render(self, lang: str) -> str:
        if lang == "zh":
            return "、".join(f"`{n}`" for n in self)
        return ", ".join(self)


def render(lang: str, key: str, values: dict[str, Any]) -> str:
    """The catalog's template for ``key`` in ``lang`` filled with ``values`` (a
    :class:`Phrase` rendered in ``lang`` first); the Chinese spaced by the glossary's rule."""
    from pdlab.catalog import TEXT, check_lang

    template = TEXT[key][check_lang(lang)]
    out, after_field = "", False
    for literal, field, spec, conv in _FORMATTER.parse(template):
        if lang == "zh":  # a space between a value and a Chinese word is the value's to ask
            if after_field and literal[:1] == " " and _CJK.match(literal[1:2]):
                literal = literal[1:]
            if field is not None and literal[-1:] == " " and _CJK.match(literal[-2:-1]):
                literal = literal[:-1]
        after_field = field is not None
        out = _glue(out, literal) if lang == "zh" else out + literal
        if field is None:
            continue
        value = values[field]
        if isinstance(value, (Phrase, Names)):
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


def check_int(name: str, value: Any, minimum: int = 1) -> None:
    """Refuse ``value`` unless it is an int (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise invalid(name, value, Phrase("err_x_int_ge", n=minimum))


def none_or(name: str, value: Any, kind: type, cls: type[PdlabError] = PdlabValueError) -> None:
    """Refuse ``value`` unless it is None or a ``kind``: ``expected None or a <kind>``."""
    if value is not None and not isinstance(value, kind):
        raise invalid(name, value, Phrase("err_x_none_or", t=kind.__name__), cls)


def keyed(e: BaseException) -> PdlabError | None:
    """The key-carrying exception behind ``e``: ``e`` itself, or the one it was raised
    from or during (argparse wraps an argument type's error in its own)."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, PdlabError):
            return e
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None


class _Said(str):
    """A value read back out of English text: shown as it was, whatever the template's
    conversion (``!r``) or format spec (``:.1f``) asks for."""

    def __repr__(self) -> str:
        return str(self)

    def __format__(self, spec: str) -> str:
        return str(self)


_FIELD = re.compile(r"\{(\w+)(?:![rs])?(?::[^{}]*)?\}")


@functools.cache
def _patterns() -> list[tuple[str, re.Pattern[str], tuple[str, ...], int]]:
    """Each ``err_`` key with its English template as a pattern, its fields and how much
    literal text it has."""
    from pdlab.catalog import TEXT

    out = []
    for key, langs in TEXT.items():
        if not key.startswith("err_") and key not in _LABELS:
            continue
        template = langs["en"]
        pieces = _FIELD.split(template)  # literal, field, literal, field, ...
        fields = tuple(pieces[1::2])
        if len(set(fields)) != len(fields):
            continue
        regex = "".join(
            re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(pieces)
        )
        literal = sum(map(len, pieces[::2]))
        if literal:  # a template that is all value ({strerror}) would match anything
            out.append((key, re.compile(regex, re.S), fields, literal))
    return out


def parse(message: str) -> Phrase | None:
    """The catalog key and values whose English is ``message``, or None. A value that is
    itself one of the catalog's phrases is read back as one; where two readings fit, the
    one whose templates account for more of the text wins."""
    found = _parse(message, phrase=False)
    return found[0] if found else None


@functools.lru_cache(maxsize=4096)
def _parse(message: str, phrase: bool) -> tuple[Phrase, tuple[int, int]] | None:
    """The best reading of ``message`` (a whole message, or a phrase inside one) and its
    score: how many of its characters the templates' own words account for, then the
    fewer templates the better (``a string or a list of token ids`` is one phrase)."""
    best: tuple[Phrase, tuple[int, int]] | None = None
    for key, pattern, fields, literal in _patterns():
        if key.startswith(("err_x_", "err_n_") + _LABELS) != phrase or key.startswith("err_os_"):
            continue
        m = pattern.fullmatch(message)
        if m is None:
            continue
        values: dict[str, Any] = {}
        score = (literal, -1)
        for f in fields:
            inner = _parse(m[f], True) if f in _PHRASE_FIELDS else None
            values[f] = inner[0] if inner else _Said(m[f])
            if f == "choices" and _BARE_NAMES.fullmatch(m[f]):
                values[f] = Names(m[f].split(", "))
            if f == "why" and not inner and m[f] in _strerrors():
                values[f] = Phrase(_strerrors()[m[f]], strerror=m[f])
            if inner:
                score = (score[0] + inner[1][0], score[1] + inner[1][1])
        if best is None or score > best[1]:
            best = (Phrase(key, **values), score)
    return best


# The fields a phrase fills (what is allowed, a note, a reason); every other value is data.
_PHRASE_FIELDS = frozenset({"allowed", "x", "a", "b", "note", "who", "where", "why", "platform"})
_LABELS = ("pf_cpu_label",)  # a view's label a message names (pdlab/engine/platforms.py GPUS)
_BARE_NAMES = re.compile(r"[A-Za-z_][\w.-]*(?:, [A-Za-z_][\w.-]*)+")
_KIND = re.compile(r"(\w+(?:Error|Exception|Interrupt)): ")


def error_text(e: BaseException | str, lang: str) -> str:
    """What a reader of ``lang`` sees for ``e`` (its first line): the English as raised,
    or the catalog's Chinese for its key (read back from text as the module docstring
    tells)."""
    if lang != "zh":
        return str(e)
    if isinstance(e, PdlabError):
        return e.text("zh")
    lines = str(e).strip().splitlines()
    first = lines[0] if lines else ""
    kind = _KIND.match(first)
    said = parse(first[kind.end() :] if kind else first)
    if said is not None:
        return _glue(kind[1] + "：" if kind else "", said.render("zh"))
    if _CJK.search(first):  # already Chinese (a zh caller's)
        return first
    return _glue(UNTRANSLATED, first)


def one_line(e: BaseException) -> str:
    """``"<ExceptionType>: <first line of the message>"``, at most 300 characters."""
    text = str(e).strip().splitlines()
    return f"{builtin_name(e)}: {text[0] if text else ''}"[:300]


def builtin_name(e: BaseException) -> str:
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
    return f"{text[0]} ({builtin_name(e)})" if text else builtin_name(e)


@functools.cache
def _strerrors() -> dict[str, str]:
    """The operating system's own reason texts, each to its ``err_os_`` key."""
    import errno
    import os

    from pdlab.catalog import TEXT

    out = {}
    for number, code in errno.errorcode.items():
        if f"err_os_{code}" in TEXT:
            out[os.strerror(number)] = f"err_os_{code}"
    return out


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
