"""``pdlab doctor``: what works on this machine, one line per component.

Lines read ``[OK] name detail`` or ``[FAIL] name detail -> how to fix``; paste them into a bug
report. Exit code 0 when pdlab can run here, 1 otherwise. ``--aot`` also compiles every Triton
kernel for sm_80 and sm_90 (no GPU needed) and prints a row per kernel and target.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import platform
import sys
import time
from dataclasses import dataclass


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True

    def line(self) -> str:
        tag = "OK" if self.ok else ("FAIL" if self.required else "WARN")
        fix = f" -> {self.fix}" if (self.fix and not self.ok) else ""
        return f"[{tag}] {self.name:<12} {self.detail}{fix}"


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
    tv = _version("triton")
    if tv is None:
        checks.append(
            Check(
                "triton",
                False,
                "not installed (Linux wheels only)",
                "kernels run on their torch twins; on Linux: pip install triton",
                required=False,
            )
        )
    else:
        checks.append(Check("triton", True, tv))
    try:
        from pdlab.kernels import backend

        checks.append(Check("backend", True, backend.describe()))
    except Exception as e:  # noqa: BLE001
        msg = str(e)
        if "PDLAB_CHECK_INDICES" in msg:
            advice = "unset PDLAB_CHECK_INDICES, or set it to 1 (check) or 0 (skip)"
        elif "PDLAB_BACKEND" in msg:
            advice = "unset PDLAB_BACKEND, or set it to auto, triton or torch"
        else:
            advice = "set PDLAB_BACKEND=torch or reinstall triton"
        checks.append(Check("backend", False, f"selection failed: {msg}", advice))
    checks.append(_package("numpy"))
    checks.append(_package("rich"))
    checks.append(_package("matplotlib"))
    checks.append(_package("jupyterlab"))
    checks.append(_widgets_check())
    checks.append(_smoke_check())
    return checks


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


def run_aot() -> bool:
    """Compile every Triton kernel for sm_80 and sm_90 and print a row per kernel, target,
    dtype and widths (``pdlab/tools/aot.py``); True when all compiled."""
    if _version("triton") is None:
        print("[FAIL] aot          triton is not installed: nothing to compile")
        return False
    from rich.console import Console

    aot = importlib.import_module("pdlab.tools.aot")
    results = aot.run_aot_check()
    Console().print(aot.render_table(results))
    bad = [r for r in results if not r.ok]
    print(
        f"[{'OK' if not bad else 'FAIL'}] aot          {len(results) - len(bad)}/"
        f"{len(results)} kernel builds compiled for sm_80 and sm_90"
    )
    return not bad


def main(aot: bool = False) -> int:
    checks = run_checks()
    for c in checks:
        print(c.line())
    ok = all(c.ok or not c.required for c in checks)
    if aot:
        ok = run_aot() and ok
    print("pdlab can run here." if ok else "pdlab cannot run here: fix the FAIL lines above.")
    return 0 if ok else 1
