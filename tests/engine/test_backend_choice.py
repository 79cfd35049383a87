"""Every way of choosing the kernels' backend is checked before any work, with one line
naming the choice as it was given; a request that ends in error shows in every view with
its reason, and ``pdlab trace``/``pdlab pd``/``pdlab tour`` exit non-zero.

"Triton absent" is simulated two ways: ``backend.triton_installed`` patched to False in
this process, and, once, a subprocess whose ``sys.modules`` blocks ``import triton``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from pdlab.cli import main
from pdlab.engine.config import CacheConfig, ModelConfig
from pdlab.engine.llm_engine import LLMEngine
from pdlab.engine.trace import Tracer
from pdlab.kernels import backend


@pytest.fixture
def no_triton(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend, "triton_installed", lambda: False)


@pytest.fixture
def no_gpu_with_triton(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend, "triton_installed", lambda: True)
    monkeypatch.setattr(backend, "cuda_available", lambda: False)


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    assert e.value.code == 2
    assert out == ""  # refused before any work
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pdlab {argv[0]}: error: "), err
    assert needle in lines[0], lines[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["tour", "--chapter", "1"],
        ["trace"],
        ["trace", "--pd"],
        ["pd", "--procs", "1"],
        ["pd", "--procs", "2"],
        ["bench", "paths", "--context", "64"],
    ],
)
def test_backend_triton_without_triton_is_one_line_naming_the_flag(no_triton, capsys, argv):
    _one_line(capsys, [*argv, "--backend", "triton"], "--backend triton needs triton")


def test_every_way_of_choosing_names_itself(no_triton, monkeypatch):
    with pytest.raises(ValueError, match=r"^backend='triton' needs triton"):
        backend.set_backend("triton")
    with pytest.raises(ValueError, match=r"^backend='triton' needs triton"):
        with backend.use_backend("triton"):
            pass
    monkeypatch.setenv("PDLAB_BACKEND", "triton")
    monkeypatch.setattr(backend, "_default", None)
    with pytest.raises(ValueError, match=r"^PDLAB_BACKEND=triton needs triton"):
        backend.get_backend()


def test_an_engine_refuses_a_backend_it_cannot_run_before_any_step(no_triton):
    with pytest.raises(ValueError, match=r"^backend='triton' needs triton"):
        LLMEngine(ModelConfig.tiny(), CacheConfig(block_size=4, num_blocks=8), backend="triton")


@pytest.mark.parametrize(
    "value, needle",
    [
        ("0", "--backend triton with TRITON_INTERPRET='0' compiles for a GPU"),
        ("off", "--backend triton with TRITON_INTERPRET='off' compiles for a GPU"),
        ("maybe", "TRITON_INTERPRET='maybe' is invalid: expected 1"),
        ("2", "TRITON_INTERPRET='2' is invalid"),
    ],
)
def test_triton_interpret_off_or_bogus_without_a_gpu_is_refused(
    no_gpu_with_triton, monkeypatch, capsys, value, needle
):
    monkeypatch.setenv("TRITON_INTERPRET", value)
    _one_line(capsys, ["trace", "--backend", "triton"], needle)


@pytest.mark.parametrize("value", ["1", "true", "ON", "yes"])
def test_triton_interpret_on_is_read_as_triton_reads_it(no_gpu_with_triton, monkeypatch, value):
    monkeypatch.setenv("TRITON_INTERPRET", value)
    assert backend.triton_interpreting() and backend.check("triton", "flag") == "triton"


def test_a_blocked_triton_import_in_a_real_process_is_one_line():
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "from pdlab.cli import main\n"
        "sys.exit(main(['tour', '--chapter', '6', '--backend', 'triton']))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PDLAB_BACKEND"}
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr and "IndexError" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "pdlab tour: error: --backend triton needs triton, which is not installed (it has "
        "Linux wheels only): use --backend torch"
    ]


# ---- a request that ends in error ------------------------------------------------------
@pytest.fixture
def token_99_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any forward holding byte 99 ("c") raises: a stand-in for any fault in the model."""
    real = torch.nn.Embedding.forward

    def faulty(self, ids):
        if bool((ids == 99).any()):
            raise RuntimeError("injected fault for token 99")
        return real(self, ids)

    monkeypatch.setattr(torch.nn.Embedding, "forward", faulty)


def _errors(path) -> list[dict]:
    return [dict(e) for e in Tracer.load(path).filter("request_error")]


@pytest.mark.parametrize("pd", [False, True])
def test_trace_shows_a_failed_request_and_exits_1(token_99_fails, capsys, tmp_path, pd):
    path = tmp_path / "t.json"
    argv = ["trace", "--prompt", "abc", "--prompt", "hello", "--max-tokens", "2"]
    code = main([*argv, *(["--pd"] if pd else []), "--json", str(path)])
    out = capsys.readouterr().out
    assert code == 1
    errors = _errors(path)
    assert errors and all(e["error"].startswith("RuntimeError: injected fault") for e in errors)
    lines = out.splitlines()
    for e in errors:  # under the step table: which request, where, when and why
        assert any(
            e["req_id"] in ln and e["instance"] in ln and str(e["step"]) in ln and e["error"] in ln
            for ln in lines
        ), out
    # the generations: the failed one says why, the good one has its tokens
    (bad,) = [ln for ln in lines if ln.startswith(errors[0]["req_id"] + " 'abc' ->")]
    assert errors[0]["error"] in bad
    (good,) = [ln for ln in lines if " 'hello' -> [" in ln]
    assert "error" not in good


def test_pd_in_one_process_shows_a_failed_request_and_exits_1(token_99_fails, capsys):
    assert main(["pd", "--procs", "1", "--prompt", "abc", "--prompt", "hi", "--max-tokens", "2"])
    out = capsys.readouterr().out
    assert "injected fault for token 99" in out
    assert any(
        ln.startswith("req-0 'abc' -> error: RuntimeError: injected") for ln in out.split("\n")
    )


def test_tour_stops_with_the_reason_when_its_request_fails(token_99_fails, capsys):
    assert main(["tour", "--prompt", "abc", "--no-pager"]) == 1
    out = capsys.readouterr().out
    assert "injected fault for token 99" in out and "Chapter 1" not in out


def test_the_notebooks_step_player_shows_the_error(token_99_fails):
    from pdlab.ui.trace_views import StepPlayer, trace_rows

    e = LLMEngine(ModelConfig.tiny(), CacheConfig(block_size=4, num_blocks=16), backend="torch")
    e.generate(["abc"])
    (err,) = e.tracer.filter("request_error")
    player = StepPlayer(e.tracer, "local")
    player.slider.value = err.step
    assert json.dumps(err["error"])[1:-1] in player.table.value.replace("&#x27;", "'")
    assert any(
        r[1] == "request_error" and err["error"] in r[2] for r in trace_rows(e.tracer, "local")
    )
