"""Which implementation runs the kernels: decided once, here.

* ``"triton"`` compiled, where a CUDA device is present;
* ``"triton"`` through the interpreter (``TRITON_INTERPRET=1``) on a Linux CPU, where
  triton is installed (it has no macOS or Windows wheels);
* ``"torch"`` everywhere else: the readable twins of the same algorithms.

Override with the environment variable ``PDLAB_BACKEND`` (``auto``, ``triton``, ``torch``),
with :func:`set_backend`, or for a block of code with ``with use_backend("torch"): ...``.
Every way of choosing is checked by :func:`check` before any work: triton must be
installed, and without a CUDA device ``TRITON_INTERPRET`` must ask for the interpreter (a
value Triton would silently read as off, :func:`interpret_setting`, is refused).

Triton reads ``TRITON_INTERPRET`` when ``@triton.jit`` decorates a function, so this module
sets it before ``pdlab.kernels`` imports any kernel module (``pdlab/kernels/__init__.py``
imports this file first). Mirrors the role of ``vllm/platforms`` in choosing a backend.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import os
import sys
from collections.abc import Iterator

import torch

from pdlab.errors import Names, PdlabValueError, Phrase, either, invalid, noted

BACKENDS = ("triton", "torch")
ENV_VAR = "PDLAB_BACKEND"


def triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def cuda_available() -> bool:
    return torch.cuda.is_available()


def _auto() -> str:
    if not triton_installed():
        return "torch"
    if cuda_available() or (sys.platform.startswith("linux") and triton_interpreting()):
        return "triton"
    return "torch"


def _from_env() -> str:
    value = os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"
    if value == "auto":
        return _auto()
    if value not in BACKENDS:
        allowed = Phrase("err_x_one_of", choices=Names(("auto", "triton", "torch")))
        raise invalid(ENV_VAR, value, allowed)
    return check(value, "env")


# Read on first use, not at import: a bad PDLAB_BACKEND must not stop ``import pdlab`` (and
# with it ``pdlab --help`` and ``pdlab doctor``, which reports it); the first kernel call or
# ``get_backend()`` raises the ValueError instead.
_default: str | None = None
# Interpret on a machine without a CUDA device, unless the user already chose.
if triton_installed() and not cuda_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

_override: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "pdlab_backend", default=None
)


# How each way of choosing names the choice, and the way out, in its own words.
_GIVEN = {
    "api": ("backend={name!r}", "backend='torch'"),
    "flag": ("--backend {name}", "--backend torch"),
    "env": (ENV_VAR + "={name}", ENV_VAR + "=torch (or auto)"),
}
_ON, _OFF = ("1", "true", "on", "yes"), ("0", "false", "off", "no", "")


def interpret_setting() -> str:
    """``TRITON_INTERPRET`` as Triton will read it: ``"on"``, ``"off"`` or ``"invalid"`` (a
    value Triton silently reads as off, such as ``maybe`` or ``2``)."""
    v = os.environ.get("TRITON_INTERPRET", "0").strip().lower()
    return "on" if v in _ON else "off" if v in _OFF else "invalid"


def check(name: str, given: str = "api") -> str:
    """``name`` if it can run here, else ``ValueError`` with one line naming the choice as
    it was given (``given``: ``"api"``, ``"flag"`` or ``"env"``) and what to do instead."""
    what, instead = (x.format(name=name) for x in _GIVEN[given])
    if name not in BACKENDS:
        allowed = Phrase("err_x_one_of", choices=Names(BACKENDS))
        raise PdlabValueError("err_subject_invalid", subject=what, allowed=allowed)
    if name != "triton":
        return name
    if not triton_installed():
        raise PdlabValueError("err_needs_triton", what=what, instead=instead)
    setting, raw = interpret_setting(), os.environ.get("TRITON_INTERPRET", "")
    if setting == "invalid":
        allowed = either(noted(1, "err_n_interpreter"), noted(0, "err_n_compile"))
        raise PdlabValueError("err_triton_interpret", what=what, raw=raw, allowed=allowed)
    if setting == "off" and not cuda_available():
        raise PdlabValueError("err_no_gpu_to_compile", what=what, raw=raw, instead=instead)
    return name


def get_backend() -> str:
    """The backend in force: a ``use_backend`` block, else the process default
    (``PDLAB_BACKEND`` on first use; a bad value raises ``ValueError`` naming it)."""
    global _default
    if _override.get():
        return _override.get()  # type: ignore[return-value]
    if _default is None:
        _default = _from_env()
    return _default


def set_backend(name: str) -> None:
    """Change the process default (``"triton"`` or ``"torch"``)."""
    global _default
    _default = check(name)


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[str]:
    """Run a block of code on one backend: ``with use_backend("torch"): ...``."""
    token = _override.set(check(name))
    try:
        yield name
    finally:
        _override.reset(token)


def resolve(backend: str | None) -> str:
    """The backend for one call: an explicit argument wins over the one in force."""
    return get_backend() if backend is None else check(backend)


def triton_interpreting() -> bool:
    """True when Triton kernels run through the CPU interpreter (``TRITON_INTERPRET`` read
    the way Triton reads it)."""
    return interpret_setting() == "on"


def in_force() -> tuple[str, str]:
    """The backend in force for Python code and why, as a code: ``"torch"`` with ``"chosen"``,
    ``"no_triton"`` or ``"no_gpu"``, or ``"triton"`` with ``"interpreted"`` or ``"compiled"``
    (put in words by ``pdlab.ui.choices.kernels_line``)."""
    name = get_backend()
    if name == "torch":
        if (os.environ.get(ENV_VAR, "auto").strip().lower() or "auto") == "torch":
            return name, "chosen"
        return name, "no_triton" if not triton_installed() else "no_gpu"
    return name, "interpreted" if triton_interpreting() else "compiled"
