"""Loading the learner's file: imported by path (``importlib``), under a name of its own, so
that it never shadows a module and its import leaves nothing behind in ``sys.modules``.

Whatever is wrong with the file, a syntax error, an exception while importing, a function
missing or misspelt, is one line naming the file (and the line, where there is one):
:class:`LearnerFileError`, which the CLI prints as it is.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pdlab.catalog import text

_count = itertools.count()


class LearnerFileError(Exception):
    """The learner's file cannot be graded; the message is the whole story, in one line."""

    one_line = True


def load_function(path: str | Path, function: str, lang: str = "en",
                  n: int | None = None) -> Callable[..., Any]:  # fmt: skip
    """``function`` from the Python file at ``path`` (the file of exercise ``n``)."""
    path = Path(path)
    check_file(path, lang, n)
    name = f"pdlab_learner_{next(_count)}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LearnerFileError(text(lang, "ex_not_py", path=path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and typing look the module up while it runs
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        line = e.lineno if e.lineno is not None else "?"
        raise LearnerFileError(text(lang, "ex_syntax", path=path, line=line, msg=e.msg)) from None
    except Exception as e:  # noqa: BLE001 - the learner's error, reported in one line
        raise LearnerFileError(
            text(lang, "ex_import_error", path=path, error=_at(e, str(path.resolve())))
        ) from None
    finally:
        sys.modules.pop(name, None)
    fn = getattr(module, function, None)
    if fn is None:
        raise LearnerFileError(text(lang, "ex_missing_function", path=path, function=function))
    if not callable(fn):
        raise LearnerFileError(text(lang, "ex_not_callable", path=path, function=function))
    return fn


def check_file(path: Path, lang: str, n: int | None) -> None:
    """A one-line :class:`LearnerFileError` unless ``path`` is a Python file that exists:
    what is wrong, and the command that writes exercise ``n``'s file."""
    start = text(lang, "ex_start_writes", n=n) if n is not None else ""
    if path.is_dir() or (path.exists() and path.suffix != ".py"):
        raise LearnerFileError(text(lang, "ex_not_py", path=path) + start)
    if not path.is_file():
        raise LearnerFileError(text(lang, "ex_no_file", path=path) + start)


def _at(e: BaseException, source: str) -> str:
    """``Type: message (line N)`` for an exception raised while importing ``source``."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == source]
    msg = str(e).strip().splitlines()
    at = f" (line {frames[-1].lineno})" if frames else ""
    return f"{type(e).__name__}: {msg[0] if msg else ''}"[:300] + at
