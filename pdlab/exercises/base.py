"""What every exercise shares: its description (:class:`Exercise`), the grader that runs
the learner's function case by case (:class:`Grader`), and the verdict (:class:`Result`).

A grader raises :class:`Mismatch` at the first case that goes wrong: the case's name,
what was expected, what came out, and, when the wrong answer equals a known mistake's, that
mistake's name and explanation, with the engine's own record of what happened (a step
table) where an engine ran. An exception inside the learner's function is reported the same
way, in one line naming the file and line it came from; never a traceback.

No upstream file: this is pdlab's workshop mode (the course formats it follows, tiny-llm's
stubs with tests and Triton-Puzzles' graded puzzles, are named in ``docs/workshop.md``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import random
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from pdlab.catalog import text


@dataclass(frozen=True)
class Exercise:
    """One exercise. ``function`` is the name the learner's file must define; its stub and
    reference solution are ``stubs/<slug>.py`` and ``solutions/<slug>.py``. ``statement``,
    ``hints`` and ``mistakes`` hold English and Chinese (``{"en": ..., "zh": ...}``).
    ``slips`` are wrong answers learners plausibly write, ``{mistake key: a whole learner
    file}``: the grader must reject each, naming that mistake (the tests submit every one)."""

    number: int
    slug: str
    function: str
    title: dict[str, str]
    statement: dict[str, str]
    hints: dict[str, tuple[str, ...]]
    mistakes: dict[str, dict[str, str]]
    grade: Callable[[Callable[..., Any], Grader], None]
    notebook: str = ""
    slips: dict[str, str] = field(default_factory=dict)
    #: Where pdlab implements it: named only after a pass (to compare), never in the stub,
    #: where it would be the answer one file away.
    library: str = ""
    #: pdlab's own functions that compute the answer (``"module:qualname"``): the learner's
    #: function may not call them (nor the reference solution), or it would pass by
    #: handing the question back to the engine it is compared with.
    own: tuple[str, ...] = ()

    def own_code(self) -> frozenset:
        """The code objects of :attr:`own` and of the reference solution."""
        codes = set()
        for spec in (*self.own, f"pdlab.exercises.solutions.{self.slug}:{self.function}"):
            module, _, qualname = spec.partition(":")
            obj: Any = importlib.import_module(module)
            for part in qualname.split("."):
                obj = getattr(obj, part)
            codes.add(code_of(obj))
        return frozenset(codes - {None})

    @property
    def file_name(self) -> str:
        return f"{self.slug}.py"


def code_of(fn: object) -> Any:
    """The code object of a function, or of the Python function a Triton kernel wraps."""
    return getattr(fn, "__code__", None) or getattr(getattr(fn, "fn", None), "__code__", None)


class LearnerRaised(Exception):
    """The learner's function raised inside the engine; ``error`` is what it raised. The
    engine's own errors pass through unwrapped, so the two are never confused."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class Mismatch(Exception):
    """A case the learner's function got wrong (or raised in)."""

    def __init__(self, case: str, expected: str = "", got: str = "", mistake: str | None = None,
                 evidence: str = "", raised: str = "", stopped: str = "") -> None:  # fmt: skip
        super().__init__(case)
        self.case, self.expected, self.got = case, expected, got
        self.mistake, self.evidence, self.raised = mistake, evidence, raised
        #: One whole line when the case never finished (a clock ran out, the learner's
        #: code exited): :mod:`pdlab.exercises.sandbox`.
        self.stopped = stopped


def stop_line(e: BaseException, lang: str) -> str:
    """One line for a ``SystemExit`` or ``KeyboardInterrupt`` the learner's code raised."""
    if isinstance(e, SystemExit):
        return text(lang, "ex_called_exit", code=e.code)
    return text(lang, "ex_raised_interrupt")


@dataclass
class Result:
    """The verdict on one submission; ``str()`` is what the learner reads."""

    exercise: Exercise
    passed: bool
    seed: int
    lang: str
    cases: int = 0
    failure: Mismatch | None = None
    lines: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        return "\n".join(self.lines)


