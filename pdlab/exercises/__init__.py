"""Workshop mode: graded exercises along the prefill/decode path, in English and Chinese.

Each exercise gives the learner a stub to write (5-40 lines) and grades it by running it
inside the real system wherever that means something: the learner's
``_update_waiting_for_remote_kv`` runs in D's scheduler of a P/D pair, their
``split_decodes_and_prefills`` in the MLA builder, their ``merge_attn_states`` in
``forward_mha``. The same from a terminal (``pdlab exercises``, ``pdlab/cli/exercises.py``)
and from a notebook::

    import pdlab.exercises as ex
    ex.check(3, _update_waiting_for_remote_kv)          # a function
    ex.check(3, "ex03_remote_kv.py", lang="zh")         # or a file

The exercises are one module each (``exNN_*.py``), their stubs in ``stubs/`` and reference
solutions in ``solutions/`` (both languages in one source: :mod:`pdlab.exercises.bilingual`).
``docs/workshop.md`` is the instructor's agenda.
"""

from __future__ import annotations

import importlib
import importlib.resources
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from pdlab.catalog import check_lang, text
from pdlab.errors import PdlabTypeError, PdlabValueError, Phrase, invalid
from pdlab.exercises import progress, sandbox
from pdlab.exercises.base import Exercise, Grader, Mismatch, Result, fingerprint
from pdlab.exercises.bilingual import read
from pdlab.exercises.loader import LearnerFileError, check_file
from pdlab.exercises.wrap import reflow, wrap80

_MODULES = (
    "ex01_slot_mapping", "ex02_computed_blocks", "ex03_remote_kv", "ex04_runner_v2",
    "ex05_split", "ex06_merge", "ex07_absorb", "ex08_decode_kernel", "ex09_crossover",
    "ex10_quiz", "ex11_causal_mask", "ex12_designs", "ex13_batch_view", "ex14_spec_pad",
)  # fmt: skip

__all__ = ["Exercise", "LearnerFileError", "Result", "check", "exercises", "get", "hint"]


def exercises() -> list[Exercise]:
    """Every exercise, in order."""
    return [get(n) for n in range(1, len(_MODULES) + 1)]


def get(n: int) -> Exercise:
    """Exercise ``n`` (1-based)."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(_MODULES):
        raise invalid("exercise", n, Phrase("err_x_num_range", a=1, b=len(_MODULES)))
    return importlib.import_module(f"pdlab.exercises.{_MODULES[n - 1]}").EXERCISE


def stub_text(n: int, lang: str = "en") -> str:
    """The file ``start`` writes: the statement as the module docstring, then the stub,
    rendered in ``lang`` from its bilingual source (:mod:`pdlab.exercises.bilingual`)."""
    ex = get(n)
    statement = reflow(ex.statement[check_lang(lang)], 77).replace('"""', "'''")
    stub = read("stubs", ex.file_name, lang)
    return f'"""{statement}\n"""\n\n{stub}'


def solution_text(n: int, lang: str = "en") -> str:
    """The reference solution ``solution`` shows, rendered in ``lang`` from its bilingual
    source: the same code, its comments in ``lang``."""
    return read("solutions", get(n).file_name, lang)


def reference(n: int) -> Callable[..., Any]:
    """The reference solution of exercise ``n``, as a function."""
    ex = get(n)
    module = importlib.import_module(f"pdlab.exercises.solutions.{ex.slug}")
    return getattr(module, ex.function)


def start(n: int, folder: str | Path = ".", lang: str = "en", force: bool = False) -> Path:
    """Write exercise ``n``'s stub into ``folder``; never over an existing file unless
    ``force``. Returns its path (raises ``FileExistsError`` when it is kept)."""
    ex, folder = get(n), Path(folder)
    if folder.exists() and not folder.is_dir():
        raise PdlabValueError("err_start_dir_file", path=str(folder))
    path = folder / ex.file_name
    if path.exists() and not force:
        raise FileExistsError(text(lang, "ex_exists", path=path))
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(stub_text(n, lang), encoding="utf-8")
    progress.update(folder, started=n, lang=check_lang(lang))
    return path


