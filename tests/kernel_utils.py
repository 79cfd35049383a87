"""Shared pieces of the kernel tests: device, implementations, tolerances, a trapped paged cache.

Every kernel is compared with the oracle (``pdlab.attention.reference``) evaluated in fp32 on
the same inputs (already rounded to the test dtype), never with its twin.

Tolerances (``atol = rtol``) for ``out``; LSE is computed in fp32 from exact products, so it
is held tighter in the half types:

========  ==========================  ==========================
dtype     out                         lse
========  ==========================  ==========================
fp32      1e-5 (interpreter, torch)   1e-5
          5e-3 on a GPU (TF32 dots)   5e-3 on a GPU
fp16      3e-3                        2e-3
bf16      2e-2                        2e-3 (5e-3 on a GPU)
========  ==========================  ==========================

The paged cache is built to catch a kernel reading where it should not: pages are a random
permutation of block ids, every slot no request owns is NaN, and unused block-table entries
point at an all-NaN page.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from pdlab.kernels.backend import triton_installed

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
ON_GPU = DEVICE.type == "cuda"
HAS_TRITON = triton_installed()
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

_OUT_TOL = {torch.float32: 5e-3 if ON_GPU else 1e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}
_LSE_TOL = {
    torch.float32: 5e-3 if ON_GPU else 1e-5,
    torch.float16: 2e-3,
    torch.bfloat16: 5e-3 if ON_GPU else 2e-3,
}


def impl(backend: str, dtype: str, *marks) -> pytest.param:
    """One (backend, dtype) case; Triton cases skip where triton is not installed."""
    skip = pytest.mark.skipif(backend == "triton" and not HAS_TRITON, reason="needs triton")
    return pytest.param(backend, DTYPES[dtype], marks=(skip, *marks), id=f"{backend}-{dtype}")


# Triton in fp32 and fp16 (on the interpreter) and bf16 (upcast on the interpreter, tensor
# cores on a GPU); the torch twins in every dtype.
ALL_IMPLS = [
    impl("triton", "fp32"),
    impl("triton", "fp16"),
    impl("triton", "bf16"),
    impl("torch", "fp32"),
    impl("torch", "fp16"),
    impl("torch", "bf16"),
]
# For the larger grids: each backend in fp32 and one half type, bf16 on the twins, and
# Triton in bf16 too where it is compiled (a GPU), bf16 being what serving runs.
MAIN_IMPLS = [
    impl("triton", "fp32"),
    impl("triton", "fp16"),
    *([impl("triton", "bf16")] if ON_GPU else []),
    impl("torch", "fp32"),
    impl("torch", "bf16"),
]


def assert_close(
    actual: torch.Tensor,
    expected: torch.Tensor,
    dtype: torch.dtype,
    lse: bool = False,
    what: str = "",
) -> None:
    tol = (_LSE_TOL if lse else _OUT_TOL)[dtype]
    torch.testing.assert_close(
        actual.float().cpu(),
        expected.float().cpu(),
        atol=tol,
        rtol=tol,
        msg=lambda m: f"{what}: {m}",
    )


def randn(*shape: int, g: torch.Generator, dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    """Random values rounded to ``dtype`` on the test device (the oracle sees the same)."""
    return (torch.randn(*shape, generator=g) * scale).to(dtype).to(DEVICE)


def cu_seqlens(lens: list[int]) -> torch.Tensor:
    out = [0]
    for n in lens:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32, device=DEVICE)


@dataclass
class PagedCache:
    kv_cache: torch.Tensor  # [num_blocks, block_size, width]; NaN where no request owns
    block_table: torch.Tensor  # int32 [B, max_blocks]; unused entries -> an all-NaN page
    seq_lens: torch.Tensor  # int32 [B]
    rows: list[torch.Tensor]  # per request, its cached rows [n, width] in order

    def slot_mapping(self, req: int, positions: torch.Tensor) -> torch.Tensor:
        """int64 slots of ``positions`` of request ``req``."""
        bs = self.kv_cache.shape[1]
        pages = self.block_table[req].long()[positions.to(DEVICE) // bs]
        return pages * bs + positions.to(DEVICE) % bs


def paged_cache(
    seq_lens: list[int],
    block_size: int,
    width: int,
    dtype: torch.dtype,
    g: torch.Generator,
    fill: bool = True,
    spare_pages: int = 2,
) -> PagedCache:
    """A paged cache holding random rows for each request (``fill``) or only NaN."""
    pages = [-(-n // block_size) for n in seq_lens]
    num_blocks = sum(pages) + max(1, spare_pages)
    perm = torch.randperm(num_blocks, generator=g)
    nan_page = int(perm[-1])  # owned by no one, stays NaN
    table = torch.full((len(seq_lens), max(pages, default=0) + 2), nan_page, dtype=torch.int32)
    cache = torch.full((num_blocks, block_size, width), float("nan"), dtype=dtype)
    rows, k = [], 0
    for i, n in enumerate(seq_lens):
        table[i, : pages[i]] = perm[k : k + pages[i]].to(torch.int32)
        k += pages[i]
        r = (torch.randn(n, width, generator=g)).to(dtype)
        if fill:
            pos = torch.arange(n)
            cache[table[i, pos // block_size].long(), pos % block_size] = r
        rows.append(r.to(DEVICE))
    return PagedCache(
        cache.to(DEVICE),
        table.to(DEVICE),
        torch.tensor(seq_lens, dtype=torch.int32, device=DEVICE),
        rows,
    )


def kernel_result(gpu: bool) -> dict:
    """A result as :func:`bench_kernels` returns it, one on a GPU (shares of peak) and one on a
    CPU (twins beside dense versions, a failed case): the table needs no timing to test."""
    from pdlab.tools import bench_kernels as bk

    if gpu:
        rows = [
            {"kernel": "mla_decode", "impl": "triton", "dtype": "bf16", "ms": 0.412,
             "shape": "B=64 ctx=4096 H=128 L+R=512+64 page=64 q_len=3",
             "gbps": 3911.7, "share_of_peak": 0.814},
            {"kernel": "flash_attn_varlen", "impl": "triton", "dtype": "bf16", "ms": 1.25,
             "shape": "B=4 S=2048 H=128 QK=192 V=128 causal", "tflops": 512.34,
             "share_of_peak": 0.518},
            {"kernel": "sdpa prefill H=16", "impl": "-", "dtype": "-", "shape": "-",
             "ms": None, "error": "RuntimeError: no available kernel [flash, mem_efficient]"},
        ]  # fmt: skip
        return {"device": "NVIDIA H200", "gpu": True, "note": bk.GPU_NOTE, "rows": rows,
                "peak_tflops": 989.0, "peak_gbps": 4800.0, "torch": "2.13.0"}  # fmt: skip
    rows = [
        {"kernel": "reshape_and_cache_mla", "impl": "torch", "dtype": "fp32",
         "shape": "T=128 L+R=64+16", "ms": 0.094},
        {"kernel": "mla_decode", "impl": "torch", "dtype": "fp32", "ms": 5.143,
         "shape": "B=1 ctx=1024 H=128 L+R=512+64 page=64 splits=auto",
         "dense_ms": 3.401, "vs_dense": 5.143 / 3.401},
    ]  # fmt: skip
    return {"device": "cpu", "gpu": False, "note": bk.CPU_NOTE, "rows": rows,
            "peak_tflops": None, "peak_gbps": None, "torch": "2.13.0"}  # fmt: skip
