"""What every kernel file shares: triton (or its absence), input checks, tile widths, and
the bf16 interpreter rule.

* ``triton``/``tl``: Triton has Linux wheels only. Where it is missing the kernel files
  still import (``@triton.jit`` leaves the function as plain Python, never called) and the
  torch twins run (``backend.py`` picks "torch" there).
* ``check(...)`` helpers raise ``ValueError`` naming the argument and what was expected, so a
  wrong shape fails in Python with a sentence instead of deep inside a kernel launch.
* ``block(n)``: ``tl.arange`` needs a power of two, and ``tl.dot`` needs every dimension to
  be at least 16 to compile for a GPU (TRITON.md): 576 = 512 + 64, or the tiny model's 80,
  is padded up to a tile and masked.
* ``upcast(dtype)``: Triton's CPU interpreter computes bf16 arithmetic wrongly (errors near
  1e10 in ``tl.dot``, measured with triton 3.9), but loading bf16 and converting to fp32
  before any math is correct. The kernels that multiply bf16 tiles take a ``UPCAST``
  constexpr that does exactly that, set whenever the interpreter meets bf16 (a launch
  without it is refused); the others convert every load to fp32 anyway, or only copy.
  Outputs are then written to an fp32 buffer and rounded to bf16 by torch, because the
  interpreter's fp32 -> bf16 store does not round to nearest either. Compiled on a GPU,
  ``UPCAST`` is False and bf16 tiles go to the tensor cores as they are.
"""

from __future__ import annotations

import types

import torch

from pdlab.errors import PdlabRuntimeError, PdlabValueError
from pdlab.kernels.backend import triton_installed, triton_interpreting
from pdlab.kernels.decode_plan import block  # noqa: F401 - every kernel file's tile widths

if triton_installed():
    import triton
    import triton.language as tl
else:  # the kernels stay plain functions; nothing launches them without triton
    triton = types.SimpleNamespace(jit=lambda fn: fn, cdiv=lambda a, b: -(-a // b))
    tl = None

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def device_target(device: torch.device) -> int:
    """Compute capability as an int (90 for sm_90); 90 without a GPU, as the AOT build."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return 10 * major + minor
    return 90


def upcast(dtype: torch.dtype) -> bool:
    """Whether kernels must convert loads to fp32 before any math (bf16 on the interpreter)."""
    return dtype == torch.bfloat16 and triton_interpreting()


def guard_interpreter_dtype(dtype: torch.dtype, upcast_flag: bool) -> None:
    """Refuse a bf16 launch on the interpreter without the fp32 upcast: it would return wrong
    numbers silently."""
    if dtype == torch.bfloat16 and triton_interpreting() and not upcast_flag:
        raise PdlabRuntimeError("err_bf16_interpreter")


def check_launchable(kernel: object) -> None:
    """Refuse a launch that would fail obscurely: Triton decorates its own library
    (``tl.zeros``, ``tl.max``, ...) when triton is imported, and pdlab's kernels when
    ``pdlab.kernels`` is. If ``TRITON_INTERPRET`` was set in between (triton imported first,
    then ``backend.py`` turned the interpreter on), the two flavours disagree."""
    if type(kernel) is not type(tl.zeros):
        raise PdlabRuntimeError("err_triton_imported_first")


def out_buffer(
    shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, upcast_flag: bool
) -> torch.Tensor:
    return torch.empty(shape, dtype=torch.float32 if upcast_flag else dtype, device=device)


def fail(name: str, got: str, expected: str) -> None:
    raise PdlabValueError("err_expected_got", name=name, expected=expected, got=got)


def check_tensor(
    name: str, t: object, ndim: int | None = None, dtypes: tuple[torch.dtype, ...] | None = None
) -> torch.Tensor:
    """``t`` is a tensor with ``ndim`` dimensions and one of ``dtypes``."""
    if not isinstance(t, torch.Tensor):
        fail(name, type(t).__name__, "a torch.Tensor")
    if ndim is not None and t.dim() != ndim:
        fail(name, f"shape {tuple(t.shape)}", f"{ndim} dimensions")
    if dtypes is not None and t.dtype not in dtypes:
        fail(name, str(t.dtype), "dtype " + " or ".join(str(d) for d in dtypes))
    return t


def check_dim(name: str, t: torch.Tensor, dim: int, size: int, what: str) -> None:
    """``t.shape[dim] == size``, where ``what`` says where the size comes from."""
    if t.shape[dim] != size:
        fail(name, f"shape {tuple(t.shape)}", f"size {size} in dimension {dim} ({what})")


def check_same_device(**tensors: torch.Tensor) -> None:
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        raise PdlabValueError("err_same_device", devices=devices)
