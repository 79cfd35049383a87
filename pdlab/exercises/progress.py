"""Progress, kept per working folder in a small JSON file there (``.pdlab-exercises.json``):
which exercises were started and passed once, the result of each one's last check (so a
file that passed and now fails says so), how many hints each has used, and the learner's
language (``start --lang zh`` keeps it, so a plain ``check`` grades in Chinese). A file that is
not valid JSON, or not this shape (an exercise number or a hint count that is not a whole
number >= 0, a last result that is not true or false, an unknown language), is set aside as
``.pdlab-exercises.json.bad`` with one line saying so, and a fresh one started, so a learner
is never stuck on a damaged file."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pdlab.catalog import text

FILE_NAME = ".pdlab-exercises.json"


@dataclass
class Progress:
    started: list[int] = field(default_factory=list)
    passed: list[int] = field(default_factory=list)
    hints: dict[str, int] = field(default_factory=dict)
    last: dict[str, bool] = field(default_factory=dict)
    lang: str = ""

    def last_result(self, n: int) -> bool | None:
        """Whether exercise ``n``'s last check passed (None: never checked)."""
        return self.last.get(str(n))

    def hints_used(self, n: int) -> int:
        return self.hints.get(str(n), 0)


def load(folder: str | Path, lang: str = "en") -> Progress:
    """``folder``'s progress; a damaged file is set aside (one line on stderr, in
    ``lang``) and a fresh state returned."""
    path = Path(folder) / FILE_NAME
    if not path.exists():
        return Progress()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return _set_aside(path, lang, text(lang, "ex_progress_not_json"))
    try:
        _need(data, dict)
        p = Progress(
            started=[_count(x) for x in _need(data.get("started", []), list)],
            passed=[_count(x) for x in _need(data.get("passed", []), list)],
            hints={str(k): _count(v) for k, v in _need(data.get("hints", {}), dict).items()},
            last={str(k): _need(v, bool) for k, v in _need(data.get("last", {}), dict).items()},
            lang=str(data.get("lang", "")),
        )
        if p.lang not in ("", "en", "zh"):
            raise _Damaged(p.lang)
    except _Damaged as e:
        return _set_aside(path, lang, text(lang, "ex_progress_bad_value", value=e.value))
    return p


class _Damaged(Exception):
    """A value the progress file holds that pdlab never writes there."""

    def __init__(self, value: object) -> None:
        super().__init__(repr(value))
        self.value = json.dumps(value)[:60]


def _set_aside(path: Path, lang: str, why: str) -> Progress:
    bad = path.with_name(FILE_NAME + ".bad")
    path.replace(bad)
    print(text(lang, "ex_progress_set_aside", path=path, bad=bad.name, why=why), file=sys.stderr)
    return Progress()


def _count(x: object) -> int:
    """A whole number >= 0 as JSON has it (never a bool, a float or a string)."""
    if type(x) is not int or x < 0:
        raise _Damaged(x)
    return x


def _need(x: Any, kind: type) -> Any:
    """``x``, when JSON gave it as a ``kind`` (exactly: a bool is no int)."""
    if type(x) is not kind:
        raise _Damaged(x)
    return x


def save(folder: str | Path, progress: Progress) -> None:
    path = Path(folder) / FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    data = asdict(progress)
    data["started"], data["passed"] = sorted(set(data["started"])), sorted(set(data["passed"]))
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def update(folder: str | Path, *, started: int | None = None, hint: int | None = None,
           checked: tuple[int, bool] | None = None, lang: str | None = None) -> None:  # fmt: skip
    """Record one event in ``folder``'s progress file: ``checked`` is ``(n, passed)`` of a
    check (a pass is also kept in ``passed``)."""
    p = load(folder)
    if checked is not None:
        p.last[str(checked[0])] = bool(checked[1])
        if checked[1]:
            p.passed.append(checked[0])
    if lang is not None:
        p.lang = lang
    if started is not None:
        p.started.append(started)
    if hint is not None:
        p.hints[str(hint)] = p.hints_used(hint) + 1
    save(folder, p)
