"""The sandbox a check runs in (``pdlab/exercises/sandbox.py``): a learner's endless loop,
exit, ``os._exit``, ``SystemExit`` or ``KeyboardInterrupt`` is a failed case in one line (in
either language), never a hang, a silent pass or the learner's own shell stopping; the
CLI exits non-zero for each; its suggested commands work from where they are typed."""

import textwrap

import pytest

import pdlab.exercises as ex
from pdlab.catalog import text
from pdlab.cli import main

SEED = 20
HEAD = "def _update_waiting_for_remote_kv(self, request):\n"
BODIES = {
    "loop": "    while True:\n        pass\n",
    "exit": "    import sys\n    sys.exit(0)\n",
    "os_exit": "    import os\n    os._exit(0)\n",
    "system_exit": "    raise SystemExit\n",
    "interrupt": "    raise KeyboardInterrupt\n",
}


def _write(tmp_path, name, source):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def _line(kind, lang):
    return {
        "loop": text(lang, "ex_too_slow", limit=2.0),
        "exit": text(lang, "ex_called_exit", code=0),
        "os_exit": text(lang, "ex_process_ended", code=0),
        "system_exit": text(lang, "ex_called_exit", code=None),
        "interrupt": text(lang, "ex_raised_interrupt"),
    }[kind]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("kind", sorted(BODIES))
def test_learner_hang_or_exit_is_one_failed_case(kind, lang, tmp_path):
    path = _write(tmp_path, "mine.py", HEAD + BODIES[kind])
    r = ex.check(3, path, lang, SEED, quiet=True, case_limit_s=2.0)
    assert not r.passed and r.cases == 0
    assert r.failure.case  # the case that was running is named
    assert r.failure.stopped == _line(kind, lang)
    assert "".join(r.failure.stopped.split()) in "".join(str(r).split())


def test_exit_while_the_file_is_imported_is_one_line(tmp_path):
    path = _write(tmp_path, "mine.py", "import sys\nsys.exit(3)\n")
    r = ex.check(3, path, seed=SEED, quiet=True)
    assert not r.passed
    assert r.failure.case == text("en", "ex_loading_file")
    assert r.failure.stopped == text("en", "ex_called_exit", code=3)


def test_loop_while_the_file_is_imported_is_stopped_too(tmp_path):
    path = _write(tmp_path, "mine.py", "while True:\n    pass\n")
    r = ex.check(3, path, seed=SEED, quiet=True, case_limit_s=2.0)
    assert not r.passed and r.failure.case == text("en", "ex_loading_file")


def test_cli_exits_non_zero_when_the_learner_exits(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["exercises", "start", "3", "work"]) == 0
    said = capsys.readouterr().out
    command = said.split("run: ")[1].split()  # the suggested command, typed here
    assert command[:4] == ["pdlab", "exercises", "check", "3"]
    (tmp_path / "work" / "ex03_remote_kv.py").write_text(HEAD + BODIES["os_exit"])
    assert main(command[1:] + ["--seed", "5"]) == 1
    out = capsys.readouterr().out
    assert "os._exit" in out
    replay = out.split("Replay these cases with: ")[1].split()
    assert replay[:5] == ["pdlab", "exercises", "check", "3", "work/ex03_remote_kv.py"]
    assert main(replay[1:]) == 1  # the replay line works from here too
    assert "seed 5" in capsys.readouterr().out


def test_a_function_from_a_module_is_graded_in_the_sandbox_and_a_notebook_one_here():
    from pdlab.exercises import sandbox

    assert sandbox.reachable(ex.reference(5))

    def local(*a):
        return a

    assert not sandbox.reachable(local)
    r = ex.check(5, local, seed=SEED, quiet=True)  # in-process, still graded
    assert not r.passed


GAMES = {  # a file that hands the question back to the engine it is compared with
    "delegates": "from pdlab.engine.core.sched.scheduler import Scheduler\n\n\n"
    "def _pad_spec_decode(self, *a):\n    return Scheduler._pad_spec_decode(self, *a)\n",
    "imports_the_solution": "from pdlab.exercises.solutions.ex14_spec_pad import "
    "_pad_spec_decode as theirs\n\n\ndef _pad_spec_decode(self, *a):\n"
    "    return theirs(self, *a)\n",
    "patches_the_engine": "import pdlab.engine.core.sched.scheduler as s\n\n\n"
    "def _pad_spec_decode(self, n, *a):\n    return n\n\n\n"
    "s.Scheduler._pad_spec_decode = _pad_spec_decode\n",
    "patches_the_grader": "import pdlab.exercises.base as b\n\nb._same = lambda x, y: True\n\n\n"
    "def _pad_spec_decode(self, n, *a):\n    return n\n",
}


@pytest.mark.parametrize("game", sorted(GAMES))
def test_a_file_that_games_the_comparison_fails_in_one_line(game, tmp_path):
    r = ex.check(14, _write(tmp_path, "mine.py", GAMES[game]), "zh", SEED, quiet=True)
    assert not r.passed and r.cases == 0
    own, changed = text("zh", "ex_called_own", what="X"), text("zh", "ex_changed_pdlab", names="X")
    said = r.failure.stopped
    prefix = (changed if game.startswith("patches") else own).split("X")[0]
    assert said.startswith(prefix), said
