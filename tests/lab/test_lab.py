"""``pdlab notebooks [DIR]`` and ``pdlab lab`` (``pdlab/tools/lab.py``): the copies, the refusals,
the
JupyterLab command line, and one real JupyterLab started the way ``make lab`` starts it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from pdlab import notebooks_dir
from pdlab.cli import main
from pdlab.disagg.group import free_port
from pdlab.tools import lab

SHIPPED = sorted(p.name for p in notebooks_dir().glob("[0-9][0-9]_*.ipynb"))


def test_pdlab_notebooks_copies_them_and_keeps_edits(tmp_path, capsys) -> None:
    dest = tmp_path / "mine"
    assert main(["notebooks", str(dest)]) == 0
    assert sorted(p.name for p in dest.iterdir()) == SHIPPED
    for name in SHIPPED:
        assert (dest / name).read_bytes() == (notebooks_dir() / name).read_bytes()
    assert f"{len(SHIPPED)} notebooks in {dest}" in capsys.readouterr().out

    assert main(["notebooks", str(dest)]) == 0  # again: identical files, nothing to do
    edited = dest / SHIPPED[1]
    edited.write_text("{}")
    with pytest.raises(SystemExit) as exc:
        main(["notebooks", str(dest)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and f"edited copies of {SHIPPED[1]}" in err and "--force" in err
    assert edited.read_text() == "{}"  # the reader's edits survive
    assert main(["notebooks", str(dest), "--force"]) == 0
    assert edited.read_bytes() == (notebooks_dir() / SHIPPED[1]).read_bytes()


def test_notebooks_and_the_lab_notes_in_chinese(tmp_path, capsys) -> None:
    from glossary_rule import violations

    dest = tmp_path / "mine"
    assert main(["notebooks", str(dest), "--lang", "zh"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    copied = sorted(p.name for p in dest.iterdir())
    assert copied == SHIPPED and str(len(copied)) in last and str(dest) in last
    assert "notebooks in" not in last and not violations(last)
    (dest / SHIPPED[0]).write_text("{}")  # an edit of the learner's
    (dest / SHIPPED[1]).unlink()  # and a notebook gone missing
    folder, notes = lab.lab_folder(dest, "zh")
    assert folder == dest and len(notes) == 2
    assert (dest / SHIPPED[1]).is_file() and (dest / SHIPPED[0]).read_text() == "{}"
    assert "1" in notes[0] and SHIPPED[0] in notes[1] and "--force" in notes[1]
    for note in notes:
        assert not violations(note), note


def test_pdlab_notebooks_refuses_a_file(tmp_path, capsys) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(SystemExit):
        main(["notebooks", str(tmp_path / "f")])
    assert "is a file; expected a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["notebooks", str(tmp_path / "f" / "below")])  # a folder inside a file
    assert f"DIR='{tmp_path / 'f' / 'below'}' cannot be written" in capsys.readouterr().err


def test_lab_command_line(tmp_path, monkeypatch) -> None:
    folder, notes = lab.lab_folder(tmp_path / "nb")  # a new folder gets the notebooks
    assert notes == [f"copied {len(SHIPPED)} notebooks into {tmp_path / 'nb'}"]
    assert sorted(p.name for p in folder.iterdir()) == SHIPPED
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    cmd = lab.lab_command(folder, port=8890, ip="0.0.0.0", notebook="05", no_browser=True)
    assert cmd[:3] == [sys.executable, "-m", "jupyterlab"]
    assert f"--ServerApp.root_dir={folder.resolve()}" in cmd
    assert {"--ServerApp.port=8890", "--ServerApp.ip=0.0.0.0", "--no-browser"} <= set(cmd)
    assert "--allow-root" in cmd  # root in a container or a workshop VM
    five = next(n for n in SHIPPED if n.startswith("05_"))
    assert cmd[-1] == str((folder / five).resolve())
    assert lab.resolve_notebook(five.removesuffix(".ipynb"), folder) == five
    assert lab.resolve_notebook(five, folder) == five
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "--allow-root" not in lab.lab_command(folder)


def test_a_number_means_the_english_notebook_and_zh_its_chinese_twin() -> None:
    folder = notebooks_dir()
    for name in SHIPPED:
        number, stem = name.split("_", 1)[0], name.removesuffix(".ipynb")
        twin = f"{stem}_zh.ipynb"
        if not stem.endswith("_zh") and twin in SHIPPED:
            assert lab.resolve_notebook(number, folder) == name
            assert lab.resolve_notebook(f"{number}_zh", folder) == twin
    # every English notebook has its twin under the same number (05_zh included)
    english = [n for n in SHIPPED if not n.removesuffix(".ipynb").endswith("_zh")]
    assert sorted(n.removesuffix(".ipynb") + "_zh.ipynb" for n in english) == sorted(
        set(SHIPPED) - set(english)
    )
    assert lab.resolve_notebook("05_zh", folder) == "05_pd_decode_side_zh.ipynb"
    # the old name of notebook 5's twin still opens it
    assert lab.resolve_notebook("06_pd_decode_side_zh", folder) == "05_pd_decode_side_zh.ipynb"
    with pytest.raises(ValueError, match="--notebook='06' matches no notebook"):
        lab.resolve_notebook("06", folder)


class FakeServer:
    """What ``pdlab lab`` starts instead of JupyterLab: records its command line and the
    signals forwarded to it; ``during_wait`` runs while pdlab waits on it."""

    def __init__(self, started, during_wait=None):
        self.started, self.during_wait, self.signals = started, during_wait, []

    def __call__(self, cmd, cwd=None):
        self.started.append(cmd)
        return self

    def poll(self):
        return None

    def send_signal(self, signum):
        self.signals.append(signum)

    def wait(self):
        if self.during_wait is not None:
            self.during_wait()
        return 0


class Started(list):
    server: FakeServer


def _lab_argv(monkeypatch, during_wait=None) -> Started:
    """Run ``pdlab lab`` with a fake JupyterLab; the command lines it started."""
    started = Started()
    started.server = FakeServer(started, during_wait)
    monkeypatch.setattr(subprocess, "Popen", started.server)
    return started


@pytest.mark.skipif(os.name != "posix", reason="SIGINT")
def test_ctrl_c_stops_the_server_then_is_one_line_and_130(tmp_path, monkeypatch, capsys):
    # Issue 42, item 6: the interrupt reaches JupyterLab (which stops its kernels), then
    # pdlab says so in one line and exits 130, as every other command does.
    started = _lab_argv(monkeypatch, lambda: os.kill(os.getpid(), signal.SIGINT))
    with pytest.raises(SystemExit) as exc:
        main(["lab", "--dir", str(tmp_path / "nb"), "--no-browser"])
    assert exc.value.code == 130 and started.server.signals == [signal.SIGTERM]
    assert capsys.readouterr().err == "pdlab lab: interrupted\n"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_lab_serves_a_working_copy_never_the_tracked_notebooks(tmp_path, monkeypatch, capsys):
    started = _lab_argv(monkeypatch)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PDLAB_LAB_DIR", raising=False)
    tracked = {p: p.read_bytes() for p in notebooks_dir().iterdir() if p.is_file()}
    main(["lab", "--no-browser", "--notebook", "05", "--lang", "zh"])
    copy = tmp_path / "pdlab-notebooks"
    root = next(a for a in started[0] if a.startswith("--ServerApp.root_dir="))
    assert root == f"--ServerApp.root_dir={copy.resolve()}"
    assert started[0][-1] == str(copy.resolve() / "05_pd_decode_side_zh.ipynb")
    # only what a learner opens: each chapter's .ipynb, both languages
    assert sorted(p.name for p in copy.iterdir()) == SHIPPED
    assert all(n.endswith(".ipynb") for n in SHIPPED) and len(SHIPPED) == 12
    out = capsys.readouterr().out
    assert re.search(rf"\b12\b.*{re.escape(str(copy))}", out) and str(copy.resolve()) in out
    assert "copied" not in out and "working copy" not in out  # --lang zh: in Chinese
    # the learner's edits survive the next start, and are named
    edited = copy / SHIPPED[0]
    edited.write_text("{}")
    (copy / SHIPPED[1]).unlink()
    main(["lab", "--no-browser"])
    assert edited.read_text() == "{}" and (copy / SHIPPED[1]).is_file()
    out = capsys.readouterr().out
    assert f"copied 1 notebooks into {copy}" in out and f"kept your edits in {SHIPPED[0]}" in out
    # PDLAB_LAB_DIR moves it; the tracked notebooks were never touched
    monkeypatch.setenv("PDLAB_LAB_DIR", str(tmp_path / "elsewhere"))
    main(["lab", "--no-browser"])
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == SHIPPED
    assert {p: p.read_bytes() for p in notebooks_dir().iterdir() if p.is_file()} == tracked


def test_lab_refuses_to_serve_the_shipped_notebooks(monkeypatch, capsys) -> None:
    started = _lab_argv(monkeypatch)
    with pytest.raises(SystemExit) as exc:
        main(["lab", "--dir", str(notebooks_dir()), "--no-browser"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and not started
    assert err.count("\n") == 1 and "JupyterLab saves into the folder it serves" in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["lab", "--notebook", "99"], "--notebook='99' matches no notebook; expected"),
        (["lab", "--port", "70000"], "--port=70000 is out of range; expected 0..65535"),
    ],
)
def test_lab_bad_options(argv, needle, capsys, tmp_path) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--dir", str(tmp_path / "nb")])
    assert exc.value.code == 2 and needle in capsys.readouterr().err
    assert not (tmp_path / "nb").exists()  # refused before anything is copied (issue 42)


def test_pdlab_notebooks_refuses_the_shipped_folder(capsys) -> None:
    # Copying the notebooks onto themselves would then advise a lab --dir that lab refuses.
    before = sorted(p.name for p in notebooks_dir().iterdir())
    with pytest.raises(SystemExit) as exc:
        main(["notebooks", str(notebooks_dir())])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1
    assert err[0].startswith("pdlab notebooks: error: DIR=") and "pick a folder of yours" in err[0]
    assert sorted(p.name for p in notebooks_dir().iterdir()) == before


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="SIGTERM")
def test_pdlab_lab_serves_the_notebooks_and_stops_on_sigterm(tmp_path) -> None:
    port = free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    env["JUPYTER_CONFIG_DIR"] = str(tmp_path / "cfg")
    cmd = [sys.executable, "-m", "pdlab", "lab", "--dir", str(tmp_path / "nb"), "--no-browser"]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port), "--ip", "127.0.0.1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # JupyterLab prints its URL, token included, once it serves.
        token = None
        for line in proc.stdout:
            m = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=(\w+)", line)
            if m:
                token = m.group(1)
                break
        assert token, "JupyterLab never printed its URL"
        # the URL can be printed just before the socket listens: retry a refused connection
        url = f"http://127.0.0.1:{port}/api/contents?token={token}"
        listing = None
        for _ in range(300):
            try:
                with urllib.request.urlopen(url, timeout=30) as r:
                    listing = r.read().decode()
                break
            except urllib.error.URLError:
                assert proc.poll() is None, "pdlab lab exited"
                time.sleep(0.2)
        assert listing is not None, "JupyterLab never answered"
        for name in SHIPPED:
            assert f'"name": "{name}"' in listing or f'"name":"{name}"' in listing
    finally:
        proc.send_signal(signal.SIGTERM)  # pdlab became the server: it stops itself
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.stdout.close()
    assert proc.returncode is not None
    with pytest.raises((urllib.error.URLError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=5)
