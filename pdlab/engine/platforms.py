"""Which MLA backend vLLM picks on a given machine, so pdlab can follow its routing.

Mirrors ``_get_backend_priorities`` in ``vllm/platforms/cuda.py`` (vLLM 0.33.0, dense MLA)
and the MLA choice of ``vllm/platforms/cpu.py``: the platform walks a priority list for
the GPU's compute capability and takes the first backend whose
``supports_compute_capability`` accepts it and whose ``supported_kv_cache_dtypes`` hold
the KV cache dtype. The table is for the default (``auto``: the model's bf16); with
``kv_cache_dtype="fp8"`` FLASH_ATTN_MLA refuses the cache, so an H100/H200 runs FLASHMLA
(threshold 128, UNIFORM), and the CPU platform's CPU_MLA takes ``auto`` only.

=============  ==========================================================  ==============
capability     priority list (dense MLA)                                    first usable
=============  ==========================================================  ==============
sm_90 (H100,   FLASH_ATTN_MLA, FLASHMLA, FLASHINFER_MLA, TRITON_MLA          FLASH_ATTN_MLA
H200, H800)
sm_100 (B200)  FLASHINFER_MLA, TOKENSPEED_MLA*, CUTLASS_MLA, FLASH_ATTN_MLA,  FLASHINFER_MLA
               FLASHMLA, TRITON_MLA
sm_120         TRITON_MLA                                                   TRITON_MLA
sm_80 (A100)   the sm_90 list; only TRITON_MLA supports sm_80                TRITON_MLA
CPU            CPU_MLA (AMX_MLA where the CPU has AMX)                      CPU_MLA
=============  ==========================================================  ==============

\\* TOKENSPEED_MLA takes only DeepSeek-R1 widths with an FP8 KV cache, so a bf16 cache
skips it. pdlab checks the compute capability only, not the dtype, head size or block
size checks each backend also makes (DeepSeek's widths pass them on these GPUs).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import Enum

from pdlab.errors import PdlabValueError, Phrase, invalid

# name -> (what the learner reads, compute capability; None for the CPU platform)
GPUS: dict[str, tuple[str, tuple[int, int] | None]] = {
    "cpu": ("CPU (no GPU)", None),
    "a100": ("NVIDIA A100", (8, 0)),
    "h100": ("NVIDIA H100", (9, 0)),
    "h800": ("NVIDIA H800", (9, 0)),
    "h200": ("NVIDIA H200", (9, 0)),
    "b200": ("NVIDIA B200", (10, 0)),
    "gb200": ("NVIDIA GB200", (10, 0)),
    "rtx5090": ("NVIDIA GeForce RTX 5090", (12, 0)),
}

# The KV cache dtypes each backend's supported_kv_cache_dtypes holds (of pdlab's two).
KV_CACHE_DTYPES = ("auto", "fp8")
_SUPPORTS_FP8 = {"flashmla", "flashinfer_mla", "cutlass_mla", "triton_mla"}

# What each backend's supports_compute_capability accepts (by major version).
_SUPPORTS_MAJOR: dict[str, tuple[int, ...] | None] = {
    "flash_attn_mla": (9,),
    "flashmla": (9, 10),
    "flashinfer_mla": (10,),
    "cutlass_mla": (10,),
    "triton_mla": None,  # any
}


def backend_priorities(capability: tuple[int, int] | None) -> list[str]:
    """The platform's dense-MLA priority list for a compute capability (None: the CPU)."""
    if capability is None:
        return ["cpu_mla"]
    major = capability[0]
    if major == 10:
        return ["flashinfer_mla", "cutlass_mla", "flash_attn_mla", "flashmla", "triton_mla"]
    if major == 12:
        return ["triton_mla"]
    return ["flash_attn_mla", "flashmla", "flashinfer_mla", "triton_mla"]


class Chosen(str, Enum):
    """How the MLA backend to follow was chosen: a fact that the views put in words
    (``pdlab.ui.choices``)."""

    NAMED = "named"  # the learner named the GPU (gpu="h200", --gpu h200)
    ENV = "env"  # the PDLAB_GPU environment variable named it
    LOCAL = "local"  # this machine's CUDA device
    NONE = "none"  # no GPU named and none here: the CPU platform
    BACKEND = "backend"  # the learner named the backend: the platform was not asked


@dataclass(frozen=True)
class BackendChoice:
    """The backend the platform picks and the facts it picked by: the GPU (a key of
    :data:`GPUS`) and how it was chosen, its compute capability (None: the CPU platform),
    the KV cache dtype, and the priority list walked for that capability; ``backend`` is the
    list's first entry that accepts both the capability and the dtype."""

    backend: str
    gpu: str
    how: Chosen
    capability: tuple[int, int] | None
    kv_cache_dtype: str
    priorities: tuple[str, ...]


def _local_gpu() -> str | None:
    """The name in :data:`GPUS` of this machine's first CUDA device, if it has one."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        name = torch.cuda.get_device_name(0).lower().replace(" ", "")
    except Exception:  # noqa: BLE001 - no usable CUDA: treat as no GPU
        return None
    return next((key for key in GPUS if key != "cpu" and key in name), None)


def check_gpu(gpu: str, name: str = "gpu") -> str:
    """``gpu`` as a key of :data:`GPUS`, or ``ValueError`` naming ``name`` (the argument or
    the environment variable that gave it) and what is allowed."""
    key = re.sub("[ _-]", "", gpu.lower()) if isinstance(gpu, str) else None
    if key not in GPUS:
        raise invalid(name, gpu, Phrase("err_x_one_of", choices=tuple(GPUS)))
    return key


def select_mla_backend(gpu: str | None = None, kv_cache_dtype: str = "auto") -> BackendChoice:
    """The MLA backend vLLM 0.33.0 would run on ``gpu`` with a ``kv_cache_dtype`` cache
    (``"auto"``, the model's dtype, or ``"fp8"``).

    ``gpu`` None means: the ``PDLAB_GPU`` environment variable if set, else this machine's
    CUDA device if it has a known one, else the CPU platform."""
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        allowed = Phrase("err_x_one_of", choices=KV_CACHE_DTYPES)
        raise invalid("kv_cache_dtype", kv_cache_dtype, allowed)
    how = Chosen.NAMED
    if gpu is None:
        env = os.environ.get("PDLAB_GPU")
        if env:
            gpu, how = env, Chosen.ENV
        else:
            gpu = _local_gpu()
            how = Chosen.LOCAL if gpu else Chosen.NONE
            gpu = gpu or "cpu"
    key = check_gpu(gpu, "PDLAB_GPU" if how == Chosen.ENV else "gpu")
    _, cap = GPUS[key]
    priorities = tuple(backend_priorities(cap))
    for b in priorities:
        ok = _SUPPORTS_MAJOR.get(b)
        if kv_cache_dtype == "fp8" and b not in _SUPPORTS_FP8:
            continue
        if cap is None or ok is None or cap[0] in ok:
            return BackendChoice(b, key, how, cap, kv_cache_dtype, priorities)
    # The CPU's label is the views' (their Chinese names it too); a GPU's is its model.
    platform = Phrase("pf_cpu_label") if key == "cpu" else GPUS[key][0]
    raise PdlabValueError("err_dtype_on_platform", dtype=kv_cache_dtype, platform=platform)
