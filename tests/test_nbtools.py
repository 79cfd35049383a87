"""Tests of the notebook test machinery (tests/nbtools.py), on throwaway notebooks."""

import json
import os
import sys
import time
import urllib.request
from pathlib import Path

import jupytext
import nbformat
import psutil
import pytest
from nbtools import (
    NotebookExecutionError,
    check_in_sync,
    click_button,
    execute_notebook,
    lab_page,
    read_output_text,
    run_all_cells,
    running_jupyterlab,
    screenshot,
    set_checkbox,
    set_dropdown,
    set_slider,
    set_text,
    set_toggle_buttons,
    wait_for_output_text,
    widget_errors,
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
    return [
        p for p in psutil.Process().children(recursive=True) if "ipykernel" in " ".join(p.cmdline())
    ]


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
        assert any("ipykernel" in " ".join(p.cmdline()) for p in family[1:])
        # without the token: refused
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"{base_url}/api/kernels")
    gone, alive = psutil.wait_procs(family, timeout=5)
    assert not alive, f"leaked: {alive}"
    assert not state_dir.exists()
    assert not _servers_for(root)


WIDGET_NB = [
    ("markdown", "# widget demo"),
    """\
import ipywidgets as W

n = W.IntSlider(value=3, min=1, max=20, description="n")
rule = W.Dropdown(options=["query_len", "prompt"], value="query_len", description="rule")
out = W.HTML()
out.add_class("pdlab-demo")


def render(*_):
    out.value = f"n={n.value} rule={rule.value}"


n.observe(render, names="value")
rule.observe(render, names="value")
render()
W.VBox([n, rule, out])""",
    """mode = W.ToggleButtons(options=["fast", "exact"], description="mode")
verbose = W.Checkbox(value=False, description="verbose")
name = W.Text(value="", description="name")
go = W.Button(description="go")
pick = W.SelectionSlider(options=["a", "b", "c"], value="a", description="pick")
temp = W.FloatSlider(value=0.5, min=0, max=2, step=0.1, description="temp")
clicks = [0]
extra = W.HTML()
extra.add_class("pdlab-extra")


def show(*_):
    extra.value = (f"{mode.value} {verbose.value} {name.value!r} {clicks[0]} {pick.value}"
                   f" {temp.value:.1f}")


def on_go(_):
    clicks[0] += 1
    show()


for w in (mode, verbose, name, pick, temp):
    w.observe(show, names="value")
go.on_click(on_go)
show()
W.VBox([mode, verbose, name, go, pick, temp, extra])""",
    "print('done')",
]


@pytest.mark.browser
def test_widgets_in_real_jupyterlab(tmp_path):
    t0 = time.monotonic()
    nb_bytes = make_nb(tmp_path / "demo.ipynb", *WIDGET_NB).read_bytes()
    with lab_page(tmp_path, failure_screenshot=tmp_path / "failure.png") as lab:
        lab.open("demo.ipynb")
        run_all_cells(lab.page, timeout=120)
        assert widget_errors(lab.page) == []
        assert read_output_text(lab.page, "pdlab-demo") == "n=3 rule=query_len"

        set_slider(lab.page, "n", 7)
        assert read_output_text(lab.page, ".pdlab-demo") == "n=7 rule=query_len"
        set_dropdown(lab.page, "rule", "prompt")
        wait_for_output_text(lab.page, "pdlab-demo", "n=7 rule=prompt")
        set_slider(lab.page, "n", 20)
        wait_for_output_text(lab.page, "pdlab-demo", "n=20 rule=prompt")

        assert read_output_text(lab.page, "pdlab-extra") == "fast False '' 0 a 0.5"
        set_toggle_buttons(lab.page, "mode", "exact")
        set_checkbox(lab.page, "verbose", True)
        set_text(lab.page, "name", "abc")
        click_button(lab.page, "go")
        click_button(lab.page, "go")
        set_slider(lab.page, "pick", "c")
        set_slider(lab.page, "temp", 1.3)
        assert read_output_text(lab.page, "pdlab-extra") == "exact True 'abc' 2 c 1.3"
        assert read_output_text(lab.page, "pdlab-demo") == "n=20 rule=prompt"

        assert widget_errors(lab.page) == []
        shot = screenshot(lab.page, tmp_path / "shots" / "demo.png")
        assert shot.stat().st_size > 10_000
    # the server wrote nothing next to the notebook and did not save it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.ipynb", "shots"]
    assert (tmp_path / "demo.ipynb").read_bytes() == nb_bytes
    assert time.monotonic() - t0 < 60


@pytest.mark.browser
def test_widget_errors_reports_failures(tmp_path):
    make_nb(
        tmp_path / "err.ipynb",
        "import traceback\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n    traceback.print_exc()",
        # a view of a model that does not exist never renders
        "from IPython.display import display\n"
        "display({'application/vnd.jupyter.widget-view+json': {'model_id': 'deadbeef',"
        " 'version_major': 2, 'version_minor': 0}}, raw=True)",
        # an Output widget showing a callback's exception
        "import ipywidgets as W\nlog = W.Output()\nb = W.Button(description='fail')\n"
        "@log.capture()\ndef on_click(_):\n    raise KeyError('from callback')\n"
        "b.on_click(on_click)\nW.VBox([b, log])",
        "raise ValueError('boom in cell')",
        "print('unreached')",
    )
    shot = tmp_path / "shots" / "failure.png"
    with (
        pytest.raises(RuntimeError, match="sentinel"),
        lab_page(tmp_path, failure_screenshot=shot) as lab,
    ):
        lab.open("err.ipynb")
        assert run_all_cells(lab.page, timeout=120, raise_on_error=False, widget_timeout=3) is False
        errs = widget_errors(lab.page)
        assert len(errs) == 3, errs
        assert errs[0].startswith("Traceback (most recent") and "ZeroDivisionError" in errs[0]
        assert errs[1].startswith("ValueError: boom in cell") and "Traceback" in errs[1]
        # which one depends on whether the widget manager had finished restoring
        assert errs[2] in (
            "widget never rendered (Loading widget...)",
            "Error displaying widget: model not found",
        )
        click_button(lab.page, "fail")
        errs2 = widget_errors(lab.page)
        new = [e for e in errs2 if e not in errs]
        assert len(new) == 1 and "KeyError: 'from callback'" in new[0], errs2
        with pytest.raises(AssertionError, match="boom in cell"):
            run_all_cells(lab.page, timeout=120, widget_timeout=3)
        raise RuntimeError("sentinel: lab_page saves a screenshot when its block fails")
    assert shot.stat().st_size > 10_000


def test_missing_chromium_skips_or_fails(monkeypatch, tmp_path):
    import nbtools

    monkeypatch.setattr(nbtools, "CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.delenv("PDLAB_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-chromium"):
        nbtools.require_chromium()
    monkeypatch.setenv("PDLAB_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="PDLAB_REQUIRE_BROWSER"):
        nbtools.require_chromium()
