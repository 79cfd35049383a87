"""Measure the kernels: bandwidth for decode, TFLOP/s for prefill attention.

On a CUDA device, with DeepSeek-V3's widths in bf16: ``mla_decode`` (memory-bound: bytes
read per second, as a share of the device's peak; each request reads its latent rows once
for all heads) and ``flash_attn_varlen`` (TFLOP/s, next to PyTorch's SDPA on the same
shapes). On a CPU, the torch twins on small shapes; Triton interpreter timings are not
reported (the interpreter's speed says nothing about the kernel).

``pdlab bench kernels`` renders :func:`bench_kernels` with :func:`render_table` in ``lang``
(the words are in ``pdlab/catalog/bench.py``; the result holds English notes). The bytes
and FLOPs a case counts come from ``pdlab/sim/kernel_costs.py``. vLLM 0.33.0 has no
counterpart in its package.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import torch

from pdlab.catalog import check_lang, text
from pdlab.engine.llm_engine import one_thread
from pdlab.errors import PdlabValueError
from pdlab.kernels import backend as _backend
from pdlab.kernels.cache import gather_cache, reshape_and_cache_mla
from pdlab.kernels.decode_attention import mla_decode
from pdlab.kernels.flash_attn import flash_attn_varlen
from pdlab.kernels.merge import merge_attn_states
from pdlab.sim import kernel_costs as cost
from pdlab.tools import measure

if TYPE_CHECKING:
    from pdlab.ui.layout import FitTable

# The result's note (English, as the JSON keeps it); render_table shows it in its language.
CPU_NOTE = text("en", "bk_note_cpu")
CPU_NOTE_NO_TRITON = text("en", "bk_note_cpu_no_triton")
GPU_NOTE = text("en", "bk_note_gpu")
_NOTE_KEYS = {text("en", k): k for k in ("bk_note_cpu", "bk_note_cpu_no_triton", "bk_note_gpu")}

Progress = Callable[[int, int, str], None]
Case = tuple[str, Callable[[], dict]]


def _gpu_cases(device: torch.device, quick: bool, peaks: tuple) -> list[Case]:
    tflops_peak, gbps_peak = peaks
    dtype = torch.bfloat16
    L, R, d_qk, d_v = 512, 64, 192, 128
    cases = []

    for H, q_len in ((16, 1), (128, 1), (128, 3)):  # q_len 3: verifying K = 2 drafts

        def decode(H: int = H, q_len: int = q_len) -> dict:
            B, ctx = 64, 1024 if quick else 4096
            cache, table, seq_lens = measure.shuffled_paged_cache(B, ctx, 64, L + R, dtype, device)
            q = torch.randn(B * q_len, H, L + R, device=device).to(dtype)
            qsl = torch.arange(0, B * q_len + 1, q_len, dtype=torch.int32, device=device)
            qsl = qsl if q_len > 1 else None
            fn = partial(mla_decode, q, cache, table, seq_lens, 0.1, None, qsl, kv_lora_rank=L)
            ms = measure.time_cuda(partial(fn, backend="triton"), quick)
            _, nbytes = cost.mla_decode_cost([ctx] * B, H, L + R, L, 2, [q_len] * B)
            gbps = nbytes / ms / 1e6  # the rows once per request: what sharing them buys
            shape = f"B={B} ctx={ctx} H={H} L+R={L}+{R} page=64"
            shape += f" q_len={q_len}" if q_len > 1 else ""
            row = {"kernel": "mla_decode", "impl": "triton", "dtype": "bf16", "shape": shape}
            share = gbps / gbps_peak if gbps_peak else None
            return {**row, "ms": ms, "gbps": gbps, "share_of_peak": share}

        cases.append((f"mla_decode H={H} q_len={q_len}", decode))

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
                ms = measure.time_cuda(fn, quick)
                flops, _ = cost.flash_attn_cost([S] * B, [S] * B, H, d_qk, d_v, True)
                tflops = flops / ms / 1e9
                kernel = "flash_attn_varlen" if impl == "triton" else "sdpa"
                shape = f"B={B} S={S} H={H} QK={d_qk} V={d_v} causal"
                row = {"kernel": kernel, "impl": impl, "dtype": "bf16", "shape": shape, "ms": ms}
                share = tflops / tflops_peak if tflops_peak else None
                return {**row, "tflops": tflops, "share_of_peak": share}

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
            ms = measure.time_cpu(fn, quick)
        else:  # interleaved, fastest of each: the ratio survives a busy machine best
            ms, dense_ms = measure.time_pair(fn, dense, quick)
        r = {"kernel": kernel, "impl": "torch", "dtype": "fp32", "shape": shape, "ms": ms}
        if dense is not None:
            r["dense_ms"], r["vs_dense"] = dense_ms, ms / dense_ms
        return r

    def cache_write() -> dict:
        cache, _, _ = measure.shuffled_paged_cache(1, n, bs, L + R, dtype, cpu)
        kv_c, k_pe = torch.randn(n, L), torch.randn(n, R)
        slots = torch.randperm(n).long()
        fn = partial(reshape_and_cache_mla, kv_c, k_pe, cache, slots, backend="torch")
        return row("reshape_and_cache_mla", f"T={n} L+R={L}+{R}", fn)

    def gather() -> dict:
        cache, table, seq_lens = measure.shuffled_paged_cache(4, n, bs, L + R, dtype, cpu)
        cu = torch.arange(0, 4 * n + 1, n, dtype=torch.int32)
        fn = partial(gather_cache, cache, table, cu, backend="torch")
        return row("gather_cache", f"B=4 ctx={n} page={bs}", fn)

    def flash() -> dict:
        B, S, Hf, d_qk, dv = 2, 256 if quick else 512, 16, 192, 128
        q, k = torch.randn(B * S, Hf, d_qk), torch.randn(B * S, Hf, d_qk)
        v = torch.randn(B * S, Hf, dv)
        cu = torch.arange(0, B * S + 1, S, dtype=torch.int32)
        sc = d_qk**-0.5
        qb, kb, vb = (t.view(B, S, Hf, -1) for t in (q, k, v))
        fn = partial(flash_attn_varlen, q, k, v, cu, cu, S, S, sc, True, backend="torch")
        shape = f"B={B} S={S} H={Hf} QK={d_qk} V={dv} causal"
        return row("flash_attn_varlen", shape, fn, partial(_dense_causal, qb, kb, vb, sc))

    def merge() -> dict:
        a, b = torch.randn(n, H, d_v), torch.randn(n, H, d_v)
        la, lb = torch.randn(n, H), torch.randn(n, H)
        fn = partial(merge_attn_states, a, la, b, lb, backend="torch")
        return row("merge_attn_states", f"T={n} H={H} D={d_v}", fn)

    def decode(splits: int | None, B: int = 1, Hd: int = 128) -> dict:
        ctx, Ld, Rd = 1024 if quick else 4096, 512, 64
        cache, table, seq_lens = measure.shuffled_paged_cache(B, ctx, 64, Ld + Rd, dtype, cpu)
        q = torch.randn(B, Hd, Ld + Rd)
        keys = cache[table.long()].view(B, -1, Ld + Rd)[:, :ctx].contiguous()
        shape = f"B={B} ctx={ctx} H={Hd} L+R={Ld}+{Rd} page=64 splits={splits or 'auto'}"
        fn = partial(mla_decode, q, cache, table, seq_lens, 0.1, splits, kv_lora_rank=Ld)
        dense = partial(_dense_decode, q, keys, Ld, 0.1)
        return row("mla_decode", shape, partial(fn, backend="torch"), dense)

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
    device: str | torch.device | None = None,
    quick: bool = False,
    progress: Progress | None = None,
    lang: str = "en",
) -> dict:
    """Time the kernels on ``device`` (default: CUDA if present, else CPU); a JSON-ready dict
    whose ``rows`` have ``error`` for a case that raised (the others still run).
    ``progress(done, total, label)`` is called before the first case and after each one."""
    default = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device if device is not None else default)
    gpu = dev.type == "cuda"
    check_lang(lang)
    if gpu and not _backend.triton_installed():
        raise PdlabValueError("err_bench_needs_triton")
    if gpu:
        peaks = measure.device_peaks(dev)
        cases = _gpu_cases(dev, quick, peaks)
        name = torch.cuda.get_device_name(dev)
        note = GPU_NOTE
    else:
        note = CPU_NOTE if _backend.triton_installed() else CPU_NOTE_NO_TRITON
        peaks, cases, name = (None, None), _cpu_cases(quick), "cpu"
    # see CPU_NOTE: on a CPU one thread measures this process, not the neighbours
    with one_thread() if not gpu else contextlib.nullcontext():
        rows = _run_cases(cases, progress, lang)
    return {
        "device": name,
        "gpu": gpu,
        "note": note,
        "peak_tflops": peaks[0],
        "peak_gbps": peaks[1],
        "torch": torch.__version__,
        "rows": rows,
    }


def case_label(label: str, lang: str = "en") -> str:
    """A case's label as the progress bar shows it in ``lang`` (kernel names stay)."""
    if label == "starting":
        return text(lang, "bk_starting")
    m = re.fullmatch(r"(\w+) prefill H=(\d+)", label)
    return text(lang, "bk_case_prefill", impl=m[1], h=m[2]) if m else label


