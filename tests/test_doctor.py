"""``pdlab doctor`` runs, reports the chosen backend and exits 0 here."""

import subprocess
import sys

from pdlab.kernels import backend
from pdlab.tools import doctor


def test_doctor_reports_backend(capsys):
    assert doctor.main() == 0
    out = capsys.readouterr().out
    assert "[OK] backend" in out and backend.get_backend() in out
    for name in ("python", "torch", "rich", "matplotlib", "jupyterlab", "ipywidgets", "model"):
        assert f"] {name}" in out


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
