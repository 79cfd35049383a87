"""Measure the kernels: bandwidth for decode, TFLOP/s for prefill attention.

On a CUDA device, with DeepSeek-V3's widths in bf16:

* ``mla_decode`` (batch 64, context 4096, 16 and 128 heads, 64-token pages as FlashMLA):
  decode is memory-bound, so the number that matters is bytes read per second, as a share
  of the device's peak. Each request reads its ``context x 576`` latent rows once for all
  heads; that is the whole point of the absorbed form.
* ``flash_attn_varlen`` (QK 192, V 128, causal prefill): TFLOP/s, next to PyTorch's
  ``scaled_dot_product_attention`` on the same shapes.

On a CPU, the torch twins on small tiny-model shapes, so a laptop shows what each costs.
Triton interpreter timings are not reported: the interpreter runs every program instance in
Python through NumPy, so its speed says nothing about the kernel.

``pdlab bench kernels`` renders :func:`bench_kernels` with :func:`render_table`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from pdlab.kernels import backend as _backend
from pdlab.kernels.cache import gather_cache, reshape_and_cache_mla
from pdlab.kernels.decode_attention import mla_decode
from pdlab.kernels.flash_attn import flash_attn_varlen
from pdlab.kernels.merge import merge_attn_states

if TYPE_CHECKING:
    from rich.table import Table

# Published peaks (dense bf16 tensor TFLOP/s, HBM GB/s), matched on the device name.
PEAKS = [
    ("H200", 989.0, 4800.0),
    ("H100 PCIe", 756.0, 2000.0),
    ("H100 NVL", 835.0, 3900.0),
    ("H100", 989.0, 3350.0),
    ("H800", 989.0, 3350.0),
    ("H20", 148.0, 4000.0),
    ("A100-SXM4-80GB", 312.0, 2039.0),
    ("A100 80GB PCIe", 312.0, 1935.0),
    ("A100", 312.0, 1555.0),
    ("A800", 312.0, 2039.0),
    ("L40S", 362.0, 864.0),
    ("L40", 181.0, 864.0),
    ("L4", 121.0, 300.0),
    ("A10G", 70.0, 600.0),
    ("A10", 125.0, 600.0),
    ("RTX 4090", 165.0, 1008.0),
    ("RTX 3090", 71.0, 936.0),
]
CPU_NOTE = (
    "CPU: the torch twins (tiny widths for the copies, DeepSeek's for attention, beside a "
    "dense torch version of the same math: vs dense = twin / dense), on one thread: on a "
    "shared machine, two threads' barriers measure the neighbours' load. The Triton kernels run "
    "here only through the interpreter, whose timings mean nothing, so they are not "
    "timed; run `python -m pdlab.tools.gpu_check` on a CUDA machine."
)
CPU_NOTE_NO_TRITON = (
    "CPU: the torch twins, each beside a dense torch version of the same math, on one "
    "thread. Triton is not installed here (it has Linux wheels only), so only the torch "
    "twins run; on a CUDA machine, "
    "`pip install triton` and run `python -m pdlab.tools.gpu_check`."
)


def cpu_note() -> str:
    """The table's caption on a CPU, true to whether triton is installed."""
    from pdlab.kernels.backend import triton_installed

    return CPU_NOTE if triton_installed() else CPU_NOTE_NO_TRITON


Progress = Callable[[int, int, str], None]


def published_peak(name: str) -> tuple[float, float]:
    """(dense bf16 FLOP/s, HBM bytes/s) of a GPU named in :data:`PEAKS`, e.g. ``"H800"``."""
    for key, tflops, gbps in PEAKS:
        if key == name:
            return tflops * 1e12, gbps * 1e9
    raise ValueError(f"name={name!r} is invalid: expected one of {[k for k, _, _ in PEAKS]}")


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


