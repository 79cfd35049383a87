"""``pdlab doctor`` runs, reports the chosen backend and exits 0 here."""

import re
import subprocess
import sys

from pdlab.kernels import backend
from pdlab.tools import doctor
from pdlab.ui.choices import kernels_line


def test_doctor_reports_backend(capsys):
    assert doctor.main() == 0
    out = capsys.readouterr().out
    assert re.search(r"^\[OK\] +backend +" + backend.get_backend(), out, re.M), out
    for name in ("python", "torch", "rich", "matplotlib", "jupyterlab", "ipywidgets", "model"):
        assert re.search(rf"^\[(OK|WARN|FAIL)\] +{name} ", out, re.M), out


def test_doctor_cli_exit_code():
    r = subprocess.run(
        [sys.executable, "-m", "pdlab.cli", "doctor"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pdlab can run here" in r.stdout


def test_doctor_fails_on_missing_required_package(monkeypatch):
    real = doctor._version
    monkeypatch.setattr(doctor, "_version", lambda d: None if d == "rich" else real(d))
    checks = doctor.run_checks()
    bad = [c for c in checks if c.name == "rich"][0]
    assert not bad.ok and "pip install" in bad.line()


def test_backend_override():
    with backend.use_backend("torch"):
        assert backend.get_backend() == "torch"
    try:
        backend.resolve("cuda")
    except ValueError as e:
        assert "backend='cuda' is invalid" in str(e)
    else:
        raise AssertionError("expected ValueError")


def test_doctor_reports_what_the_commands_run(monkeypatch):
    from pdlab.cli import build_parser

    default = build_parser().parse_args(["trace"]).backend  # what pdlab trace would run
    kernels = [c for c in doctor.run_checks() if c.name == "kernels"][0]
    assert kernels.detail.startswith(f"{default}: pdlab tour, trace and pd run it by default")


def test_missing_optional_pieces_are_warnings_not_cannot_run(monkeypatch, capsys):
    monkeypatch.setattr(backend, "triton_installed", lambda: False)
    monkeypatch.setattr(
        doctor, "_smoke_check", lambda lang="en": doctor.Check("model", True, "skipped")
    )
    monkeypatch.setattr(
        doctor, "_widgets_check", lambda lang="en": doctor.Check("ipywidgets", True, "-")
    )
    import webbrowser

    def no_browser(*a, **k):
        raise webbrowser.Error("none")

    monkeypatch.setattr(webbrowser, "get", no_browser)
    assert doctor.main(aot=True) == 0
    out = capsys.readouterr().out
    for name in ("triton", "browser", "aot"):
        assert any(ln.startswith("[WARN]") and f" {name} " in ln for ln in out.splitlines()), out
    assert "cannot run here" not in out and "pdlab can run here" in out


def test_a_cuda_torch_without_a_gpu_is_a_warning_with_its_size(monkeypatch):
    import torch

    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(doctor, "nvidia_gpu_present", lambda: False)
    monkeypatch.setattr(
        doctor, "_smoke_check", lambda lang="en": doctor.Check("model", True, "skipped")
    )
    (build,) = [c for c in doctor.run_checks() if c.name == "torch build"]
    assert not build.ok and not build.required  # a warning: everything still runs
    size = doctor.installed_bytes(lambda n: n == "torch" or n.startswith("nvidia-"))
    assert f"{size / 1e9:.1f} GB" in build.detail and doctor.CPU_INDEX in build.fix


def test_installed_bytes_counts_the_files_on_disk():
    import os

    import rich

    folder = os.path.dirname(rich.__file__)
    sources = sum(
        os.path.getsize(os.path.join(d, f))
        for d, _, fs in os.walk(folder)
        for f in fs
        if f.endswith(".py")
    )
    everything = sum(
        os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs
    )
    counted = doctor.installed_bytes(lambda n: n == "rich")
    assert sources <= counted <= everything + 10**6  # + its dist-info


def _english_words(line: str) -> list[str]:
    """The English words of a Chinese line, as tests/contracts/test_glossary.py's rule finds them
    (code, paths, package names and commands stripped first)."""
    from glossary_rule import violations

    line = re.sub(r"\S*\d[.+]\S*", " ", line)  # versions (2.13.0+cpu) are names
    return [v for v in violations(line) if "English in Chinese prose" in v]


def test_doctor_in_chinese_every_line_it_can_print(monkeypatch, capsys):
    """Under lang="zh" each detail, fix and verdict the doctor can print is Chinese (package
    names, paths, commands and the [OK]/[WARN]/[FAIL] tags stay), on the happy path and on
    every unhappy one it reports: a missing package, no triton, no browser, a bad
    PDLAB_BACKEND, a broken model."""
    assert doctor.main(lang="zh") == 0
    out = capsys.readouterr().out
    assert "pdlab can run here" not in out and "pdlab 可以在这里运行" in out
    seen = list(doctor.run_checks("zh"))
    real = doctor._version
    monkeypatch.setattr(
        doctor, "_version", lambda d: None if d in ("rich", "ipywidgets") else real(d)
    )
    monkeypatch.setattr(backend, "triton_installed", lambda: False)
    import webbrowser

    def no_browser(*a, **k):
        raise webbrowser.Error("none")

    monkeypatch.setattr(webbrowser, "get", no_browser)
    monkeypatch.setattr(doctor, "_smoke_check", lambda lang="en": doctor.Check("model", True, "-"))
    seen += doctor.run_checks("zh")
    seen.append(doctor.run_aot(None, "zh"))  # triton missing: a warning, nothing compiled
    monkeypatch.setenv("PDLAB_BACKEND", "cuda")
    monkeypatch.setattr(backend, "_default", None)  # read the variable again
    seen += [c for c in doctor.run_checks("zh") if c.name == "backend"]
    monkeypatch.undo()
    from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM

    def broken(self, ids):
        raise RuntimeError("boom")

    monkeypatch.setattr(DeepseekV2ForCausalLM, "forward_full", broken)
    seen.append(doctor._smoke_check("zh"))
    failed = {c.name for c in seen if not c.ok}
    assert {"rich", "ipywidgets", "triton", "browser", "aot", "backend", "model"} <= failed
    from pdlab.errors import UNTRANSLATED

    assert seen[-1].detail.endswith(UNTRANSLATED + "boom")  # a message no pattern knows
    for c in seen:
        for words in (c.label or c.name, c.detail, c.fix if not c.ok else ""):
            words = words.split(UNTRANSLATED)[0]  # shown as raised, marked as such
            assert not _english_words(words), (c.name, words)
    labels = {c.name: c.label for c in seen}
    assert labels["kernels"] != "kernels" and labels["model"] != "model"


def test_the_backend_description_follows_the_language(monkeypatch):
    monkeypatch.setenv("PDLAB_BACKEND", "torch")
    monkeypatch.setattr(backend, "_default", None)
    assert backend.in_force() == ("torch", "chosen")  # the kernels report a fact
    en, zh = kernels_line(), kernels_line("zh")
    assert en.startswith("torch (") and "PDLAB_BACKEND" in en
    assert zh.startswith("torch（") and "PDLAB_BACKEND" in zh and not _english_words(zh)