def _run_cases(cases: list[Case], progress: Progress | None, lang: str = "en") -> list[dict]:
    rows = []
    if progress is not None:
        progress(0, len(cases), case_label("starting", lang))
    with torch.no_grad():
        for i, (label, case) in enumerate(cases):
            try:
                rows.append(case())
            except Exception as e:  # one failing case (say, SDPA's backend) keeps the rest
                error = f"{type(e).__name__}: {e}"[:300]
                row = {"kernel": label, "impl": "-", "dtype": "-", "shape": "-", "ms": None}
                rows.append({**row, "error": error})
            if progress is not None:
                progress(i + 1, len(cases), case_label(label, lang))
    return rows


# The shape before dtype and impl, and impl just above ms: stacked one per line (80
# columns), no time label comes right after a value ending in a digit (a shape, fp32), where
# it would read as that number's unit.
_COLUMNS = (
    ("bk_kernel", "left", None),
    ("bk_shape", "left", None),
    ("bk_dtype", "left", "bk_kernel"),
    ("bk_impl", "left", "bk_kernel"),
    ("bk_ms", "right", None),
    ("bk_gbps", "right", None),
    ("bk_tflops", "right", None),
    ("bk_peak", "right", None),
    ("bk_dense_ms", "right", None),
    ("bk_vs_dense", "right", None),
)
_FORMATS = {"ms": ".3f", "gbps": ".0f", "tflops": ".1f", "share_of_peak": ".0%", "dense_ms": ".3f"}


