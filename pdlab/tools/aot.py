"""Compile every kernel for real GPUs, ahead of time, on a machine without one.

Triton lowers a kernel to PTX and then to a cubin with the ``ptxas`` inside its wheel, so a
CPU-only machine can still prove that each kernel builds for an A100 (sm_80) and an H100
(sm_90). A kernel that runs in the interpreter but does not compile is broken for every
user with a GPU: for example ``tl.dot`` with a dimension under 16 runs interpreted and fails
here. The PTX also shows whether the matrix products use tensor cores: ``wgmma`` (Hopper's
warp-group MMA, needs a 64-row tile per warp group) or ``mma`` (Ampere's warp-level MMA,
which Hopper also runs). ``pdlab doctor --aot`` renders :func:`run_aot_check`.

``TRITON_INTERPRET=1`` (set by ``backend.py`` on a CPU machine) is read when ``@triton.jit``
decorates: every kernel, and Triton's own ``@jit`` library functions such as ``tl.max`` and
``tl.cdiv``, become ``InterpretedFunction`` objects that the compiler cannot lower. That is
decided at import, for the whole process, so when this process interprets, the check runs
in a child Python with ``TRITON_INTERPRET=0`` (``python -m pdlab.tools.aot``), which
streams one JSON line per build back. Run directly, the module prints the same lines.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction, native_specialize_impl

from pdlab.kernels import cache, decode_attention, flash_attn, merge

if TYPE_CHECKING:
    from rich.table import Table

# Widths: the tiny model, and DeepSeek-V2/V3 (latent 512 + rope 64, QK 192, V 128).
WIDTHS = {
    "tiny": {"L": 64, "R": 16, "d_qk": 48, "d_v": 32, "heads": 4},
    "deepseek": {"L": 512, "R": 64, "d_qk": 192, "d_v": 128, "heads": 128},
}
ELEM_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}  # the dtypes a check may ask for
# Most shared memory one block may use (bytes): A100 164 KiB, H100 227 KiB.
MAX_SHARED = {80: 166912, 90: 232448}
OPTIONS = ("num_warps", "num_stages")


# The launch the builds stand for: 64 requests of a 4K context in 64-token pages (decode),
# 4K packed tokens (prefill). The JIT specialises on these values, so the build does too.
SAMPLE = {"batch": 64, "page": 64, "context": 4096, "tokens": 4096}


@dataclass
class AotResult:
    """One kernel compiled for one target, dtype and set of widths."""

    kernel: str
    target: int  # compute capability: 80 (sm_80) or 90 (sm_90)
    dtype: str
    widths: str  # e.g. "deepseek QK=192 V=128 causal"
    ok: bool
    error: str | None
    seconds: float
    tensor_cores: bool  # sm_90: the SASS has wgmma (HGMMA); sm_80: mma (HMMA)
    mma: str = "-"  # which tensor-core instruction it uses: wgmma, mma or -
    shared_bytes: int | None = None
    registers: int | None = None  # per thread (cuobjdump -res-usage)
    spills: int | None = None  # local-memory loads and stores (LDL/STL) in the SASS
    copy: str = "-"  # how global tiles reach shared memory: TMA, cp.async or - (via registers)


@dataclass
class KernelSpec:
    """What ``ASTSource`` needs: the kernel, the type of every argument, the constexprs, and
    the integer arguments of a typical launch (the JIT specialises on their values)."""

    name: str
    widths: str
    kernel: Callable
    constexprs: dict
    options: dict
    ints: dict[str, int]
    pointers: dict = field(default_factory=dict)  # pointer args not in the data dtype
    floats: tuple[str, ...] = ("scale",)
    uses_dot: bool = False


def _split_options(cfg: dict) -> tuple[dict, dict]:
    return (
        {k: v for k, v in cfg.items() if k not in OPTIONS},
        {k: v for k, v in cfg.items() if k in OPTIONS},
    )


def specs(widths: dict, dtype: str, target: int = 90) -> list[KernelSpec]:
    """Every Triton kernel of pdlab.kernels, configured as its launcher configures it for
    :data:`SAMPLE` on ``sm_<target>``, with the strides of the tensors it passes."""
    L, R, d_qk, d_v, H = (widths[k] for k in ("L", "R", "d_qk", "d_v", "heads"))
    B, page, ctx, T = (SAMPLE[k] for k in ("batch", "page", "context", "tokens"))
    e = ELEM_BYTES[dtype]
    cache_strides = {"stride_cache_block": page * (L + R), "stride_cache_slot": L + R}
    i32 = "*i32"
    out: list[KernelSpec] = []

    c, o = _split_options(cache.reshape_and_cache_mla_config(L, R))
    ints = {"stride_kv_c": L, "stride_k_pe": R, **cache_strides, "block_size": page}
    out.append(
        KernelSpec(
            "reshape_and_cache_mla",
            f"L+R={L}+{R}",
            cache.reshape_and_cache_mla_kernel,
            c,
            o,
            {**ints, "L": L, "R": R},
            {"slot_mapping_ptr": "*i64"},
        )
    )
    c, o = _split_options(cache.gather_cache_config(L + R))
    ints = {**cache_strides, "stride_block_table": ctx // page, "stride_out": L + R}
    for starts in (True, False):
        out.append(
            KernelSpec(
                "gather_cache",
                f"L+R={L}+{R}{' seq_starts' if starts else ''}",
                cache.gather_cache_kernel,
                {**c, "HAS_SEQ_STARTS": starts},
                o,
                {**ints, "block_size": page, "D": L + R},
                {p: i32 for p in ("block_table_ptr", "cu_seq_lens_ptr", "seq_starts_ptr")},
            )
        )
    c, o = _split_options(flash_attn.flash_attn_varlen_config(T, d_qk, d_v, e, target))
    ints = {f"stride_{t}_t": H * w for t, w in (("q", d_qk), ("k", d_qk), ("v", d_v), ("o", d_v))}
    ints |= {f"stride_{t}_h": w for t, w in (("q", d_qk), ("k", d_qk), ("v", d_v), ("o", d_v))}
    for causal in (True, False):
        out.append(
            KernelSpec(
                "flash_attn_varlen",
                f"QK={d_qk} V={d_v} {'causal' if causal else 'non-causal'}",
                flash_attn.flash_attn_varlen_kernel,
                {**c, "CAUSAL": causal, "UPCAST": False, "D_QK": d_qk, "D_V": d_v},
                o,
                {**ints, "num_heads": H},
                {"lse_ptr": "*fp32", "cu_seqlens_q_ptr": i32, "cu_seqlens_k_ptr": i32},
                uses_dot=True,
            )
        )
    c, o = _split_options(merge.merge_attn_states_config(H, d_v))
    ints = {f"stride_{t}_t": H * d_v for t in ("out", "a", "b")}
    ints |= {f"stride_{t}_h": d_v for t in ("out", "a", "b")}
    out.append(
        KernelSpec(
            "merge_attn_states",
            f"H={H} D={d_v}",
            merge.merge_attn_states_kernel,
            c,
            o,
            {**ints, "H": H, "D": d_v},
            {p: "*fp32" for p in ("lse_ptr", "lse_a_ptr", "lse_b_ptr")},
        )
    )
    out += _decode_specs(L, R, H, B, page, ctx, dtype, target)
    return out


def _decode_specs(
    L: int, R: int, H: int, B: int, page: int, ctx: int, dtype: str, target: int
) -> list:
    """Stage 1 as the automatic split count launches it for the sample batch, and for one
    request (split as far as allowed, at least 2), which stage 2 then merges."""
    da = decode_attention
    S = da.num_kv_splits_auto(B, H, ctx, da.CPU_NUM_SMS, L, R)
    S2 = max(2, da.num_kv_splits_auto(1, H, ctx, da.CPU_NUM_SMS, L, R))
    cfg = da.mla_decode_config(L, R, ELEM_BYTES[dtype], target)
    c, o = _split_options(cfg["stage1"])
    ints = {"stride_q_b": H * (L + R), "stride_q_h": L + R, "stride_cache_block": page * (L + R)}
    ints |= {"stride_cache_slot": L + R, "stride_block_table": ctx // page}
    ints |= {"stride_o_b": H * L, "stride_o_h": L, "num_heads": H, "L": L}
    f32 = "*fp32"
    out = []
    for s in sorted({S, S2}):  # not split (S = 1 writes out directly) and split, if both
        mid = {"stride_mid_b": H * s * L, "stride_mid_h": s * L, "stride_mid_s": L}
        pointers = {"block_table_ptr": "*i32", "seq_lens_ptr": "*i32", "lse_ptr": f32}
        pointers |= {"mid_out_ptr": f32 if s > 1 else f"*{dtype}", "mid_lse_ptr": f32}
        out.append(
            KernelSpec(
                "mla_decode stage 1",
                f"L+R={L}+{R} splits={s}",
                da.mla_decode_stage1_kernel,
                {**c, "UPCAST": False, "PAGE_SIZE": page, "L": L, "R": R},
                o,
                {**ints, **mid, "num_kv_splits": s},
                pointers,
                uses_dot=True,
            )
        )
    mid = {"stride_mid_b": H * S2 * L, "stride_mid_h": S2 * L, "stride_mid_s": L}
    c, o = _split_options(cfg["stage2"])
    stage2 = KernelSpec(
        "mla_decode stage 2",
        f"L={L} splits={S2}",
        da.mla_decode_stage2_kernel,
        c,
        o,
        {**ints, **mid, "num_kv_splits": S2},
        {"mid_out_ptr": f32, "mid_lse_ptr": f32, "seq_lens_ptr": "*i32", "lse_ptr": f32},
    )
    return [*out, stage2]


def _source(spec: KernelSpec, dtype: str) -> ASTSource:
    """The build the JIT makes at launch: pointers from torch are 16-byte aligned, an integer
    that is a multiple of 16 gets ``tt.divisibility = 16``, and an integer equal to 1
    becomes a constant (``native_specialize_impl``, the JIT's own rule)."""
    fn = spec.kernel
    signature, attrs, constexprs = {}, {}, dict(spec.constexprs)
    for i, name in enumerate(fn.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
        elif name.endswith("_ptr"):
            signature[name] = spec.pointers.get(name, f"*{dtype}")
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in spec.floats:
            signature[name] = "fp32"
        else:
            if name not in spec.ints:
                raise KeyError(f"{spec.name}: no sample value for integer argument {name!r}")
            kind, desc = native_specialize_impl(CUDABackend, spec.ints[name], False, True, True)
            if kind == "constexpr":
                signature[name], constexprs[name] = "constexpr", spec.ints[name]
            else:
                signature[name] = kind
                if desc:
                    attrs[(i,)] = CUDABackend.parse_attr(desc)
    return ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)


def inspect_cubin(cubin: bytes) -> dict:
    """Registers, spills, tensor-core and copy instructions, read from the SASS with the
    ``cuobjdump`` shipped in triton's wheel (empty when it is missing)."""
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.exists():
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        usage = subprocess.run([tool, "-res-usage", path], capture_output=True, text=True).stdout
        sass = subprocess.run([tool, "-sass", path], capture_output=True, text=True).stdout
    regs = re.search(r"REG:(\d+)", usage)
    ops = re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9]+)", sass, re.M)
    has = set(ops)
    return {
        "registers": int(regs.group(1)) if regs else None,
        "spills": sum(op in ("LDL", "STL") for op in ops),
        "mma": "wgmma" if "HGMMA" in has else ("mma" if "HMMA" in has else "-"),
        "copy": "TMA" if "UTMALDG" in has else ("cp.async" if "LDGSTS" in has else "-"),
    }


