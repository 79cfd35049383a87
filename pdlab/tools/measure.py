"""How the tools measure: timers, this machine's ceilings (:func:`measure_ceilings`) and a
kernel's roofline floor from them (:func:`floor_ms`), published peaks (from
``pdlab/sim/peaks.py``), a shuffled test cache. vLLM 0.33.0 has no counterpart in its
package (its kernel benchmarks are scripts outside it).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from pdlab.sim.peaks import PEAKS, published_peak

__all__ = ["PEAKS", "published_peak"]  # re-exported: pdlab/sim/peaks.py


def device_peaks(device: torch.device) -> tuple[float | None, float | None]:
    """(bf16 TFLOP/s, GB/s) of a CUDA device, from its name, else from its memory clock."""
    name = torch.cuda.get_device_name(device)
    for key, tflops, gbps in PEAKS:
        if key in name:
            return tflops, gbps
    props = torch.cuda.get_device_properties(device)
    clock_khz = getattr(props, "memory_clock_rate", 0)
    bus_bits = getattr(props, "memory_bus_width", 0)
    gbps = 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9 if clock_khz and bus_bits else None
    return None, gbps


def median_ms(fn: Callable[[], Any], device: torch.device, repeats: int) -> float:
    """Median milliseconds of ``fn`` over ``repeats`` runs after a warm-up (which also
    compiles, on a GPU): CUDA events on a GPU, the wall clock elsewhere."""
    cuda = device.type == "cuda"
    for _ in range(3 if cuda else 1):
        fn()
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def time_cuda(fn: Callable[[], Any], quick: bool) -> float:
    return median_ms(fn, torch.device("cuda"), 5 if quick else 20)


def time_cpu(fn: Callable[[], Any], quick: bool) -> float:
    return median_ms(fn, torch.device("cpu"), 3 if quick else 10)


def time_pair(a: Callable[[], Any], b: Callable[[], Any], quick: bool) -> tuple[float, float]:
    """Fastest milliseconds of ``a`` and of ``b``, run alternately (CPU): the ratio survives a
    busy machine."""
    a(), b()
    ta, tb = [], []
    for _ in range(3 if quick else 7):
        for fn, times in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return min(ta), min(tb)


def measure_ceilings(device: torch.device, dtype: torch.dtype, quick: bool = True) -> dict:
    """This machine's matmul FLOP/s (a square product of 2048 on a CPU, 8192 on a GPU) and
    copy GB/s (bytes read + written), measured now."""
    gpu = device.type == "cuda"
    timer = time_cuda if gpu else time_cpu
    n = 8192 if gpu else 2048
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    ms = timer(lambda: a @ b, quick)
    src = torch.empty(64 << 20 if gpu else 16 << 20, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    src.normal_()
    copy_ms = timer(lambda: dst.copy_(src), quick)
    return {
        "matmul_tflops": 2.0 * n**3 / ms / 1e9,
        "copy_gbps": 2.0 * src.numel() * src.element_size() / copy_ms / 1e6,
        "matmul_shape": f"{n}x{n}x{n} {str(dtype).removeprefix('torch.')}",
        "copy_bytes": 2 * src.numel() * src.element_size(),
    }


def floor_ms(flops: float, nbytes: float, ceilings: dict) -> float:
    """A kernel's roofline floor: ``max(FLOPs / matmul rate, bytes / copy rate)``."""
    return max(flops / (ceilings["matmul_tflops"] * 1e9), nbytes / (ceilings["copy_gbps"] * 1e6))


def shuffled_paged_cache(
    B: int, ctx: int, block_size: int, width: int, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A full cache with every request's pages shuffled, as after a while of serving."""
    pages = -(-ctx // block_size)
    cache = torch.randn(B * pages, block_size, width, device=device).to(dtype)
    table = torch.randperm(B * pages, device=device).view(B, pages).to(torch.int32)
    seq_lens = torch.full((B,), ctx, dtype=torch.int32, device=device)
    return cache, table, seq_lens
