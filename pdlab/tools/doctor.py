"""``pdlab doctor``: what works on this machine, one line per component.

Lines read ``[OK] name detail``, ``[WARN] name detail -> what it means`` (an optional piece
is missing) or ``[FAIL] name detail -> how to fix``. Exit code 0 when pdlab can run here
(warnings included), 1 otherwise. ``kernels`` is what the commands run (their ``--backend``
default); ``backend`` is what Python code and the notebooks get (``PDLAB_BACKEND``).
``--aot`` also compiles every Triton kernel for sm_80 and sm_90. ``lang="zh"`` prints the
words in Chinese (:mod:`pdlab.catalog.doctor`); tags and package names stay as they are.
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

from pdlab.catalog import words as _words
from pdlab.errors import error_text

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True
    label: str = ""  # the name as printed (``name`` is the check's id, the same in every language)

    @property
    def tag(self) -> str:
        return "OK" if self.ok else ("FAIL" if self.required else "WARN")

    def line(self) -> str:
        fix = f" -> {self.fix}" if (self.fix and not self.ok) else ""
        return f"[{self.tag}] {self.label or self.name:<12} {self.detail}{fix}"


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def _package(name: str, lang: str = "en") -> Check:
    t = _words(lang)
    v = _version(name)
    if v is None:
        return Check(name, False, t("doc_not_installed"), t("doc_pip_fix", name=name))
    return Check(name, True, v)


def _pdlab_check(lang: str = "en") -> Check:
    import pdlab

    t = _words(lang)
    where, version = os.path.dirname(pdlab.__file__), pdlab.__version__
    try:
        notebooks = pdlab.notebooks_dir()
    except FileNotFoundError as e:
        detail = t("doc_pdlab_broken", version=version, where=where, error=error_text(e, lang))
        return Check("pdlab", False, detail, t("doc_pdlab_fix"))
    return Check("pdlab", True, t("doc_pdlab", version=version, where=where, notebooks=notebooks))


def run_checks(lang: str = "en") -> list[Check]:
    t = _words(lang)
    system = {"system": platform.system(), "machine": platform.machine()}
    python = t("doc_python", version=platform.python_version(), **system)
    checks = [
        _pdlab_check(lang),
        Check("python", sys.version_info >= (3, 10), python, t("doc_python_fix")),
    ]
    try:
        import torch

        zh = lang == "zh"
        if torch.cuda.is_available():
            dev = ("CUDA：" if zh else "cuda: ") + torch.cuda.get_device_name(0)
        else:
            dev = "CPU" if zh else "cpu"
        checks.append(Check("torch", True, t("doc_torch", version=torch.__version__, device=dev)))
    except Exception as e:  # noqa: BLE001 - a doctor reports every failure
        detail = t("doc_import_failed", error=error_text(e, lang))
        checks.append(Check("torch", False, detail, "pip install torch"))
        return checks
    build = _torch_build_check(torch, lang)
    if build is not None:
        checks.append(build)
    from pdlab.kernels.backend import triton_installed

    tv = _version("triton") if triton_installed() else None
    missing = Check("triton", False, t("doc_triton_missing"), t("doc_triton_fix"), required=False)
    checks.append(missing if tv is None else Check("triton", True, tv))
    checks += _backend_checks(lang)
    checks += [_package(name, lang) for name in ("numpy", "rich", "matplotlib", "jupyterlab")]
    checks.append(_widgets_check(lang))
    checks.append(_browser_check(lang))
    checks.append(_smoke_check(lang))
    for c in checks:  # the names that are words, not packages, in the reader's language
        if c.name in LABELS:
            c.label = t(LABELS[c.name])
    return checks


LABELS = {
    "kernels": "doc_name_kernels",
    "backend": "doc_name_backend",
    "browser": "doc_name_browser",
    "model": "doc_name_model",
    "torch build": "doc_name_torch_build",
}


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


def _torch_build_check(torch: Any, lang: str = "en") -> Check | None:
    """A WARN when the CUDA build of torch sits on a machine with no NVIDIA GPU."""
    if torch.version.cuda is None or torch.cuda.is_available() or nvidia_gpu_present():
        return None
    t = _words(lang)
    size = installed_bytes(lambda n: n == "torch" or n.startswith("nvidia-"))
    detail = t("doc_cuda_build", version=torch.__version__, cuda=torch.version.cuda, gb=size / 1e9)
    fix = t("doc_cuda_build_fix", index=CPU_INDEX)
    return Check("torch build", False, detail, fix, required=False)


def _backend_checks(lang: str = "en") -> list[Check]:
    """What the commands run (their ``--backend`` default) and what Python code runs."""
    from pdlab.kernels import backend
    from pdlab.ui.choices import kernels_line
    from pdlab.ui.tour import DEFAULT_BACKEND as default

    t = _words(lang)
    out = []
    lead = t("doc_kernels_lead", default=default)
    try:
        backend.check("triton", "flag")
        how = t("doc_interpreted") if not backend.cuda_available() else t("doc_compiled")
        out.append(Check("kernels", True, t("doc_kernels_triton", lead=lead, how=how)))
    except ValueError as e:
        if not backend.triton_installed():  # the triton line above says so already
            out.append(Check("kernels", True, t("doc_kernels_needs", lead=lead)))
        else:
            detail = t("doc_kernels_bad", lead=lead, error=error_text(e, lang))
            out.append(Check("kernels", False, detail, t("doc_kernels_fix"), required=False))
    try:
        described = kernels_line(lang)
        out.append(Check("backend", True, t("doc_backend_ok", described=described)))
    except Exception as e:  # noqa: BLE001
        msg = str(e)
        if "PDLAB_CHECK_INDICES" in msg:
            advice = t("doc_fix_check_indices")
        elif "PDLAB_BACKEND" in msg:
            advice = t("doc_fix_backend_env")
        else:
            advice = t("doc_fix_backend")
        detail = t("doc_backend_failed", error=error_text(e, lang))
        out.append(Check("backend", False, detail, advice))
    return out


def _browser_check(lang: str = "en") -> Check:
    """``pdlab lab`` opens a web browser when one is registered (else prints the address)."""
    import webbrowser

    t = _words(lang)
    try:
        name = getattr(webbrowser.get(), "name", "") or t("doc_browser_found")
    except webbrowser.Error:
        return Check("browser", False, t("doc_no_browser"), t("doc_no_browser_fix"), required=False)
    return Check("browser", True, t("doc_browser_ok", name=name))


def _widgets_check(lang: str = "en") -> Check:
    t = _words(lang)
    v = _version("ipywidgets")
    if v is None:
        return Check("ipywidgets", False, t("doc_not_installed"), t("doc_widgets_fix"))
    ext = _version("jupyterlab_widgets")
    # JupyterLab loads prebuilt extensions from the "labextensions" folder of each Jupyter
    # data path (this environment's share/jupyter among them): look where it will look.
    try:
        from jupyter_core.paths import jupyter_path

        folders = jupyter_path("labextensions")
    except ImportError:
        folders = [os.path.join(sys.prefix, "share", "jupyter", "labextensions")]
    manager = os.path.join("@jupyter-widgets", "jupyterlab-manager")
    found = [f for f in folders if os.path.isdir(os.path.join(f, manager))]
    if ext is None or not found:
        detail = t("doc_widgets_no_ext", version=v)
        return Check("ipywidgets", False, detail, t("doc_widgets_ext_fix"))
    return Check("ipywidgets", True, t("doc_widgets_ok", version=v, ext=ext))


def _smoke_check(lang: str = "en") -> Check:
    """Run the tiny model once, so OK means the numbers flow, not just that imports work."""
    t = _words(lang)
    try:
        from pdlab.engine.config import ModelConfig
        from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM

        t0 = time.perf_counter()
        model = DeepseekV2ForCausalLM(ModelConfig.tiny())
        logits = model.forward_full(list(range(16)))
        ms = (time.perf_counter() - t0) * 1e3
        if not bool(logits.isfinite().all()):
            return Check("model", False, t("doc_model_nonfinite"), t("doc_report"))
        return Check("model", True, t("doc_model_ok", ms=ms))
    except Exception as e:  # noqa: BLE001
        detail = t("doc_model_failed", error=error_text(e, lang))
        return Check("model", False, detail, t("doc_report"))


def run_aot(console: Any, lang: str = "en") -> Check:
    """Compile every Triton kernel for sm_80 and sm_90 and print a row per build
    (``pdlab/tools/aot.py``); the summary line as a :class:`Check` (a warning when triton
    or its toolchain is missing)."""
    from pdlab.kernels.backend import triton_installed

    t = _words(lang)
    label = t("doc_name_aot")
    warning = {"required": False, "label": label}
    if not triton_installed():
        return Check("aot", False, t("doc_aot_no_triton"), t("doc_aot_no_triton_fix"), **warning)
    aot = importlib.import_module("pdlab.tools.aot")
    try:
        results = aot.run_aot_check()
    except Exception as e:  # noqa: BLE001 - a toolchain that cannot run is a warning
        detail = t("doc_aot_no_compiler", error=error_text(e, lang))
        return Check("aot", False, detail, t("doc_aot_no_compiler_fix"), **warning)
    console.print(aot.render_table(results, lang))
    bad = [r for r in results if not r.ok]
    spilling = sum(1 for r in results if r.ok and r.spills)
    spills = t("doc_aot_spilling", n=spilling) if spilling else t("doc_aot_no_spills")
    summary = t("doc_aot_summary", ok=len(results) - len(bad), n=len(results), spills=spills)
    return Check("aot", not bad, summary, t("doc_aot_fix"), label=label)


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
        grid.add_row(f"[{colour[c.tag]}]\\[{c.tag}][/]", c.label or c.name, escape(c.detail + fix))
    return grid


def main(aot: bool = False, lang: str = "en") -> int:
    from pdlab.ui.console import make_console

    t = _words(lang)
    console = make_console()
    checks = run_checks(lang)
    console.print(render(checks))
    if aot:
        summary = run_aot(console, lang)
        console.print(render([summary]))
        checks.append(summary)
    ok = all(c.ok or not c.required for c in checks)
    warned = any(not c.ok and not c.required for c in checks)
    verdict = "doc_can_run_warned" if warned else "doc_can_run"
    console.print(t(verdict if ok else "doc_cannot_run"))
    return 0 if ok else 1