def _time_cuda(fn: Callable[[], Any], quick: bool) -> float:
    """Median milliseconds of ``fn`` on the GPU, timed with CUDA events."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(5 if quick else 20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _time_cpu(fn: Callable[[], Any], quick: bool) -> float:
    fn()
    times = []
    for _ in range(3 if quick else 10):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _time_pair(a: Callable[[], Any], b: Callable[[], Any], quick: bool) -> tuple[float, float]:
    """Fastest milliseconds of ``a`` and of ``b``, run alternately (CPU)."""
    a(), b()
    ta, tb = [], []
    for _ in range(3 if quick else 7):
        for fn, times in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return min(ta), min(tb)


def measure_ceilings(device: torch.device, dtype: torch.dtype, quick: bool = True) -> dict:
    """This machine's floor, measured now: matmul FLOP/s (a square product of 2048 on a
    CPU, 8192 on a GPU) and copy GB/s (a 256 MiB tensor copied, bytes read + written).
    A kernel's floor is ``max(FLOPs / matmul rate, bytes / copy rate)``."""
    gpu = device.type == "cuda"
    timer = _time_cuda if gpu else _time_cpu
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
    """The roofline floor of a kernel that does ``flops`` and moves ``nbytes``."""
    return max(flops / (ceilings["matmul_tflops"] * 1e9), nbytes / (ceilings["copy_gbps"] * 1e6))


