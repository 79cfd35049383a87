"""Random cases, compared with the engine's own function, the first failure shrunk to the
smallest case that still fails; and which known mistake, if any, the learner's answers fit
(:func:`consistent`, :func:`diagnose_by`): what graders share beside :mod:`.base`."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pdlab.exercises.base import Grader, Words, _same, _show, wrong_type


def consistent(mistakes: dict[str, object], answers: list[tuple[object, dict]]) -> dict:
    """The ``mistakes`` whose answers equal the learner's in every case of ``answers``
    (``(got, that case's mistakes)`` pairs; a case without the key does not count against
    it). Two mistakes may give the same wrong answer in one case, and a different slip may
    too: the other cases tell which one, if any, the learner made."""

    def fits(key: str) -> bool:
        return all(key not in wrong or _same(got, wrong[key]) for got, wrong in answers)

    return {k: v for k, v in mistakes.items() if fits(k)}


@dataclass
class Draw:
    """A random case space: ``draw(rng)`` makes one case (a dict of the function's
    arguments and whatever the case needs), ``shrink(case)`` smaller cases to try in its
    place, ``name(case)`` its features in words, ``shown(case)`` its values in one line."""

    draw: Callable[[random.Random], dict]
    shrink: Callable[[dict], list[dict]]
    name: Callable[[dict], Words]
    shown: Callable[[dict], str]


def random_cases(g: Grader, space: Draw, learner: Callable[[dict], Any],
                 engine: Callable[[dict], Any], count: int = 40,
                 diagnose: Callable[[dict, Any, Callable[[dict], Any]], str | None] | None = None,
                 spec: object = object,
                 same: Callable[[Any, Any], bool] | None = None) -> None:  # fmt: skip
    """``count`` cases drawn from ``space`` with the grader's seed (``--seed`` replays
    them), each run through ``learner`` (the learner's function, its answer type-checked
    against ``spec``) and ``engine`` (the engine's own) and compared (``same``, else
    equality). The first that differs is shrunk to the smallest case that still differs and
    failed, named by its features, with the mistake ``diagnose(case, got, ask)`` names
    (``ask(other)``: the learner's answer to another case, or the exception it raised, to
    tell apart mistakes that answer this case alike)."""
    equal = same or _same
    for i in range(count):
        case = space.draw(g.rng)
        with g.case(Words("ex_random_case", i=i + 1, count=count, name=space.name(case))):
            got = g.returns(learner(case), spec)
            if equal(got, engine(case)):
                continue
            case, got = _shrink(g, space, case, got, learner, engine, equal, spec)
            g.case_name = g.t(Words("ex_random_case_shrunk", i=i + 1, name=space.name(case)))
            mistake = diagnose(case, got, lambda c: ask(learner, c)) if diagnose else None
            want = _show(engine(case))
            g.fail(Words("ex_random_for", want=want, case=space.shown(case)), got, mistake)


def diagnose_by(
    variants: dict[str, Callable[[dict], Any]],
    probes: Callable[[dict], list[dict]],
    same: Callable[[Any, Any], bool] | None = None,
) -> Callable[[dict, Any, Callable[[dict], Any]], str | None]:
    """A ``diagnose`` for :func:`random_cases`: the first mistake of ``variants`` (``{key:
    what that mistake answers a case}``) that answers the failing case as the learner did
    and agrees with the learner on every case of ``probes(case)`` too (two mistakes may
    answer one case alike; the cases around it tell them apart)."""
    equal = same or _same

    def answers(key: str, case: dict, got: Any) -> bool:
        try:
            return equal(got, variants[key](case))
        except Exception:  # noqa: BLE001 - a mistake that has no answer here is not it
            return False

    def diagnose(case: dict, got: Any, ask: Callable[[dict], Any]) -> str | None:
        keys = [k for k in variants if answers(k, case, got)]
        for probe in probes(case):
            if not keys:
                break
            answer = ask(probe)
            keys = [k for k in keys if not isinstance(answer, Exception)
                    and answers(k, probe, answer)]  # fmt: skip
        return keys[0] if keys else None

    return diagnose


def ask(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or the exception it raised (an answer to compare, or to raise again
    in its case)."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - an answer, compared or raised by the caller
        return e


def _shrink(g: Grader, space: Draw, case: dict, got: Any, learner: Callable, engine: Callable,
            equal: Callable, spec: object) -> tuple[dict, Any]:  # fmt: skip
    """The smallest case that still differs, by greedy steps through ``space.shrink``; a
    smaller case where the learner raises or returns a wrong type is not taken (the
    failure shown stays the one found)."""
    for _ in range(200):
        for smaller in space.shrink(case):
            try:
                mine = learner(smaller)
            except Exception:  # noqa: BLE001 - a shrink step, not the verdict
                continue
            if wrong_type(mine, spec) is None and not equal(mine, engine(smaller)):
                case, got = smaller, mine
                break
        else:
            return case, got
    return case, got