def compile_one(spec: KernelSpec, target: int, dtype: str, label: str) -> AotResult:
    """Compile one kernel for ``sm_<target>``; never raises, the result says what happened."""
    t0 = time.perf_counter()
    try:
        compiled = triton.compile(
            _source(spec, dtype), target=GPUTarget("cuda", target, 32), options=dict(spec.options)
        )
    except Exception as e:  # a compile error is a result to report, not a crash
        first = str(e).strip().splitlines()
        return AotResult(
            spec.name,
            target,
            dtype,
            label,
            False,
            f"{type(e).__name__}: {first[0] if first else ''}"[:300],
            time.perf_counter() - t0,
            False,
        )
    ptx = compiled.asm["ptx"]
    found = {"mma": "wgmma" if "wgmma" in ptx else ("mma" if "mma.sync" in ptx else "-")}
    found |= inspect_cubin(compiled.asm["cubin"])
    shared = int(getattr(compiled.metadata, "shared", 0))
    ok, error = True, None
    if shared > MAX_SHARED[target]:
        ok, error = (
            False,
            (f"needs {shared} bytes of shared memory, sm_{target} has {MAX_SHARED[target]}"),
        )
    elif spec.uses_dot and found["mma"] == "-":
        ok, error = False, "tl.dot compiled without tensor-core instructions"
    tensor_cores = found["mma"] == ("wgmma" if target >= 90 else "mma")
    return AotResult(
        spec.name,
        target,
        dtype,
        label,
        ok,
        error,
        time.perf_counter() - t0,
        tensor_cores,
        shared_bytes=shared,
        **found,
    )


