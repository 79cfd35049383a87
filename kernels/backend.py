"""Which implementation runs the kernels: decided once, here.

* ``"triton"`` compiled, where a CUDA device is present;
* ``"triton"`` through the interpreter (``TRITON_INTERPRET=1``) on a Linux CPU, where
  triton is installed (it has no macOS or Windows wheels);
* ``"torch"`` everywhere else: the readable twins of the same algorithms.

Override with the environment variable ``PDLAB_BACKEND`` (``auto``, ``triton``, ``torch``),
with :func:`set_backend`, or for a block of code with ``with use_backend("torch"): ...``.

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

BACKENDS = ("triton", "torch")
ENV_VAR = "PDLAB_BACKEND"


def triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def cuda_available() -> bool:
    return torch.cuda.is_available()


def _auto() -> str:
    if not triton_installed():
        return "torch"
    if cuda_available() or sys.platform.startswith("linux"):
        return "triton"
    return "torch"


def _from_env() -> str:
    value = os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"
    if value == "auto":
        return _auto()
    if value not in BACKENDS:
        raise ValueError(f"{ENV_VAR}={value!r} is invalid: expected one of auto, triton, torch")
    if value == "triton" and not triton_installed():
        raise ValueError(
            f"{ENV_VAR}=triton but triton is not installed "
            "(it has Linux wheels only); use auto or torch"
        )
    return value


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


def _check(name: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"backend={name!r} is invalid: expected one of {BACKENDS}")
    if name == "triton" and not triton_installed():
        raise ValueError(
            "backend='triton' needs triton, which is not installed "
            "(it has Linux wheels only); use backend='torch'"
        )
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
    _default = _check(name)


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[str]:
    """Run a block of code on one backend: ``with use_backend("torch"): ...``."""
    token = _override.set(_check(name))
    try:
        yield name
    finally:
        _override.reset(token)


def resolve(backend: str | None) -> str:
    """The backend for one call: an explicit argument wins over the one in force."""
    return get_backend() if backend is None else _check(backend)


def triton_interpreting() -> bool:
    """True when Triton kernels run through the CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def describe() -> str:
    """One line for ``pdlab doctor`` and the tour's header. Raises ``ValueError`` naming a
    bad ``PDLAB_BACKEND`` or ``PDLAB_CHECK_INDICES``, which the doctor reports."""
    from pdlab.kernels.checks import index_checks_enabled

    index_checks_enabled()
    name = get_backend()
    if name == "torch":
        why = "triton not installed" if not triton_installed() else f"chosen via {ENV_VAR}"
        return f"torch ({why})"
    if triton_interpreting():
        return "triton (interpreter, TRITON_INTERPRET=1, CPU)"
    return f"triton (compiled, {torch.cuda.get_device_name(0)})"
