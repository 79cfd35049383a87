"""pdlab as users install it: the metadata, the wheel and sdist contents, ``pdlab --version``,
``python -m pdlab``, and ``pdlab.kernels`` found from a checkout whatever the install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import pdlab

ROOT = Path(__file__).resolve().parents[2]
tomllib = pytest.importorskip("tomllib")  # Python 3.11+
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_license_is_an_spdx_string_with_its_text_shipped() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_dev_extra_and_dev_group_list_the_same_tools() -> None:
    extra = PYPROJECT["project"]["optional-dependencies"]["dev"]
    assert PYPROJECT["dependency-groups"]["dev"] == extra


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_version_and_python_m_pdlab(tmp_path) -> None:
    r = _run("-m", "pdlab", "--version", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"pdlab {pdlab.__version__}"
    r = _run("-m", "pdlab", "no-such-command", cwd=tmp_path)
    assert r.returncode == 2 and "invalid choice: 'no-such-command'" in r.stderr


# As with a non-editable install run from the repository root: the checkout's pdlab/ comes
# first on sys.path and no editable finder maps kernels/ to pdlab.kernels.
_FROM_CHECKOUT = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, sys.argv[1])
import pdlab, pdlab.kernels, pdlab.kernels.backend
print(pdlab.__file__)
print(pdlab.kernels.__file__)
print(pdlab.kernels.backend.__file__)
"""


def test_kernels_import_from_a_checkout_without_an_editable_install(tmp_path) -> None:
    assert not (ROOT / "pdlab" / "kernels").exists()  # the layout the finder is for
    r = _run("-c", _FROM_CHECKOUT, str(ROOT), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    init, kernels, backend = (Path(line) for line in r.stdout.split())
    assert init == ROOT / "pdlab" / "__init__.py"
    assert kernels == ROOT / "kernels" / "__init__.py"
    assert backend == ROOT / "kernels" / "backend.py"


def _copy_tree(dest: Path) -> Path:
    junk = shutil.ignore_patterns(
        ".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
    )
    return Path(shutil.copytree(ROOT, dest, ignore=junk))


# One build per process: setuptools keeps state between builds in one interpreter.
_BUILD = """
import sys
from setuptools import build_meta
print("BUILT", getattr(build_meta, sys.argv[1])(sys.argv[2]))
"""


def _build(kind: str, src: Path, out: Path) -> Path:
    r = _run("-c", _BUILD, kind, str(out), cwd=src)
    assert r.returncode == 0, r.stderr[-3000:]
    # every folder Python could import from the package dirs is declared (pyproject.toml)
    assert "Package would be ignored" not in r.stdout + r.stderr, r.stderr[-3000:]
    return out / r.stdout.split("BUILT ")[-1].strip()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """``(sdist, wheel)``: the sdist built from a copy of the checkout, and the wheel built
    from that sdist unpacked, as ``pip install pdlab-0.1.0.tar.gz`` builds it (so the
    wheel's contents prove the sdist whole too). Built once for the module's tests."""
    # The version from the metadata: importing setuptools here would fail its distutils
    # check whenever an earlier test in this worker imported the standard library's one.
    from importlib.metadata import version

    setuptools_version = version("setuptools")
    if int(setuptools_version.split(".")[0]) < 77:
        pytest.skip(f"setuptools {setuptools_version} < 77 cannot build an SPDX license")
    tmp = tmp_path_factory.mktemp("build")
    sdist = _build("build_sdist", _copy_tree(tmp / "src"), tmp / "dist")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp / "unpacked", filter="data")
    (unpacked,) = (tmp / "unpacked").iterdir()
    return sdist, _build("build_wheel", unpacked, tmp / "wheel")


@pytest.mark.slow
def test_wheel_ships_the_notebooks_and_the_sdist_its_tests(built) -> None:
    sdist, wheel = built
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks) >= 6

    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
    assert {f"pdlab/notebooks/{n}" for n in notebooks} <= names
    assert "pdlab/kernels/__init__.py" in names and "pdlab/__main__.py" in names
    assert "pdlab/notebooks/src/pd_decode_side.py" in names  # 05/06's bilingual source
    assert "pdlab/engine/model_executor/tiny-trained.safetensors" in names  # the default weights
    assert not any(n.startswith(("kernels/", "notebooks/", "tests/")) for n in names)

    with tarfile.open(sdist) as sdist:
        members = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
    tracked = {"LICENSE", "Makefile", "environment.yml", ".ci/run", "pyproject.toml"}
    tracked.add("pdlab/engine/model_executor/tiny-trained.safetensors")
    tests = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("*.py")}
    assert tracked | tests | {f"notebooks/{n}" for n in notebooks} <= members


def test_notebooks_dir_holds_the_notebooks() -> None:
    folder = pdlab.notebooks_dir()
    assert sorted(p.name for p in folder.glob("[0-9][0-9]_*.ipynb")) == sorted(
        p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")
    )


# What a user of the wheel runs first, each from an empty folder (issue 26): the wheel is
# built from the unpacked sdist, so both must be whole.
_FIRST_COMMANDS = [
    ("--version",),
    ("doctor",),
    ("tour", "--chapter", "1", "--no-pager"),
    ("sim",),
    ("exercises", "list"),
    ("notebooks", "NOTEBOOKS"),
]


def _fresh_venv(where: Path) -> Path:
    """A new venv whose own site-packages is empty but for what we install, that borrows the
    dependencies (torch, rich, ...) from this interpreter's site-packages through a ``.pth``
    line, and Jupyter's data files from its prefix. A path line in a ``.pth`` is not itself
    scanned for ``.pth`` files, so a checkout's editable finder living there stays inactive:
    only the installed wheel provides pdlab."""
    import site
    import sysconfig
    import venv

    venv.EnvBuilder(with_pip=False).create(where)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    borrowed = [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]
    Path(purelib, "_borrowed_deps.pth").write_text("\n".join(dict.fromkeys(borrowed)) + "\n")
    # Jupyter's data files (the widgets' lab extension) live under the prefix, not in
    # site-packages: borrow them too, as an install with dependencies would have them.
    shared = Path(sys.prefix, "share", "jupyter")
    if shared.is_dir():
        (where / "share").mkdir(exist_ok=True)
        (where / "share" / "jupyter").symlink_to(shared)
    return python


@pytest.mark.slow
def test_the_wheel_installed_in_a_fresh_venv_runs_every_first_command(built, tmp_path) -> None:
    _, wheel = built

    python = _fresh_venv(tmp_path / "venv")
    r = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    pdlab_cmd = tmp_path / "venv" / "bin" / "pdlab"
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(COLUMNS="80", PYTHONNOUSERSITE="1")

    where = subprocess.run(
        [str(python), "-c", "import pdlab, pdlab.kernels, pdlab.sim; print(pdlab.__file__)"],
        cwd=empty,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "venv"), where.stdout

    for command in _FIRST_COMMANDS:
        args = [str(tmp_path / "nb") if a == "NOTEBOOKS" else a for a in command]
        r = subprocess.run(
            [str(pdlab_cmd), *args],
            cwd=empty,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert r.returncode == 0, f"pdlab {' '.join(command)}: {r.stdout[-1500:]}{r.stderr[-1500:]}"
        assert "Traceback" not in r.stderr, r.stderr[-1500:]
    assert sorted(p.name for p in (tmp_path / "nb").glob("*.ipynb")) == sorted(
        p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")
    )
    assert list(empty.iterdir()) == [] or all(p.name.startswith(".pdlab") for p in empty.iterdir())