def compiled_flavour() -> bool:
    """Whether this process's kernels are compilable ``JITFunction`` objects (not interpreted)."""
    return isinstance(cache.reshape_and_cache_mla_kernel, JITFunction)


def run_aot_check(
    targets: tuple[int, ...] = (80, 90),
    dtypes: tuple[str, ...] = ("fp16", "bf16"),
    widths: tuple[str, ...] = ("tiny", "deepseek"),
    progress: Callable[[AotResult], None] | None = None,
) -> list[AotResult]:
    """Compile every kernel for each target, dtype and set of widths; one result per build.

    ``progress`` (optional) is called with each result as it completes. Works whether or not
    this process runs the interpreter (see the module docstring).
    """
    for d in dtypes:
        if d not in ELEM_BYTES:
            raise ValueError(f"dtypes: expected a subset of {tuple(ELEM_BYTES)}, got {d!r}")
    for w in widths:
        if w not in WIDTHS:
            raise ValueError(f"widths: expected a subset of {tuple(WIDTHS)}, got {w!r}")
    for t in targets:
        if t not in MAX_SHARED:
            raise ValueError(f"targets: expected a subset of {tuple(MAX_SHARED)}, got {t!r}")
    if compiled_flavour():
        return _run_here(targets, dtypes, widths, progress)
    return _run_in_child(targets, dtypes, widths, progress)


