"""Progress, kept per working folder in a small JSON file there (``.pdlab-exercises.json``):
which exercises were started and passed once, the result of each one's last check (so a
file that passed and now fails says so), how many hints each has used, and the learner's
language (``start --lang zh`` keeps it, so a plain ``check`` grades in Chinese). A file that is
not valid JSON, or not this shape, is set aside as ``.pdlab-exercises.json.bad`` and a fresh
one started, so a learner is never stuck on a damaged file."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

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


def progress_path(folder: str | Path) -> Path:
    return Path(folder) / FILE_NAME


def load(folder: str | Path) -> Progress:
    path = progress_path(folder)
    if not path.exists():
        return Progress()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        p = Progress(
            started=[int(x) for x in data.get("started", [])],
            passed=[int(x) for x in data.get("passed", [])],
            hints={str(k): int(v) for k, v in data.get("hints", {}).items()},
            last={str(k): bool(v) for k, v in data.get("last", {}).items()},
            lang=str(data.get("lang", "")),
        )
        if p.lang not in ("", "en", "zh"):
            raise ValueError(p.lang)
    except (ValueError, TypeError, AttributeError):
        path.replace(path.with_name(FILE_NAME + ".bad"))
        return Progress()
    return p


def save(folder: str | Path, progress: Progress) -> Path:
    path = progress_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = asdict(progress)
    data["started"], data["passed"] = sorted(set(data["started"])), sorted(set(data["passed"]))
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def update(folder: str | Path, *, started: int | None = None, passed: int | None = None,
           hint: int | None = None, checked: tuple[int, bool] | None = None,
           lang: str | None = None) -> Progress:  # fmt: skip
    """Record one event in ``folder``'s progress file and return the new state:
    ``checked`` is ``(n, passed)`` of a check (a pass is also kept in ``passed``)."""
    p = load(folder)
    if checked is not None:
        p.last[str(checked[0])] = bool(checked[1])
        if checked[1]:
            p.passed.append(checked[0])
    if lang is not None:
        p.lang = lang
    if started is not None:
        p.started.append(started)
    if passed is not None:
        p.passed.append(passed)
    if hint is not None:
        p.hints[str(hint)] = p.hints_used(hint) + 1
    save(folder, p)
    return load(folder)