def render_table(results: dict, lang: str = "en") -> FitTable:
    """:func:`bench_kernels`' result as a :class:`~pdlab.ui.layout.FitTable` in ``lang``."""
    from rich.markup import escape

    from pdlab.ui.layout import FitTable

    key = _NOTE_KEYS.get(results["note"])
    table = FitTable(
        title=escape(text(lang, "bk_title", device=results["device"])),
        caption=escape(text(lang, key) if key else results["note"]),
    )
    for col, justify, under in _COLUMNS:
        under = escape(text(lang, under)) if under else None
        table.add_column(escape(text(lang, col)), justify=justify, under=under)

    def fmt(x: float | None, spec: str) -> str:
        return "-" if x is None else format(x, spec)

    causal = f" {text(lang, 'k_causal')}"
    for r in results["rows"]:
        if r.get("error"):
            error = f"[red]{escape(text(lang, 'bk_error'))}[/]"
            label = escape(case_label(r["kernel"], lang))  # a failed case: its label
            table.add_row(label, escape(r["error"][:80]), "-", error, *["-"] * 6)
            continue
        shape = r["shape"]
        if shape.endswith(" causal"):  # the one word of a shape: the mask
            shape = shape[: -len(" causal")] + causal
        numbers = [fmt(r.get(k), spec) for k, spec in _FORMATS.items()]
        vs_dense = "-" if r.get("vs_dense") is None else f"{r['vs_dense']:.2f}x"
        table.add_row(r["kernel"], escape(shape), r["dtype"], r["impl"], *numbers, vs_dense)
    return table