def _paged(
    B: int, ctx: int, block_size: int, width: int, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A full cache with every request's pages shuffled, as after a while of serving."""
    pages = -(-ctx // block_size)
    cache = torch.randn(B * pages, block_size, width, device=device).to(dtype)
    table = torch.randperm(B * pages, device=device).view(B, pages).to(torch.int32)
    seq_lens = torch.full((B,), ctx, dtype=torch.int32, device=device)
    return cache, table, seq_lens


Case = tuple[str, Callable[[], dict]]


def _gpu_cases(device: torch.device, quick: bool, peaks: tuple) -> list[Case]:
    tflops_peak, gbps_peak = peaks
    dtype = torch.bfloat16
    L, R, d_qk, d_v = 512, 64, 192, 128
    cases = []

    for H in (16, 128):

        def decode(H: int = H) -> dict:
            B, ctx = 64, 1024 if quick else 4096
            cache, table, seq_lens = _paged(B, ctx, 64, L + R, dtype, device)
            q = torch.randn(B, H, L + R, device=device).to(dtype)
            ms = _time_cuda(
                lambda: mla_decode(
                    q, cache, table, seq_lens, 0.1, kv_lora_rank=L, backend="triton"
                ),
                quick,
            )
            nbytes = (B * ctx * (L + R) + B * H * (L + R) + B * H * L) * 2
            gbps = nbytes / ms / 1e6
            return {
                "kernel": "mla_decode",
                "impl": "triton",
                "dtype": "bf16",
                "shape": f"B={B} ctx={ctx} H={H} L+R={L}+{R} page=64",
                "ms": ms,
                "gbps": gbps,
                "share_of_peak": gbps / gbps_peak if gbps_peak else None,
            }

        cases.append((f"mla_decode H={H}", decode))

    for H in (16, 128):
        for impl in ("triton", "sdpa"):

            def prefill(H: int = H, impl: str = impl) -> dict:
                B, S = (2, 1024) if quick else (4, 2048)
                q = torch.randn(B * S, H, d_qk, device=device).to(dtype)
                k = torch.randn(B * S, H, d_qk, device=device).to(dtype)
                v = torch.randn(B * S, H, d_v, device=device).to(dtype)
                cu = torch.arange(0, B * S + 1, S, dtype=torch.int32, device=device)
                if impl == "triton":
                    fn = lambda: flash_attn_varlen(
                        q, k, v, cu, cu, S, S, d_qk**-0.5, True, backend="triton"
                    )
                else:
                    qb, kb, vb = (t.view(B, S, H, -1).transpose(1, 2) for t in (q, k, v))
                    fn = lambda: torch.nn.functional.scaled_dot_product_attention(
                        qb, kb, vb, is_causal=True, scale=d_qk**-0.5
                    )
                ms = _time_cuda(fn, quick)
                flops = B * H * S * (S + 1) / 2 * 2 * (d_qk + d_v)  # causal: half the pairs
                tflops = flops / ms / 1e9
                return {
                    "kernel": "flash_attn_varlen" if impl == "triton" else "sdpa",
                    "impl": impl,
                    "dtype": "bf16",
                    "shape": f"B={B} S={S} H={H} QK={d_qk} V={d_v} causal",
                    "ms": ms,
                    "tflops": tflops,
                    "share_of_peak": tflops / tflops_peak if tflops_peak else None,
                }

            cases.append((f"{impl} prefill H={H}", prefill))
    return cases


def _dense_decode(q: torch.Tensor, keys: torch.Tensor, L: int, scale: float) -> torch.Tensor:
    """The same math as ``mla_decode`` with the rows already contiguous: ``[B, ctx, L + R]``."""
    scores = torch.einsum("bhd,bnd->bhn", q, keys) * scale
    return torch.einsum("bhn,bnl->bhl", torch.softmax(scores, dim=-1), keys[..., :L])


def _dense_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal attention of equal-length sequences ``[B, S, H, D]`` as plain batched matmuls."""
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    S = q.shape[1]
    s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), v)


def _cpu_cases(quick: bool) -> list[Case]:
    """The twins, tiny widths for the copies; DeepSeek widths for the two attentions, each
    beside a dense torch implementation of the same math (``dense_ms``, ``vs_dense``)."""
    L, R, H, d_v, bs = 64, 16, 4, 32, 4
    n = 128 if quick else 256
    dtype, cpu = torch.float32, torch.device("cpu")

    def row(kernel: str, shape: str, fn: Callable[[], Any], dense: Any = None) -> dict:
        if dense is None:
            ms = _time_cpu(fn, quick)
        else:  # interleaved, fastest of each: the ratio survives a busy machine best
            ms, dense_ms = _time_pair(fn, dense, quick)
        r = {"kernel": kernel, "impl": "torch", "dtype": "fp32", "shape": shape, "ms": ms}
        if dense is not None:
            r["dense_ms"], r["vs_dense"] = dense_ms, ms / dense_ms
        return r

    def cache_write() -> dict:
        cache, _, _ = _paged(1, n, bs, L + R, dtype, cpu)
        kv_c, k_pe = torch.randn(n, L), torch.randn(n, R)
        slots = torch.randperm(n).long()
        return row(
            "reshape_and_cache_mla",
            f"T={n} L+R={L}+{R}",
            lambda: reshape_and_cache_mla(kv_c, k_pe, cache, slots, backend="torch"),
        )

    def gather() -> dict:
        cache, table, seq_lens = _paged(4, n, bs, L + R, dtype, cpu)
        cu = torch.arange(0, 4 * n + 1, n, dtype=torch.int32)
        return row(
            "gather_cache",
            f"B=4 ctx={n} page={bs}",
            lambda: gather_cache(cache, table, cu, backend="torch"),
        )

    def flash() -> dict:
        B, S, Hf, d_qk, dv = 2, 256 if quick else 512, 16, 192, 128
        q, k = torch.randn(B * S, Hf, d_qk), torch.randn(B * S, Hf, d_qk)
        v = torch.randn(B * S, Hf, dv)
        cu = torch.arange(0, B * S + 1, S, dtype=torch.int32)
        sc = d_qk**-0.5
        qb, kb, vb = (t.view(B, S, Hf, -1) for t in (q, k, v))
        return row(
            "flash_attn_varlen",
            f"B={B} S={S} H={Hf} QK={d_qk} V={dv} causal",
            lambda: flash_attn_varlen(q, k, v, cu, cu, S, S, sc, True, backend="torch"),
            lambda: _dense_causal(qb, kb, vb, sc),
        )

    def merge() -> dict:
        a, b = torch.randn(n, H, d_v), torch.randn(n, H, d_v)
        la, lb = torch.randn(n, H), torch.randn(n, H)
        return row(
            "merge_attn_states",
            f"T={n} H={H} D={d_v}",
            lambda: merge_attn_states(a, la, b, lb, backend="torch"),
        )

    def decode(splits: int | None, B: int = 1, Hd: int = 128) -> dict:
        ctx, Ld, Rd = 1024 if quick else 4096, 512, 64
        cache, table, seq_lens = _paged(B, ctx, 64, Ld + Rd, dtype, cpu)
        q = torch.randn(B, Hd, Ld + Rd)
        keys = cache[table.long()].view(B, -1, Ld + Rd)[:, :ctx].contiguous()
        return row(
            "mla_decode",
            f"B={B} ctx={ctx} H={Hd} L+R={Ld}+{Rd} page=64 splits={splits or 'auto'}",
            lambda: mla_decode(
                q, cache, table, seq_lens, 0.1, splits, kv_lora_rank=Ld, backend="torch"
            ),
            lambda: _dense_decode(q, keys, Ld, 0.1),
        )

    return [
        ("reshape_and_cache_mla", cache_write),
        ("gather_cache", gather),
        ("flash_attn_varlen", flash),
        ("merge_attn_states", merge),
        ("mla_decode", lambda: decode(None)),
        ("mla_decode", lambda: decode(4)),
        ("mla_decode", lambda: decode(None, B=4, Hd=16)),
    ]


def bench_kernels(
    device: str | torch.device | None = None, quick: bool = False, progress: Progress | None = None
) -> dict:
    """Time the kernels on ``device`` (default: CUDA if present, else CPU).

    ``progress(done, total, label)`` is called before the first case (``done = 0``) and
    after each one. Returns a JSON-ready dict: ``device``, ``gpu``, ``note``,
    ``peak_tflops``, ``peak_gbps`` and ``rows`` (kernel, impl, dtype, shape, ms, and
    ``gbps``/``tflops``/``share_of_peak`` where they apply, ``error`` for a case that
    raised: the others still run).
    """
    dev = (
        torch.device(device)
        if device is not None
        else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    )
    gpu = dev.type == "cuda"
    if gpu and not _backend.triton_installed():
        raise ValueError("device=cuda needs triton for the kernels under test")
    if gpu:
        peaks = device_peaks(dev)
        cases = _gpu_cases(dev, quick, peaks)
        name = torch.cuda.get_device_name(dev)
        note = (
            "GPU: Triton kernels, compiled; decode share = bytes read / peak bandwidth, "
            "prefill share = FLOP/s / peak dense bf16."
        )
    else:
        peaks, cases, name, note = (None, None), _cpu_cases(quick), "cpu", cpu_note()
    threads = torch.get_num_threads()
    if not gpu:  # see CPU_NOTE: one thread measures this process, not the neighbours
        torch.set_num_threads(1)
    try:
        rows = _run_cases(cases, progress)
    finally:
        torch.set_num_threads(threads)
    return {
        "device": name,
        "gpu": gpu,
        "note": note,
        "peak_tflops": peaks[0],
        "peak_gbps": peaks[1],
        "torch": torch.__version__,
        "rows": rows,
    }


def _run_cases(cases: list[Case], progress: Progress | None) -> list[dict]:
    rows = []
    if progress is not None:
        progress(0, len(cases), "starting")
    with torch.no_grad():
        for i, (label, case) in enumerate(cases):
            try:
                rows.append(case())
            except Exception as e:  # one failing case (say, SDPA's backend) keeps the rest
                rows.append(
                    {
                        "kernel": label,
                        "impl": "-",
                        "dtype": "-",
                        "shape": "-",
                        "ms": None,
                        "error": f"{type(e).__name__}: {e}"[:300],
                    }
                )
            if progress is not None:
                progress(i + 1, len(cases), label)
    return rows


def render_table(results: dict) -> Table:
    """A rich Table of :func:`bench_kernels`' result."""
    from rich.table import Table

    table = Table(title=f"pdlab kernels on {results['device']}", caption=results["note"])
    for col in ("kernel", "impl", "dtype", "shape"):
        table.add_column(col)
    for col in ("ms", "GB/s", "TFLOP/s", "of peak", "dense ms", "vs dense"):
        table.add_column(col, justify="right")

    def fmt(x: float | None, spec: str) -> str:
        return "-" if x is None else format(x, spec)

    for r in results["rows"]:
        if r.get("error"):
            table.add_row(r["kernel"], "[red]error[/]", "-", r["error"][:80], *["-"] * 6)
            continue
        table.add_row(
            r["kernel"],
            r["impl"],
            r["dtype"],
            r["shape"],
            fmt(r["ms"], ".3f"),
            fmt(r.get("gbps"), ".0f"),
            fmt(r.get("tflops"), ".1f"),
            fmt(r.get("share_of_peak"), ".0%"),
            fmt(r.get("dense_ms"), ".3f"),
            "-" if r.get("vs_dense") is None else f"{r['vs_dense']:.2f}x",
        )
    return table