class Words:
    """What a grader says (a case's name, an expected value in words): a key of the catalog
    (``pdlab/catalog/exercises.py``) and its values, rendered in the grader's language;
    values that are :class:`Words` too are rendered in the same language."""

    def __init__(self, key: str, **values: object) -> None:
        self.key, self.values = key, values

    def render(self, lang: str) -> str:
        values = {k: v.render(lang) if isinstance(v, Words) else v for k, v in self.values.items()}
        return text(lang, self.key, **values)


class Grader:
    """Runs the learner's function on cases. ``rng`` and ``gen`` are seeded from ``seed``
    (printed with the verdict), so a failing case can be replayed."""

    def __init__(self, seed: int, lang: str, source: str | None = None) -> None:
        self.seed, self.lang, self.source = seed, lang, source
        self.rng = random.Random(seed)
        self.gen = torch.Generator().manual_seed(seed)
        self.cases = 0
        self.case_name = ""
        #: Told each case's name as it starts (the sandbox's clock starts there).
        self.on_case: Callable[[str], None] | None = None
        #: Code the learner's function may not run (:attr:`Exercise.own`), by name, and
        #: the code of the function being graded (never forbidden: a reference is graded).
        self.forbidden: dict[Any, str] = {}
        self.graded: Any = None

    def t(self, words: Any) -> Any:
        """:class:`Words` in the grader's language; any other value as it is."""
        return words.render(self.lang) if isinstance(words, Words) else words

    @contextlib.contextmanager
    def case(self, name: str | Words) -> Iterator[None]:
        """One named case (``name`` as :meth:`t` takes it): an exception from the learner's
        code becomes a Mismatch."""
        name = self.t(name)
        self.case_name = name
        if self.on_case is not None:
            self.on_case(name)
        try:
            yield
        except Mismatch:
            raise
        except (SystemExit, KeyboardInterrupt) as e:  # the learner's exit: a failure too
            raise Mismatch(name, stopped=stop_line(e, self.lang)) from None
        except Exception as e:  # noqa: BLE001 - the learner's error, reported in one line
            err = e.error if isinstance(e, LearnerRaised) else e
            if isinstance(err, NotImplementedError):
                raise Mismatch(name, raised=text(self.lang, "ex_not_written")) from e
            raise Mismatch(name, raised=self.where(err)) from e
        self.cases += 1

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` from inside the engine: what it raises is marked as the
        learner's (:class:`LearnerRaised`), whatever the engine does with it on the way;
        a call into pdlab's own answer (:attr:`forbidden`) fails the case."""
        graded = (code_of(fn), self.graded)
        watch = {c: n for c, n in self.forbidden.items() if c not in graded}
        called: list[str] = []

        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "call" and frame.f_code in watch:
                called.append(watch[frame.f_code])

        before = sys.getprofile()
        if watch:
            sys.setprofile(profile)
        try:
            out = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - wrapped, reported by case()
            raise LearnerRaised(e) from e
        finally:
            if watch:
                sys.setprofile(before)
        if called:
            raise Mismatch(self.case_name, stopped=text(self.lang, "ex_called_own", what=called[0]))
        return out

    def forbid(self, exercise: Exercise, fn: Callable[..., Any]) -> None:
        """Forbid ``fn``, the function graded, ``exercise``'s own answer
        (:attr:`Exercise.own`)."""
        self.graded = code_of(fn)
        self.forbidden = {c: f"{c.co_filename.split('/pdlab/')[-1]}:{c.co_qualname}"
                          for c in exercise.own_code()}  # fmt: skip

    def where(self, e: BaseException) -> str:
        """``Type: message (file:line)``, the line being the last one in the learner's
        file (or the last frame at all when no file is known)."""
        frames = traceback.extract_tb(e.__traceback__)
        mine = [f for f in frames if self.source and f.filename == self.source]
        frame = (mine or frames or [None])[-1]
        at = f" ({frame.filename}:{frame.lineno})" if frame is not None else ""
        msg = str(e).strip().splitlines()
        return f"{type(e).__name__}: {msg[0] if msg else ''}"[:300] + at

    def fail(self, expected: object, got: object, mistake: str | None = None,
             evidence: str = "") -> None:  # fmt: skip
        shown = _show(self.t(expected)), _show(self.t(got))
        raise Mismatch(self.case_name, *shown, mistake, evidence)

    def pair(self, got: object, what: str | Words) -> tuple[Any, Any]:
        """``got`` as the two results a function must return (``what`` names them)."""
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            shown = f"{len(got)} values" if isinstance(got, (tuple, list)) else _show(got)
            self.fail(what, shown)
        return got[0], got[1]

    def returns(self, got: object, spec: object) -> Any:
        """``got``, unless it is not of the type ``spec`` (:func:`wrong_type`): then the
        case fails in one plain line ("returned str, expected bool"), before any value is
        compared."""
        bad = wrong_type(got, spec)
        if bad:
            where, shown, expected = bad
            key = "ex_returned_type_at" if where else "ex_returned_type"
            line = text(self.lang, key, at=where, got=shown, expected=expected)
            raise Mismatch(self.case_name, stopped=line)
        odd = odd_value(got)
        if odd:
            line = text(self.lang, "ex_returned_odd", at=odd[0] or "-", got=odd[1])
            raise Mismatch(self.case_name, stopped=line)
        return got

    def expect(self, got: object, expected: object, mistakes: dict[str, object] | None = None,
               evidence: str = "") -> None:  # fmt: skip
        """Fail unless ``got == expected``; name the first known mistake whose answer
        ``got`` equals."""
        if not _same(got, expected):
            key = next((k for k, wrong in (mistakes or {}).items() if _same(got, wrong)), None)
            self.fail(expected, got, key, evidence)


def fill(template: str, right: dict[str, str], **wrong: str) -> str:
    """A whole learner file: ``template`` with each placeholder of ``right`` written as
    ``right`` says, or as ``wrong`` does (a slip, one part written wrongly)."""
    for key, value in {**right, **wrong}.items():
        template = template.replace(key, value)
    return template


def _same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if a.shape != b.shape:
            return False
        return bool(torch.allclose(a.float(), b.float(), atol=1e-4, rtol=1e-4, equal_nan=False))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _show(x: object) -> str:
    """A value in at most a few lines: a tensor by its shape and first values."""
    if isinstance(x, torch.Tensor):
        flat = x.detach().flatten()[:4].tolist()
        vals = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in flat)
        more = ", ..." if x.numel() > 4 else ""
        return f"tensor{list(x.shape)} [{vals}{more}]"
    if isinstance(x, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in x):
        return "(" + ", ".join(_show(v) for v in x) + ")"
    text = repr(x) if not isinstance(x, str) else x
    return text if len(text) <= 240 else text[:237] + "..."


@contextlib.contextmanager
def patched(owner: object, name: str, value: object) -> Iterator[None]:
    """Put ``value`` at ``owner.name`` for the block, and put back what was there (or remove
    it) afterwards, even when the block fails: the seam through which the learner's function
    runs inside the engine."""
    missing = object()
    before = owner.__dict__.get(name, missing) if hasattr(owner, "__dict__") else missing
    setattr(owner, name, value)
    try:
        yield
    finally:
        if before is missing:
            delattr(owner, name)
        else:
            setattr(owner, name, before)


# ---- return types, checked before any value -------------------------------------------
def type_name(x: object) -> str:
    """The name a learner knows a value's type by (``bool``, ``int``, ``str``, ...)."""
    return "None" if x is None else type(x).__name__


def _fits(x: object, spec: object) -> bool:
    """Whether ``x`` has the type ``spec`` says: a type (``bool`` is never an ``int``, an
    ``int`` is a ``float`` too; the built-in types exactly, never a subclass, whose ``==``
    could say yes to anything), ``None``, a tuple of specs (a tuple or list of that many),
    a one-item list ``[spec]`` (a list of any length), or a set of specs (any of them)."""
    if isinstance(spec, (set, frozenset)):
        return any(_fits(x, s) for s in spec)
    if spec is None:
        return x is None
    if isinstance(spec, tuple):
        return type(x) in (tuple, list) and len(x) == len(spec)
    if isinstance(spec, list):
        return type(x) is list
    if spec is float:
        return type(x) in (int, float)
    if spec in (bool, int, str, dict):  # exactly: a subclass could answer == with True
        return type(x) is spec
    return isinstance(x, spec)  # type: ignore[arg-type]


def _spec_name(spec: object) -> str:
    if isinstance(spec, (set, frozenset)):
        return " | ".join(sorted(_spec_name(s) for s in spec))
    if spec is None:
        return "None"
    if isinstance(spec, tuple):
        return f"tuple of {len(spec)}"
    if isinstance(spec, list):
        return "list"
    return getattr(spec, "__name__", str(spec))


_PLAIN = (int, float, bool, str, bytes, type(None), torch.Tensor, torch.dtype)


def odd_value(x: object, where: str = "", depth: int = 0) -> tuple[str, str] | None:
    """None when ``x`` is made of plain values only (the built-in types exactly, tensors,
    lists, tuples and dicts of them, pdlab's own dataclasses), else ``(where, its type)``
    of the first that is not: a value of the learner's own class could answer ``==`` with
    yes to anything."""
    if depth > 20:
        return None
    kind = type(x)
    if kind in _PLAIN or isinstance(x, torch.Tensor):
        return None
    if kind in (list, tuple):
        for i, v in enumerate(x):  # type: ignore[arg-type]
            bad = odd_value(v, f"{where}[{i}]", depth + 1)
            if bad:
                return bad
        return None
    if kind is dict:
        for k, v in x.items():  # type: ignore[attr-defined]
            bad = odd_value(k, where, depth + 1) or odd_value(v, f"{where}[{k!r}]", depth + 1)
            if bad:
                return bad
        return None
    if dataclasses.is_dataclass(x) and kind.__module__.startswith("pdlab."):
        for f in dataclasses.fields(x):  # type: ignore[arg-type]
            bad = odd_value(getattr(x, f.name), f"{where}.{f.name}", depth + 1)
            if bad:
                return bad
        return None
    return where, kind.__name__


def wrong_type(x: object, spec: object, where: str = "") -> tuple[str, str, str] | None:
    """None when ``x`` fits ``spec`` (:func:`_fits`) all the way down, else where it does
    not: ``(where, what it is, what it should be)``, e.g. ``("[0]", "str", "bool")``."""
    if not _fits(x, spec):
        shown = f"{type_name(x)} of {len(x)}" if isinstance(x, (tuple, list)) else type_name(x)
        return where, shown, _spec_name(spec)
    if isinstance(spec, tuple):
        for i, (v, s) in enumerate(zip(x, spec)):  # type: ignore[call-overload]
            bad = wrong_type(v, s, f"{where}[{i}]")
            if bad:
                return bad
    if isinstance(spec, list) and spec:
        for i, v in enumerate(x):  # type: ignore[call-overload]
            bad = wrong_type(v, spec[0], f"{where}[{i}]")
            if bad:
                return bad
    return None


# ---- pdlab itself, unchanged by the learner's code ----------------------------------------
def fingerprint() -> dict[tuple[str, str], int]:
    """Every name bound in pdlab's modules and their classes, to the identity of what it
    is bound to: a learner's file that rebinds one (the engine's function it is compared
    with, or the grader's comparison) changes it."""
    out = {}
    for name, module in list(sys.modules.items()):
        if not (name == "pdlab" or name.startswith("pdlab.")) or module is None:
            continue
        for key, value in list(vars(module).items()):
            out[(name, key)] = id(value)
            if isinstance(value, type) and value.__module__ == name:
                for attr, member in list(vars(value).items()):
                    out[(name, f"{key}.{attr}")] = id(member)
    return out


def changed(before: dict[tuple[str, str], int]) -> list[str]:
    """The names of ``before`` now bound to something else (or gone)."""
    now = fingerprint()
    return [f"{m}.{k}" for (m, k), v in before.items() if now.get((m, k)) != v]
