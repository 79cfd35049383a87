"""Ctrl-C: a real SIGINT to a real ``pdlab pd --procs 2``, sent as a terminal sends it (to
the whole process group), at several moments, each reached by waiting on what the process
tree shows (torch loading in the launcher, its children's start, torch loading in
both, P listening on its port), never by a sleep.
Every time: exactly one line on stderr, exit 130, and no process left behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pdlab.disagg.group import free_port

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def _children(pid: int) -> list[int]:
    """The live children of ``pid``, read from /proc."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(d.name))
    return out


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _until(what, proc: subprocess.Popen, timeout: float = 240.0) -> None:
    """Wait for the event ``what()`` (checked every few ms), while ``proc`` runs."""
    deadline = time.monotonic() + timeout
    while not what():
        assert proc.poll() is None, "pdlab pd ended before the moment came"
        assert time.monotonic() < deadline, f"the moment never came ({_children(proc.pid)})"
        time.sleep(0.01)


def _loads_torch(pid: int) -> bool:
    """``pid`` has begun importing torch (its shared library is mapped)."""
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _interrupt(cmd: list[str], tmp_path: Path, moment, kids_of, signal_group: bool = True):
    """Start ``cmd`` in its own process group (a terminal's foreground job), wait for
    ``moment(proc)``, send SIGINT (to the group, as Ctrl-C does, or to the command alone),
    and return ``(proc, out, err, kids)``, ``kids`` being ``kids_of(proc)`` at that moment.
    Whatever happens, nothing of the group outlives the test."""
    proc = subprocess.Popen(
        cmd,
        env={**os.environ, "PDLAB_GPU": "cpu"},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _until(lambda: moment(proc), proc)
        kids = kids_of(proc)
        if signal_group:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return proc, out, err, kids


def _none_left(kids: list[int], pgid: int) -> None:
    deadline = time.monotonic() + 10  # the parent has reaped them; allow the kernel a moment
    while any(Path(f"/proc/{k}").exists() for k in kids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [k for k in kids if Path(f"/proc/{k}").exists()], "a child outlived it"
    assert not _group_alive(pgid), "a process of its group is still running"


MOMENTS = {
    # the launcher itself is importing torch, before any child exists
    "parent_imports_torch": lambda proc, port: _loads_torch(proc.pid),
    # both children are importing torch
    "children_import_torch": lambda proc, port: sum(map(_loads_torch, _children(proc.pid))) >= 2,
    # the launcher has spawned P and D, which are still importing torch
    "children_start": lambda proc, port: len(_children(proc.pid)) >= 2,
    # P has joined the process group's store: the engines are being built
    "p_listens": lambda proc, port: _listening(port),
}


@pytest.mark.slow
@pytest.mark.parametrize("moment", sorted(MOMENTS))
def test_ctrl_c_is_one_line_exit_130_and_no_orphan(moment, tmp_path) -> None:
    port = free_port()
    cmd = [sys.executable, "-m", "pdlab.cli", "pd", "--procs", "2", "--port", str(port)]
    cmd += ["--max-tokens", "512", "--timeout", "200"]
    proc, out, err, kids = _interrupt(
        cmd, tmp_path, lambda p: MOMENTS[moment](p, port), lambda p: _children(p.pid)
    )
    assert proc.returncode == 130, err
    assert err == "pdlab pd: interrupted\n", err
    assert out == ""
    _none_left(kids, proc.pid)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.slow
@pytest.mark.parametrize("to", ["group", "parent"])
def test_ctrl_c_during_the_tour_stops_its_simulation_child(to, tmp_path) -> None:
    """The tour runs chapter 7's grids in a child (``pdlab/sim/background.py``): a SIGINT
    to the group (Ctrl-C) or to the tour alone while it runs is one line, exit 130, and
    leaves no process."""
    cmd = [sys.executable, "-m", "pdlab.cli", "tour", "--chapter", "7"]

    def sims(proc) -> list[int]:
        return [k for k in _children(proc.pid) if "pdlab.sim.background" in _cmdline(k)]

    proc, _, err, kids = _interrupt(
        cmd, tmp_path, lambda p: bool(sims(p)), sims, signal_group=to == "group"
    )
    assert proc.returncode == 130, err
    assert err == "pdlab tour: interrupted\n", err
    _none_left(kids, proc.pid)