def hint(n: int, folder: str | Path | None = None, lang: str = "en") -> str:
    """The next hint of exercise ``n`` (one more each call when ``folder`` keeps count;
    without a folder, every hint so far)."""
    ex = get(n)
    hints = ex.hints[check_lang(lang)]
    if folder is None:
        shown = len(hints)
    else:
        used = progress.load(folder, lang).hints_used(n)
        shown = min(used + 1, len(hints))
        if used < len(hints):
            progress.update(folder, hint=n)
    lines = [text(lang, "ex_hint", i=shown, total=len(hints), n=n), hints[shown - 1]]
    if shown == len(hints):
        lines.append(text(lang, "ex_no_more_hints", n=n))
    return wrap80("\n".join(lines))


def check(n: int, function: Callable[..., Any] | str | Path, lang: str = "en",
          seed: int | None = None, folder: str | Path | None = None, quiet: bool = False,
          case_limit_s: float = sandbox.CASE_LIMIT_S) -> Result:  # fmt: skip
    """Grade ``function`` (or the file at that path) for exercise ``n``; print the verdict
    (unless ``quiet``) and return it. ``seed`` replays the random cases of an earlier run;
    ``folder`` records the result in its progress file. The learner's code runs in a child
    process, each case under ``case_limit_s`` seconds (:mod:`pdlab.exercises.sandbox`); a
    function defined in a notebook cell, which no child can import, runs here."""
    ex = get(n)
    check_lang(lang)
    if isinstance(function, (str, Path)):
        check_file(Path(function), lang, n)
        source: str | None = str(Path(function).resolve())
        target: Any = source
    elif callable(function):
        source = getattr(getattr(function, "__code__", None), "co_filename", None)
        target = function if sandbox.reachable(function) else None
    else:
        allowed = Phrase("err_x_function_or_path")
        raise invalid("function", function, allowed, PdlabTypeError)
    seed = random.SystemRandom().randrange(1, 10**6) if seed is None else int(seed)
    if target is not None:
        outcome = sandbox.run(n, target, seed, lang, source, case_limit_s)
        if outcome.file_error is not None:
            raise LearnerFileError(outcome.file_error)
        cases = outcome.cases
        failure = Mismatch(**outcome.failure) if outcome.failure is not None else None
    else:
        cases, failure = _in_process(ex, function, seed, lang, source)
    result = Result(ex, failure is None, seed, lang, cases, failure)
    result.lines = wrap80("\n".join(_verdict(result, source))).splitlines()
    if folder is not None:
        progress.update(folder, checked=(n, result.passed))
    if not quiet:
        print(result)
    return result


def _in_process(ex: Exercise, function: Callable[..., Any], seed: int, lang: str,
                source: str | None) -> tuple[int, Mismatch | None]:  # fmt: skip
    """Grade here, for a function no child can import (no clock: the kernel is the
    learner's own)."""
    g = Grader(seed, lang, source)
    failure = None
    # The graders' tensors are tiny: more than one torch thread only adds contention (on a
    # busy 2-core machine, exercise 3 takes 0.4 s on one thread and 8.6 s on two).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    before = fingerprint()
    try:
        g.forbid(ex, function)
        ex.grade(function, g)
        sandbox.untouched(before, g, g.case_name)
    except Mismatch as m:
        failure = m
    finally:
        torch.set_num_threads(threads)
    return g.cases, failure


def as_typed(path: str | Path) -> str:
    """``path`` as a command typed here can name it: relative to the current folder when it
    lies inside it, else whole."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _verdict(r: Result, source: str | None) -> list[str]:
    ex, lang = r.exercise, r.lang
    file = Path(source).name if source else ex.file_name
    lines = [text(lang, "ex_checking", n=ex.number, title=ex.title[lang], file=file, seed=r.seed)]
    if r.passed:
        compare = [text(lang, "ex_compare_with", where=ex.library)] if ex.library else []
        return [*lines, text(lang, "ex_pass", cases=r.cases), *compare]
    m = r.failure
    assert m is not None
    lines.append(text(lang, "ex_fail", case=m.case, cases=r.cases))
    if m.stopped:
        lines.append("  " + m.stopped)
    elif m.raised:
        lines.append(text(lang, "ex_raised", value=m.raised))
    else:
        lines.append(text(lang, "ex_expected", value=m.expected))
        lines.append(text(lang, "ex_got", value=m.got))
    if m.mistake:
        lines.append(text(lang, "ex_looks_like", what=ex.mistakes[m.mistake][lang]))
    if m.evidence:
        lines += [text(lang, "ex_evidence"), m.evidence]
    typed = as_typed(source) if source else ex.file_name
    lines.append(text(lang, "ex_rerun", n=ex.number, file=typed, seed=r.seed))
    return lines
