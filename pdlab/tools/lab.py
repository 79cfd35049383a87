"""``pdlab notebooks [DIR]`` and ``pdlab lab``: the notebooks wherever pdlab is installed.

The notebooks ship inside the package (:func:`pdlab.notebooks_dir`). ``pdlab notebooks``
copies them into a folder of the reader's; ``pdlab lab`` opens JupyterLab on a working copy
(:data:`LAB_DIR` or ``--dir``), never on the shipped folder itself (saving a notebook there
would dirty git or the installed package). A copy the reader has edited is never replaced.
vLLM has no counterpart; its CLI entry point is ``vllm/entrypoints/cli/main.py``.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from pdlab import notebooks_dir
from pdlab.errors import PdlabValueError, Phrase, os_reason

DEFAULT_DIR = Path("pdlab-notebooks")  # pdlab notebooks' default, in the current folder
LAB_DIR = Path("~/pdlab-notebooks")  # pdlab lab's working copy (--dir, or PDLAB_LAB_DIR)
# Old names -> new ones: notebook 5's Chinese twin was 06_pd_decode_side_zh before 0.1.
RENAMED = {"06_pd_decode_side_zh": "05_pd_decode_side_zh"}


def shipped_notebooks() -> list[Path]:
    """The shipped ``NN_*.ipynb`` files, in order."""
    return sorted(notebooks_dir().glob("[0-9][0-9]_*.ipynb"))


def copy_notebooks(dest: Path, force: bool = False) -> list[Path]:
    """Copy the shipped notebooks into ``dest``; returns the new paths. A file there that
    differs (a reader's edits) is refused unless ``force``."""
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise PdlabValueError("err_lab_dest_file", path=str(dest))
    if dest.exists() and dest.resolve() == notebooks_dir().resolve():
        raise PdlabValueError(
            "err_nbs_own_folder", path=str(dest), where=_shipped_where(), default=DEFAULT_DIR
        )
    sources = shipped_notebooks()
    changed = [
        dest / s.name
        for s in sources
        if (dest / s.name).exists() and not filecmp.cmp(s, dest / s.name, shallow=False)
    ]
    if changed and not force:
        names = ", ".join(p.name for p in changed)
        raise PdlabValueError("err_lab_edited", path=str(dest), names=names)
    fresh = [s.name for s in sources if not (dest / s.name).exists() or dest / s.name in changed]
    copy_notebooks_named(dest, fresh, option="DIR")
    return [dest / s.name for s in sources]


def resolve_notebook(name: str, folder: Path) -> str:
    """The file name in ``folder`` that ``name`` means: ``05``, ``05_pd_decode_side`` or
    ``05_pd_decode_side.ipynb``; ``01_zh`` is notebook 1's Chinese twin."""
    names = sorted(p.name for p in folder.glob("[0-9][0-9]_*.ipynb"))
    stem = name.removesuffix(".ipynb")
    if stem in RENAMED and f"{stem}.ipynb" not in names:
        stem = RENAMED[stem]
    number, zh = stem.removesuffix("_zh"), stem.endswith("_zh")
    hits = [n for n in names if n.removesuffix(".ipynb") == stem]
    same = [n for n in names if n.split("_", 1)[0] == number]
    if not hits and same:
        hits = [n for n in same if n.removesuffix(".ipynb").endswith("_zh") == zh]
        hits = hits or ([] if zh else same)
    if len(hits) != 1:
        among = ", ".join(n.removesuffix(".ipynb") for n in names)
        raise PdlabValueError("err_lab_no_notebook", name=name, names=among)
    return hits[0]


def _shipped_where() -> Phrase:
    """What the shipped folder is: a checkout's tracked notebooks (beside pdlab/ and
    pyproject.toml: a clone or an editable install), or the package's own."""
    top = notebooks_dir().parent
    checkout = (top / "pyproject.toml").is_file() and (top / "pdlab").is_dir()
    return Phrase("err_n_tracked_notebooks" if checkout else "err_n_own_notebooks")


def lab_folder(directory: Path | None, lang: str = "en") -> tuple[Path, list[str]]:
    """The working copy JupyterLab serves (``directory``, else ``PDLAB_LAB_DIR``, else
    :data:`LAB_DIR`), and notes for the reader in ``lang``. Missing notebooks are copied in;
    one the reader has edited is kept as it is."""
    from pdlab.catalog import text

    if directory is None:
        directory = Path(os.environ.get("PDLAB_LAB_DIR") or LAB_DIR)
    directory = Path(directory).expanduser()
    shipped = notebooks_dir()
    if directory.exists() and directory.resolve() == shipped.resolve():
        raise PdlabValueError(
            "err_lab_own_folder", path=str(directory), where=_shipped_where(), default=LAB_DIR
        )
    notes = []
    if directory.exists() and not directory.is_dir():
        raise PdlabValueError("err_lab_dir_file", path=str(directory))
    present = {p.name for p in directory.glob("*.ipynb")} if directory.is_dir() else set()
    missing = [s.name for s in shipped_notebooks() if s.name not in present]
    edited = [
        s.name
        for s in shipped_notebooks()
        if s.name in present and not filecmp.cmp(s, directory / s.name, shallow=False)
    ]
    if missing:
        copy_notebooks_named(directory, missing)
        notes.append(text(lang, "lab_copied", n=len(missing), dir=directory))
    if edited:
        sep = "、" if lang == "zh" else ", "
        notes.append(text(lang, "lab_kept", names=sep.join(edited), dir=directory))
    return directory, notes


def copy_notebooks_named(dest: Path, names: list[str], option: str = "--dir") -> None:
    """Copy the shipped notebooks called ``names`` into ``dest`` (created if missing)."""
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for name in names:
            shutil.copyfile(notebooks_dir() / name, dest / name)
    except OSError as e:
        why = os_reason(e)
        raise PdlabValueError(
            "err_lab_cannot_write", option=option, path=str(dest), why=why
        ) from None


def lab_command(
    folder: Path,
    port: int | None = None,
    ip: str | None = None,
    notebook: str | None = None,
    no_browser: bool = False,
) -> list[str]:
    """The ``jupyter lab`` command line for :func:`run_lab` (this interpreter's JupyterLab),
    which has checked ``port``."""
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={folder.resolve()}"]
    cmd += [f"--ServerApp.port={port}"] if port is not None else []
    cmd += [f"--ServerApp.ip={ip}"] if ip is not None else []
    cmd += ["--no-browser"] if no_browser else []
    # Jupyter refuses to start as root unless told; containers and workshop VMs run as root.
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd += ["--allow-root"]
    if notebook is not None:
        cmd += [str((folder / resolve_notebook(notebook, folder)).resolve())]
    return cmd


def run_lab(
    directory: Path | None = None,
    port: int | None = None,
    ip: str | None = None,
    notebook: str | None = None,
    no_browser: bool = False,
    lang: str = "en",
) -> int:
    """Start JupyterLab on the working copy (:func:`lab_folder`); returns its exit status.
    With ``lang="zh"``, ``--notebook 05`` opens the Chinese twin."""
    from pdlab.catalog import text

    # Every option is checked before anything is copied (against the shipped names, which
    # the working copy holds once lab_folder has filled it).
    if port is not None and not 0 <= port <= 65535:
        raise PdlabValueError("err_lab_port", port=port)
    if lang == "zh" and notebook is not None and notebook.isdigit():
        notebook = f"{notebook}_zh"
    if notebook is not None:
        resolve_notebook(notebook, notebooks_dir())
    folder, notes = lab_folder(directory, lang)
    cmd = lab_command(folder, port=port, ip=ip, notebook=notebook, no_browser=no_browser)
    for note in notes:
        print(note)
    print(text(lang, "lab_serving", dir=folder.resolve()), flush=True)
    return _serve(cmd, folder)


def _serve(cmd: list[str], folder: Path) -> int:
    """Run JupyterLab and wait for it. Ctrl-C and SIGTERM sent to pdlab reach it as SIGTERM,
    so it stops its kernels before pdlab returns (a SIGINT could be ignored, or only ask
    whether to stop); after a Ctrl-C pdlab raises ``KeyboardInterrupt``."""
    server = subprocess.Popen(cmd, cwd=folder)
    got: list[int] = []

    def forward(signum: int, frame: object) -> None:
        got.append(signum)
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)

    caught = (signal.SIGINT, signal.SIGTERM)
    before = {s: signal.signal(s, forward) for s in caught}
    try:
        status = server.wait()
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
    if signal.SIGINT in got:
        raise KeyboardInterrupt
    return status
