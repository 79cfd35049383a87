"""``pdlab doctor``: what works on this machine, one line per component.

Lines read ``[OK] name detail``, ``[WARN] name detail -> what it means`` (an optional piece
is missing: triton, a web browser, the AOT toolchain; or a CUDA build of torch sits on a
machine without a GPU) or ``[FAIL] name detail -> how to fix``; paste them into a bug
report. They wrap inside their column, so they read whole at 80 columns. Exit code 0 when
pdlab can run here (warnings included), 1 otherwise. ``kernels`` is what ``pdlab tour``,
``trace`` and ``pd`` run (their ``--backend`` default, read from the parser); ``backend``
is what Python code and the notebooks get (``PDLAB_BACKEND``, default ``auto``). ``--aot``
also compiles every Triton kernel for sm_80 and sm_90 (no GPU needed) and prints a row per
kernel and target.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import platform
import shutil
import sys
import time
from dataclasses import dataclass
from typing import Any

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True

    @property
    def tag(self) -> str:
        return "OK" if self.ok else ("FAIL" if self.required else "WARN")

    def line(self) -> str:
        fix = f" -> {self.fix}" if (self.fix and not self.ok) else ""
        return f"[{self.tag}] {self.name:<12} {self.detail}{fix}"


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def _package(name: str, dist: str | None = None, required: bool = True) -> Check:
    v = _version(dist or name)
    if v is None:
        return Check(
            name, False, "not installed", f"pip install -e . (or: pip install {name})", required
        )
    return Check(name, True, v, required=required)


def _pdlab_check() -> Check:
    """pdlab's version, where it is imported from, and whether its notebooks are there."""
    import pdlab

    where = os.path.dirname(pdlab.__file__)
    try:
        notebooks = f"notebooks in {pdlab.notebooks_dir()}"
    except FileNotFoundError as e:
        return Check("pdlab", False, f"{pdlab.__version__} at {where}; {e}", "reinstall pdlab")
    return Check("pdlab", True, f"{pdlab.__version__} at {where}; {notebooks}")


def run_checks() -> list[Check]:
    checks = [
        _pdlab_check(),
        Check(
            "python",
            sys.version_info >= (3, 10),
            f"{platform.python_version()} ({platform.system()} {platform.machine()})",
            "pdlab needs Python 3.10 or newer",
        ),
    ]
    try:
        import torch

        dev = f"cuda: {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "cpu"
        checks.append(Check("torch", True, f"{torch.__version__} (device: {dev})"))
    except Exception as e:  # noqa: BLE001 - a doctor reports every failure
        checks.append(Check("torch", False, f"import failed: {e}", "pip install torch"))
        return checks
    build = _torch_build_check(torch)
    if build is not None:
        checks.append(build)
    from pdlab.kernels.backend import triton_installed

    tv = _version("triton") if triton_installed() else None
    if tv is None:
        checks.append(
            Check(
                "triton",
                False,
                "not installed (Linux wheels only)",
                "optional: the kernels run as their torch twins; on Linux: pip install triton",
                required=False,
            )
        )
    else:
        checks.append(Check("triton", True, tv))
    checks += _backend_checks()
    checks.append(_package("numpy"))
    checks.append(_package("rich"))
    checks.append(_package("matplotlib"))
    checks.append(_package("jupyterlab"))
    checks.append(_widgets_check())
    checks.append(_browser_check())
    checks.append(_smoke_check())
    return checks


def nvidia_gpu_present() -> bool:
    """An NVIDIA driver on this machine (what the Makefile asks before it installs torch)."""
    return shutil.which("nvidia-smi") is not None or os.path.exists("/proc/driver/nvidia")


def installed_bytes(match: Any) -> int:
    """Bytes on disk of every installed distribution whose lower-cased name ``match``
    accepts (the files its RECORD lists)."""
    total, seen = 0, set()
    for dist in md.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name in seen or not match(name):
            continue
        seen.add(name)
        for f in dist.files or ():
            try:
                total += os.path.getsize(dist.locate_file(f))
            except OSError:
                pass
    return total


def _torch_build_check(torch: Any) -> Check | None:
    """A WARN when the CUDA build of torch sits on a machine with no NVIDIA GPU."""
    if torch.version.cuda is None or torch.cuda.is_available() or nvidia_gpu_present():
        return None
    size = installed_bytes(lambda n: n == "torch" or n.startswith("nvidia-"))
    return Check(
        "torch build",
        False,
        f"{torch.__version__} is the CUDA {torch.version.cuda} build, {size / 1e9:.1f} GB on "
        "disk with its nvidia-* packages, and this machine has no NVIDIA GPU",
        f"a CPU build works the same here: pip install --force-reinstall torch --index-url "
        f"{CPU_INDEX}, then pip uninstall the nvidia-* packages (or: make clean && make env)",
        required=False,
    )


def _backend_checks() -> list[Check]:
    """What the commands run (their ``--backend`` default) and what Python code runs."""
    from pdlab.cli import build_parser
    from pdlab.kernels import backend

    out = []
    default = build_parser().parse_args(["tour"]).backend
    try:
        backend.check("triton", "flag")
        how = "interpreter, slow" if not backend.cuda_available() else "compiled"
        out.append(
            Check(
                "kernels",
                True,
                f"{default}: pdlab tour, trace and pd run it by default; "
                f"--backend triton runs Triton ({how})",
            )
        )
    except ValueError as e:
        lead = f"{default}: pdlab tour, trace and pd run it by default"
        if not backend.triton_installed():  # the triton line above says so already
            out.append(Check("kernels", True, f"{lead}; --backend triton needs triton"))
        else:
            out.append(
                Check(
                    "kernels",
                    False,
                    f"{lead}; {e}",
                    "optional: every command runs on the torch kernels",
                    required=False,
                )
            )
    try:
        out.append(Check("backend", True, f"{backend.describe()}: Python code and notebooks"))
    except Exception as e:  # noqa: BLE001
        msg = str(e)
        if "PDLAB_CHECK_INDICES" in msg:
            advice = "unset PDLAB_CHECK_INDICES, or set it to 1 (check) or 0 (skip)"
        elif "PDLAB_BACKEND" in msg:
            advice = "unset PDLAB_BACKEND, or set it to auto, triton or torch"
        else:
            advice = "set PDLAB_BACKEND=torch or reinstall triton"
        out.append(Check("backend", False, f"selection failed: {msg}", advice))
    return out


