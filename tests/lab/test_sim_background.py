"""``pdlab/sim/background.py``: the simulator's grids in a child process give the rows a
run in this process gives, and every way the child can fail falls back to this process."""

from __future__ import annotations

import os
import sys

import pytest

from pdlab.sim.background import BackgroundGrids, Grid
from pdlab.sim.simulator import SimConfig

SMALL = (
    Grid(SimConfig(batch_size=4, duration_s=0.05, arrival_rate=200.0, seed=5)),
    Grid(
        SimConfig(num_speculative_tokens=2, batch_size=3, duration_s=0.05, prompt_dist="uniform"),
        profile="B200",
        gpu="b200",
        designs=("recompute", "hidden_state"),
        routings=("pcp", "v1"),
    ),
)


def _here() -> list:
    return [g.run() for g in SMALL]


def test_the_child_gives_the_rows_this_process_gives() -> None:
    rows = BackgroundGrids(SMALL).rows()
    assert rows == _here()
    assert [len(r) for r in rows] == [16, 4]


@pytest.mark.parametrize(
    "command",
    [
        ("-c", "import sys; sys.stdin.read(); print('not json')"),  # a reply that won't parse
        ("-c", "import sys; sys.stdin.read(); print('[[]]')"),  # the wrong number of grids
        ("-c", "import sys; sys.exit(3)"),  # a crash
        ("-m", "pdlab.no_such_module"),  # pdlab not importable as asked
    ],
)
def test_a_failing_child_falls_back_to_this_process(monkeypatch, command) -> None:
    monkeypatch.setattr(BackgroundGrids, "command", command)
    assert BackgroundGrids(SMALL).rows() == _here()


def test_no_interpreter_falls_back_to_this_process(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    assert BackgroundGrids(SMALL).rows() == _here()


def test_a_child_of_another_pdlab_answers_nothing(monkeypatch, tmp_path) -> None:
    """The child refuses a request from another checkout's pdlab (its rows could differ)."""
    import json
    import subprocess

    request = json.dumps({"package": str(tmp_path), "grids": [SMALL[0].to_json()]})
    out = subprocess.run(
        [sys.executable, "-m", "pdlab.sim.background"],
        input=request,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (out.returncode, out.stdout) == (1, "")


def test_close_stops_a_running_child(monkeypatch) -> None:
    monkeypatch.setattr(BackgroundGrids, "command", ("-c", "import time; time.sleep(600)"))
    b = BackgroundGrids(SMALL)
    pid = b._proc.pid
    b.close()
    with pytest.raises(ProcessLookupError):  # killed and reaped: no such process
        os.kill(pid, 0)
    assert b.rows() == _here()  # nothing left to read: computed here


def test_a_grid_goes_through_json_whole() -> None:
    for g in SMALL:
        assert Grid.from_json(g.to_json()) == g


def test_a_tour_that_fails_before_chapter_7_leaves_no_child(capsys) -> None:
    """The CLI starts chapter 7's grids before torch loads; a tour that then fails (an
    empty prompt) stops them: no child, running or a zombie, is left."""
    import psutil

    from pdlab.cli import main
    from pdlab.ui import tour_sims

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    tour_sims._SIM_ROWS.clear()  # as in a fresh process: the grids are started
    with pytest.raises(SystemExit) as e:
        main(["tour", "--prompt", ""])
    assert e.value.code == 2 and "--prompt" in capsys.readouterr().err
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert left == [] and tour_sims._STARTED == []
