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
from dataclasses import dataclass

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


@dataclass(frozen=True)
class BackendChoice:
    """The backend the platform picks, for which GPU, and why (one line for the views);
    ``how`` is how the GPU was chosen: ``"named"``, ``"env"`` (``PDLAB_GPU``), ``"local"``
    (this machine's) or ``"none"`` (no GPU named and none here)."""

    backend: str
    gpu: str
    reason: str
    how: str = "named"


def reason_text(gpu: str, backend: str, how: str, lang: str = "en") -> str:
    """Why ``backend`` runs, in ``lang``: the views' one line, from the trace's fields."""
    from pdlab.catalog import text

    label, cap = GPUS[gpu]
    if cap is None:
        label = text(lang, "pf_cpu_label")
    where = text(lang, "pf_cpu") if cap is None else f"sm_{cap[0]}{cap[1]}"
    return text(
        lang, f"pf_{how}", gpu=label, where=where, backend=backend.upper(), flag="--gpu h200"
    )


def routing_reason(routing: dict, lang: str = "en") -> str:
    """Why the profile in a trace's ``meta["routing"][instance]`` was followed, in
    ``lang`` (the English line is also kept there as ``selected_by``)."""
    how, backend = routing.get("selected_how"), routing["mla_backend"]
    if how == "backend":
        from pdlab.catalog import text
        from pdlab.config.attention import MLA_BACKENDS

        return text(lang, "pf_backend", backend=MLA_BACKENDS[backend].name)
    if how in ("named", "env", "local", "none") and routing.get("gpu"):
        return reason_text(routing["gpu"], backend, how, lang)
    return routing.get("selected_by", backend)


def _local_gpu() -> str | None:
    """The name in :data:`GPUS` of this machine's first CUDA device, if it has one."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        name = torch.cuda.get_device_name(0).lower().replace(" ", "")
    except Exception:  # noqa: BLE001 - no usable CUDA: treat as no GPU
        return None
    for key in GPUS:
        if key != "cpu" and key in name:
            return key
    return None


def check_gpu(gpu: str) -> str:
    """``gpu`` as a key of :data:`GPUS`, or ``ValueError`` naming what is allowed."""
    key = (
        gpu.lower().replace(" ", "").replace("-", "").replace("_", "")
        if isinstance(gpu, str)
        else None
    )
    if key not in GPUS:
        raise ValueError(f"gpu={gpu!r} is invalid: expected one of {tuple(GPUS)}")
    return key


def select_mla_backend(gpu: str | None = None, kv_cache_dtype: str = "auto") -> BackendChoice:
    """The MLA backend vLLM 0.33.0 would run on ``gpu`` with a ``kv_cache_dtype`` cache
    (``"auto"``, the model's dtype, or ``"fp8"``).

    ``gpu`` None means: the ``PDLAB_GPU`` environment variable if set, else this machine's
    CUDA device if it has a known one, else the CPU platform."""
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise ValueError(
            f"kv_cache_dtype={kv_cache_dtype!r} is invalid: expected one of {KV_CACHE_DTYPES}"
        )
    how = "named"
    if gpu is None:
        env = os.environ.get("PDLAB_GPU")
        if env:
            gpu, how = env, "env"
        else:
            gpu = _local_gpu()
            how = "local" if gpu else "none"
            gpu = gpu or "cpu"
    key = check_gpu(gpu) if how != "env" else _check_env_gpu(gpu)
    _, cap = GPUS[key]
    for b in backend_priorities(cap):
        ok = _SUPPORTS_MAJOR.get(b)
        if kv_cache_dtype == "fp8" and b not in _SUPPORTS_FP8:
            continue
        if cap is None or ok is None or cap[0] in ok:
            return BackendChoice(b, key, reason_text(key, b, how), how)
    raise ValueError(
        f"kv_cache_dtype={kv_cache_dtype!r} is invalid on {GPUS[key][0]}: no MLA backend of "
        "its platform takes it (CPU_MLA takes 'auto' only)"
    )


def _check_env_gpu(gpu: str) -> str:
    try:
        return check_gpu(gpu)
    except ValueError:
        raise ValueError(f"PDLAB_GPU={gpu!r} is invalid: expected one of {tuple(GPUS)}") from None