def _run_here(targets, dtypes, widths, progress) -> list[AotResult]:
    results = []
    for w in widths:
        for dtype in dtypes:
            for target in targets:
                for spec in specs(WIDTHS[w], dtype, target):
                    result = compile_one(spec, target, dtype, f"{w} {spec.widths}")
                    results.append(result)
                    if progress is not None:
                        progress(result)
    return results


def _run_in_child(targets, dtypes, widths, progress) -> list[AotResult]:
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    cmd = [
        sys.executable,
        "-m",
        "pdlab.tools.aot",
        "--targets",
        *map(str, targets),
        "--dtypes",
        *dtypes,
        "--widths",
        *widths,
    ]
    results = []
    with (
        tempfile.TemporaryFile("w+") as err,
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err, text=True) as child,
    ):
        for line in child.stdout:
            result = AotResult(**json.loads(line))
            results.append(result)
            if progress is not None:
                progress(result)
        child.wait()
        err.seek(0)
        stderr = err.read()
    # Exit status 1 with a failed build among the results is a report; anything else broke.
    if child.returncode not in (0, 1) or (child.returncode == 1 and all(r.ok for r in results)):
        raise RuntimeError(
            f"the AOT compile process failed ({child.returncode}): {stderr.strip()[-2000:]}"
        )
    return results


def render_table(results: list[AotResult]) -> Table:
    """A rich Table of :func:`run_aot_check`'s results, one row per build."""
    from rich.table import Table

    table = Table(title="Ahead-of-time compilation (no GPU needed)")
    cols = ("kernel", "target", "dtype", "widths", "ok", "MMA", "copy", "regs", "spills")
    for col in (*cols, "shared", "s"):
        table.add_column(
            col, justify="right" if col in ("regs", "spills", "shared", "s") else "left"
        )
    for r in results:
        table.add_row(
            r.kernel,
            f"sm_{r.target}",
            r.dtype,
            r.widths,
            "[green]ok[/]" if r.ok else f"[red]FAIL[/] {r.error}",
            r.mma,
            r.copy,
            "?" if r.registers is None else str(r.registers),
            "?" if r.spills is None else str(r.spills),
            "-" if r.shared_bytes is None else f"{r.shared_bytes // 1024} KiB",
            f"{r.seconds:.1f}",
        )
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, nargs="+", default=[80, 90])
    parser.add_argument("--dtypes", nargs="+", default=["fp16", "bf16"])
    parser.add_argument("--widths", nargs="+", default=list(WIDTHS))
    args = parser.parse_args(argv)

    def emit(result: AotResult) -> None:
        print(json.dumps(dataclasses.asdict(result)), flush=True)

    results = run_aot_check(tuple(args.targets), tuple(args.dtypes), tuple(args.widths), emit)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
