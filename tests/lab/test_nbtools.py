"""Tests of the notebook test machinery (tests/nbtools.py), on throwaway notebooks, without a
browser: the browser helpers are exercised by the real browser run of every notebook
(tests/lab/test_browser_notebooks.py), which is where they matter."""

import json
import os
import sys
import urllib.request
from pathlib import Path

import jupytext
import nbformat
import nbtools
import psutil
import pytest
from conftest import cmdline
from nbtools import (
    NotebookExecutionError,
    check_in_sync,
    execute_notebook,
    running_jupyterlab,
)

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def make_nb(path: Path, *cells) -> Path:
    """Write an .ipynb; each cell is code, or ("markdown", text)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = KERNELSPEC
    for c in cells:
        if isinstance(c, tuple):
            nb.cells.append(nbformat.v4.new_markdown_cell(c[1]))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(c))
    nbformat.write(nb, path)
    return path


def _kernels():
    return [p for p in psutil.Process().children(recursive=True) if "ipykernel" in cmdline(p)]


def test_execute_notebook_runs_in_venv_kernel(tmp_path):
    p = make_nb(
        tmp_path / "ok.ipynb",
        ("markdown", "# ok"),
        "import os, sys\nprint(sys.prefix)\nprint(os.getcwd())",
        "x = 6 * 7\nx",
    )
    nb, seconds = execute_notebook(p, timeout=120)
    out = nb.cells[1].outputs[0]["text"].split()
    assert os.path.realpath(out[0]) == os.path.realpath(sys.prefix)
    assert os.path.realpath(out[1]) == os.path.realpath(tmp_path)
    assert nb.cells[1].execution_count == 1 and nb.cells[2].execution_count == 2
    assert nb.cells[2].outputs[0]["data"]["text/plain"] == "42"
    assert 0 < seconds < 120
    psutil.wait_procs(_kernels(), timeout=5)
    assert not _kernels()


def test_execute_notebook_raises_with_failing_cell(tmp_path):
    p = make_nb(
        tmp_path / "bad.ipynb", "a = 1", "def f():\n    return 1 / 0\n\nf()", "print('never')"
    )
    with pytest.raises(NotebookExecutionError) as ei:
        execute_notebook(p, timeout=120)
    err = ei.value
    assert err.index == 1 and err.ename == "ZeroDivisionError"
    msg = str(err)
    assert "return 1 / 0" in msg and "ZeroDivisionError" in msg and "bad.ipynb" in msg
    assert "\x1b[" not in msg
    psutil.wait_procs(_kernels(), timeout=5)
    assert not _kernels()


def test_check_in_sync(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Title\n\nSome *text*."),
        nbformat.v4.new_code_cell("import math\nx = math.pi"),
        nbformat.v4.new_code_cell("x * 2"),
    ]
    ipynb = tmp_path / "pair.ipynb"
    jupytext.write(nb, ipynb)
    jupytext.write(nb, tmp_path / "pair.py", fmt="py:percent")
    assert check_in_sync(ipynb) == []

    # outputs and metadata do not matter
    nb2 = jupytext.read(ipynb)
    nb2.cells[2].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "6.28"})]
    nb2.cells[2].execution_count = 3
    nb2.cells[1].metadata["tags"] = ["hide"]
    jupytext.write(nb2, ipynb)
    assert check_in_sync(ipynb) == []

    # a changed source is reported
    py = tmp_path / "pair.py"
    py.write_text(py.read_text().replace("x * 2", "x * 3"))
    diffs = check_in_sync(ipynb)
    assert len(diffs) == 1 and "cell 2" in diffs[0] and "x * 3" in diffs[0]

    # a missing cell and a changed cell type are reported
    nb3 = jupytext.read(ipynb)
    nb3.cells = [nbformat.v4.new_code_cell("# Title")] + nb3.cells[1:2]
    jupytext.write(nb3, py, fmt="py:percent")
    diffs = check_in_sync(ipynb)
    assert any("3 cells" in d and "2" in d for d in diffs)
    assert any("cell 0: type markdown" in d for d in diffs)

    assert check_in_sync(tmp_path / "nope.ipynb", tmp_path / "nope.py") == [
        f"{tmp_path / 'nope.py'} is missing"
    ]


def _servers_for(root: Path):
    return [
        p
        for p in psutil.process_iter(["cmdline"])
        if f"--ServerApp.root_dir={root}" in (p.info["cmdline"] or [])
    ]


@pytest.mark.slow  # a JupyterLab server and a kernel, no browser: the cleanup is checked here
def test_running_jupyterlab_starts_and_cleans_up(tmp_path):
    root = tmp_path.resolve()
    with running_jupyterlab(root) as (base_url, token):
        assert base_url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(f"{base_url}/api/status?token={token}") as r:
            assert r.status == 200
        req = urllib.request.Request(
            f"{base_url}/api/kernels",
            method="POST",
            data=json.dumps({"name": "python3"}).encode(),
            headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req) as r:
            assert r.status == 201
        (server,) = _servers_for(root)
        state_dir = Path(server.environ()["JUPYTER_RUNTIME_DIR"]).parent
        assert state_dir.is_dir()
        family = [server, *server.children(recursive=True)]
        assert any("ipykernel" in cmdline(p) for p in family[1:])
        # without the token: refused
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"{base_url}/api/kernels")
    gone, alive = psutil.wait_procs(family, timeout=5)
    assert not alive, f"leaked: {alive}"
    assert not state_dir.exists()
    assert not _servers_for(root)


def _fake_exe(path: Path) -> str:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_find_chromium_env_then_path_then_apps(tmp_path):
    exe = _fake_exe(tmp_path / "my-chrome")
    on_path = {"google-chrome": "/opt/google/chrome/google-chrome"}
    which = on_path.get
    # the env var wins, as a path or as a name on PATH
    assert nbtools.find_chromium({"PDLAB_CHROMIUM": exe}, which, ()) == exe
    env = {"PDLAB_CHROMIUM": "google-chrome"}
    assert nbtools.find_chromium(env, which, ()) == on_path["google-chrome"]
    # else PATH, Debian's name first
    both = {**on_path, "chromium": "/usr/bin/chromium"}
    assert nbtools.find_chromium({}, both.get, ()) == "/usr/bin/chromium"
    assert nbtools.find_chromium({}, which, ()) == on_path["google-chrome"]
    # else a macOS app bundle's binary; else none
    assert nbtools.find_chromium({}, {}.get, (str(tmp_path / "none"), exe)) == exe
    assert nbtools.find_chromium({}, {}.get, (str(tmp_path / "none"),)) is None


def test_find_chromium_rejects_a_bad_env_var(tmp_path):
    bad = str(tmp_path / "no-such-chrome")
    with pytest.raises(ValueError, match="PDLAB_CHROMIUM='.*no-such-chrome' is not an exec"):
        nbtools.find_chromium({"PDLAB_CHROMIUM": bad}, {}.get, ())


def test_missing_chromium_skips_or_fails(monkeypatch, tmp_path):
    monkeypatch.setattr(nbtools, "find_chromium", lambda: None)
    monkeypatch.delenv("PDLAB_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="PDLAB_CHROMIUM"):
        nbtools.require_chromium()
    monkeypatch.setenv("PDLAB_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="PDLAB_REQUIRE_BROWSER"):
        nbtools.require_chromium()


@pytest.mark.parametrize(
    ("text", "value", "ok"),
    [
        ("40", 40, True),
        ("1,024", 1024, True),
        ("0.30", 0.3, True),
        ("41", 40, False),
        ("prompt", "prompt", True),
        ("prompt", "query_len", False),
        ("n/a", 3, False),
    ],
)
def test_slider_readout_matching(text, value, ok):
    assert nbtools._readout_matches(text, value) is ok


def test_selectors_and_labels():
    assert nbtools._css("pdlab-route") == ".pdlab-route"
    assert nbtools._css(".a .b") == ".a .b" and nbtools._css("#x") == "#x"
    assert nbtools._label_re("rule").match("  rule ") and not nbtools._label_re("rule").match(
        "rules"
    )
    assert nbtools._is_number("3.5") and not nbtools._is_number(True)
    assert nbtools._is_number(7) and not nbtools._is_number("seven")
    assert nbtools.strip_ansi("\x1b[31mred\x1b[0m") == "red"