def _browser_check() -> Check:
    """``pdlab lab`` opens a web browser when one is registered; without one it prints the
    address to open."""
    import webbrowser

    try:
        name = getattr(webbrowser.get(), "name", "") or "found"
    except webbrowser.Error:
        return Check(
            "browser",
            False,
            "no web browser found",
            "optional: pdlab lab prints the address to open by hand",
            required=False,
        )
    return Check("browser", True, f"{name} (pdlab lab opens it)")


def _widgets_check() -> Check:
    v = _version("ipywidgets")
    if v is None:
        return Check("ipywidgets", False, "not installed", "pip install 'ipywidgets>=8'")
    ext = _version("jupyterlab_widgets")
    # JupyterLab loads prebuilt extensions from the "labextensions" folder of each Jupyter
    # data path (this environment's share/jupyter among them): look where it will look.
    try:
        from jupyter_core.paths import jupyter_path

        folders = jupyter_path("labextensions")
    except ImportError:
        folders = [os.path.join(sys.prefix, "share", "jupyter", "labextensions")]
    found = [
        f
        for f in folders
        if os.path.isdir(os.path.join(f, "@jupyter-widgets", "jupyterlab-manager"))
    ]
    if ext is None or not found:
        return Check(
            "ipywidgets",
            False,
            f"{v}, lab extension missing",
            "pip install --force-reinstall jupyterlab_widgets",
        )
    return Check("ipywidgets", True, f"{v} (lab extension jupyterlab_widgets {ext})")


def _smoke_check() -> Check:
    """Run the tiny model once, so OK means the numbers flow, not just that imports work."""
    try:
        from pdlab.config import ModelConfig
        from pdlab.model import DeepseekV2ForCausalLM

        t0 = time.perf_counter()
        model = DeepseekV2ForCausalLM(ModelConfig.tiny())
        logits = model.forward_full(list(range(16)))
        ms = (time.perf_counter() - t0) * 1e3
        if not bool(logits.isfinite().all()):
            return Check(
                "model",
                False,
                "tiny model produced non-finite logits",
                "report this with the lines above",
            )
        return Check("model", True, f"tiny DeepSeek-style forward OK ({ms:.0f} ms)")
    except Exception as e:  # noqa: BLE001
        return Check(
            "model", False, f"tiny forward failed: {e}", "report this with the lines above"
        )


def run_aot(console: Any) -> Check:
    """Compile every Triton kernel for sm_80 and sm_90 and print a row per kernel, target,
    dtype and widths (``pdlab/tools/aot.py``); the summary line as a :class:`Check`, a
    warning when triton or its toolchain is missing (nothing else needs them)."""
    from pdlab.kernels.backend import triton_installed

    if not triton_installed():
        return Check(
            "aot",
            False,
            "triton is not installed: nothing to compile",
            "optional: only the Triton kernels need it; on Linux: pip install triton",
            required=False,
        )
    aot = importlib.import_module("pdlab.tools.aot")
    try:
        results = aot.run_aot_check()
    except Exception as e:  # noqa: BLE001 - a toolchain that cannot run is a warning
        return Check(
            "aot",
            False,
            f"the compiler could not run: {e}",
            "optional: reinstall triton (it ships ptxas)",
            required=False,
        )
    console.print(aot.render_table(results))
    bad = [r for r in results if not r.ok]
    spilling = sum(1 for r in results if r.ok and r.spills)
    return Check(
        "aot",
        not bad,
        f"{len(results) - len(bad)}/{len(results)} kernel builds compiled for sm_80 and sm_90, "
        + (f"{spilling} spilling registers (the spills column)" if spilling else "none spills"),
        "report the FAIL rows above",
    )


def render(checks: list[Check]) -> Any:
    """The checks as a grid: tag, name, then the detail wrapping in its own column."""
    from rich.markup import escape
    from rich.table import Table

    colour = {"OK": "green", "WARN": "yellow", "FAIL": "red"}
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, min_width=6)
    grid.add_column(no_wrap=True, min_width=11)
    grid.add_column(overflow="fold")
    for c in checks:
        fix = f" -> {c.fix}" if (c.fix and not c.ok) else ""
        grid.add_row(f"[{colour[c.tag]}]\\[{c.tag}][/]", c.name, escape(c.detail + fix))
    return grid


def main(aot: bool = False) -> int:
    from pdlab.ui.console import make_console

    console = make_console()
    checks = run_checks()
    console.print(render(checks))
    if aot:
        summary = run_aot(console)
        console.print(render([summary]))
        checks.append(summary)
    ok = all(c.ok or not c.required for c in checks)
    warned = any(not c.ok and not c.required for c in checks)
    if not ok:
        console.print("pdlab cannot run here: fix the FAIL lines above.")
    elif warned:
        console.print("pdlab can run here; the WARN lines are optional pieces.")
    else:
        console.print("pdlab can run here.")
    return 0 if ok else 1
