"""The sandbox a check runs in: the learner's code runs in a child process, never in the
learner's own shell or notebook kernel, with a clock on every case.

One child per check (not per case), forked from a ``forkserver`` that imported torch and
every exercise once (a fork of a process with no threads yet, so torch is safe there); the
child loads the learner's file itself, so whatever the file does when imported happens
there too. It reports each case as it starts and the verdict at the end, over a pipe. What
can go wrong becomes one line, in the learner's language:

* a case that runs longer than its clock: the child is killed, the case and the limit named;
* ``sys.exit``, ``os._exit``, ``raise SystemExit`` or ``KeyboardInterrupt`` in the learner's
  code: the case is failed, never passed, and ``check`` goes on to report it (a real Ctrl-C
  reaches only the parent: the child ignores SIGINT, and the parent stops it);
* a function that cannot reach the child (defined in a notebook cell, or inside another
  function) is graded in-process as before, without a clock.

No upstream file: pdlab's workshop mode.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import pickle
import signal
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pdlab.catalog import text

#: Seconds each case may run in the child before it is stopped (an endless loop): the
#: slowest reference case takes under 3 s on a busy 2-core machine.
CASE_LIMIT_S = 60.0

_FIELDS = ("case", "expected", "got", "mistake", "evidence", "raised", "stopped")


@dataclass
class Outcome:
    """What a sandboxed check came to: the cases passed, the first failure's fields (a
    :class:`pdlab.exercises.base.Mismatch`'s) or None, and a file the child could not
    load (its one-line message) or None."""

    cases: int
    failure: dict[str, Any] | None = None
    file_error: str | None = None


def reachable(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` can be named in a child (a module's own function, not ``__main__``'s
    or a closure): pickle sends functions by module and name."""
    local = "<locals>" in getattr(fn, "__qualname__", "<locals>")
    if local or getattr(fn, "__module__", None) in (None, "__main__", "__mp_main__"):
        return False
    try:
        pickle.dumps(fn)
    except Exception:  # noqa: BLE001 - any failure means it cannot travel
        return False
    return True


def run(n: int, target: str | Callable[..., Any], seed: int, lang: str, source: str | None,
        limit_s: float = CASE_LIMIT_S) -> Outcome:  # fmt: skip
    """Grade ``target`` (a file path, or a function :func:`reachable` says can travel) for
    exercise ``n`` in a child process, each case under ``limit_s`` seconds."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["pdlab.exercises.sandbox_preload"])
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, n, target, seed, lang, source), daemon=True)
    with _no_main():
        child.start()
    send.close()
    case, cases = "", 0
    try:
        while True:
            if not receive.poll(limit_s):
                child.kill()
                where = case or text(lang, "ex_loading_file")
                return Outcome(cases, _stopped(where, text(lang, "ex_too_slow", limit=limit_s)))
            try:
                kind, value = receive.recv()
            except (EOFError, OSError):
                child.join(5)
                where = case or text(lang, "ex_loading_file")
                line = text(lang, "ex_process_ended", code=child.exitcode)
                return Outcome(cases, _stopped(where, line))
            if kind == "case":
                case, cases = value
            elif kind == "done":
                return Outcome(**value)
    except KeyboardInterrupt:  # the learner's Ctrl-C: stop the child with the parent
        child.kill()
        raise
    finally:
        receive.close()
        child.join(5)
        if child.is_alive():
            child.kill()


@contextlib.contextmanager
def _no_main() -> Iterator[None]:
    """Hide the caller's ``__main__`` while the child is launched: multiprocessing would
    otherwise run the caller's script (or a notebook's kernel launcher) again in the child
    to rebuild it, and the child needs none of it."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def untouched(before: dict, g: Any, case: str) -> None:
    """Fail ``case`` when the learner's code rebound a name of pdlab's (the engine's own
    function, the grader's comparison): the check would compare the learner with itself."""
    from pdlab.exercises.base import Mismatch, changed

    names = changed(before)
    if names:
        raise Mismatch(case, stopped=text(g.lang, "ex_changed_pdlab", names=", ".join(names[:3])))


def _stopped(case: str, line: str) -> dict[str, Any]:
    return {"case": case, "stopped": line}


def _child(send: Any, n: int, target: Any, seed: int, lang: str, source: str | None) -> None:
    """The child: load, grade, report; a real Ctrl-C is the parent's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch

    import pdlab.exercises as ex
    from pdlab.exercises.base import Grader, Mismatch, fingerprint, stop_line
    from pdlab.exercises.loader import LearnerFileError, load_function

    # The graders' tensors are tiny: more than one torch thread only adds contention.
    torch.set_num_threads(1)
    exercise = ex.get(n)
    g = Grader(seed, lang, source)
    g.on_case = lambda name: send.send(("case", (name, g.cases)))
    outcome = Outcome(0)
    before = fingerprint()
    try:
        fn = target
        if isinstance(target, str):
            fn = load_function(target, exercise.function, lang, n)
        untouched(before, g, text(lang, "ex_loading_file"))
        g.forbid(exercise, fn)
        exercise.grade(fn, g)
        untouched(before, g, g.case_name)
    except LearnerFileError as e:
        outcome.file_error = str(e)
    except Mismatch as m:
        outcome.failure = {k: getattr(m, k) for k in _FIELDS}
    except (SystemExit, KeyboardInterrupt) as e:  # raised while the file was imported
        outcome.failure = _stopped(text(lang, "ex_loading_file"), stop_line(e, lang))
    outcome.cases = g.cases
    send.send(("done", outcome.__dict__))
    send.close()
    sys.stdout.flush()
