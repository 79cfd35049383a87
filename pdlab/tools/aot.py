"""Compile every kernel for real GPUs, ahead of time, on a machine without one.

Triton lowers a kernel to PTX and then to a cubin with the ``ptxas`` inside its wheel, so a
CPU-only machine can still prove that each kernel builds for an A100 (sm_80) and an H100
(sm_90): a kernel that runs in the interpreter but does not compile (``tl.dot`` with a
dimension under 16) is broken for every user with a GPU. The SASS also shows whether the
matrix products use tensor cores (``wgmma`` on Hopper, ``mma`` on Ampere). What is compiled
is in ``aot_specs.py``; ``pdlab doctor --aot`` renders :func:`run_aot_check`. vLLM has no
counterpart: its Triton kernels compile at their first launch.

``TRITON_INTERPRET=1`` (set by ``backend.py`` on a CPU machine) turns every ``@triton.jit``
function into one the compiler cannot lower, for the whole process, so then the check runs
in child Pythons with ``TRITON_INTERPRET=0`` (``python -m pdlab.tools.aot --shard K/N``),
each streaming one JSON line per build back.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction, native_specialize_impl

from pdlab.kernels import cache
from pdlab.tools.aot_specs import ELEM_BYTES, WIDTHS, KernelSpec, specs

# Most shared memory one block may use (bytes): A100 164 KiB, H100 227 KiB.
MAX_SHARED = {80: 166912, 90: 232448}


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
        error = f"{type(e).__name__}: {first[0] if first else ''}"[:300]
        return AotResult(
            spec.name, target, dtype, label, False, error, time.perf_counter() - t0, False
        )
    ptx = compiled.asm["ptx"]
    found = {"mma": "wgmma" if "wgmma" in ptx else ("mma" if "mma.sync" in ptx else "-")}
    found |= inspect_cubin(compiled.asm["cubin"])
    shared = int(getattr(compiled.metadata, "shared", 0))
    error = None
    if shared > MAX_SHARED[target]:
        error = f"needs {shared} bytes of shared memory, sm_{target} has {MAX_SHARED[target]}"
    elif spec.uses_dot and found["mma"] == "-":
        error = "tl.dot compiled without tensor-core instructions"
    tensor_cores = found["mma"] == ("wgmma" if target >= 90 else "mma")
    seconds = time.perf_counter() - t0
    head = (spec.name, target, dtype, label, error is None, error, seconds, tensor_cores)
    return AotResult(*head, shared_bytes=shared, **found)


def compiled_flavour() -> bool:
    """Whether this process's kernels are compilable ``JITFunction`` objects (not interpreted)."""
    return isinstance(cache.reshape_and_cache_mla_kernel, JITFunction)


def default_jobs() -> int:
    """Processes :func:`run_aot_check` compiles in by default: one per core this process may
    run on, at most 8 (each imports torch and triton, about half a GB)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no sched_getaffinity
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def run_aot_check(
    targets: tuple[int, ...] = (80, 90),
    dtypes: tuple[str, ...] = ("fp16", "bf16"),
    widths: tuple[str, ...] = ("tiny", "deepseek"),
    progress: Callable[[AotResult], None] | None = None,
    jobs: int | None = None,
) -> list[AotResult]:
    """Compile every kernel for each target, dtype and set of widths; one result per build,
    in the same order whatever ``jobs`` (processes, default :func:`default_jobs`) is.
    ``progress`` is called with each result as it completes."""
    known = (("dtypes", dtypes, ELEM_BYTES), ("widths", widths, WIDTHS))
    for name, given, allowed in (*known, ("targets", targets, MAX_SHARED)):
        for x in given:
            if x not in allowed:
                raise ValueError(f"{name}: expected a subset of {tuple(allowed)}, got {x!r}")
    if jobs is None:
        jobs = default_jobs()
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs: expected a whole number of processes, 1 or more, got {jobs!r}")
    if compiled_flavour() and jobs == 1:
        return _run_here(targets, dtypes, widths, progress)
    return _run_in_children(targets, dtypes, widths, progress, jobs)


def _builds(targets, dtypes, widths) -> list[tuple[KernelSpec, int, str, str]]:
    """Every build, in the order of the results: (spec, target, dtype, widths label)."""
    return [
        (spec, target, dtype, f"{w} {spec.widths}")
        for w in widths
        for dtype in dtypes
        for target in targets
        for spec in specs(WIDTHS[w], dtype, target)
    ]


def _run_here(targets, dtypes, widths, progress) -> list[AotResult]:
    results = []
    for build in _builds(targets, dtypes, widths):
        results.append(compile_one(*build))
        if progress is not None:
            progress(results[-1])
    return results


def _child_command(targets, dtypes, widths, shard: int, shards: int) -> list[str]:
    cmd = [sys.executable, "-m", "pdlab.tools.aot", "--targets", *map(str, targets)]
    return cmd + ["--dtypes", *dtypes, "--widths", *widths, "--shard", f"{shard}/{shards}"]


def _run_in_children(targets, dtypes, widths, progress, jobs: int) -> list[AotResult]:
    """``jobs`` children with ``TRITON_INTERPRET=0``, each streaming one JSON line per build.
    The first child that fails stops the others at once; the error names its exit status."""
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    jobs = max(1, min(jobs, len(_builds(targets, dtypes, widths))))  # none left idle
    lines: queue.Queue = queue.Queue()
    children: list[subprocess.Popen] = []
    readers: list[threading.Thread] = []
    errs = []

    def read(k: int, child: subprocess.Popen) -> None:
        for line in child.stdout:
            lines.put((k, line))
        lines.put((k, None))  # this child's output has ended

    results: dict[int, AotResult] = {}
    try:
        for k in range(jobs):
            errs.append(tempfile.TemporaryFile("w+"))
            cmd = _child_command(targets, dtypes, widths, k, jobs)
            children.append(
                subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=errs[k], text=True)
            )
            readers.append(threading.Thread(target=read, args=(k, children[k]), daemon=True))
            readers[-1].start()
        running = jobs
        while running:
            k, line = lines.get()
            if line is not None:
                row = json.loads(line)
                result = AotResult(**row["result"])
                results[row["index"]] = result
                if progress is not None:
                    progress(result)
                continue
            running -= 1
            code = children[k].wait()
            mine = [r for i, r in results.items() if i % jobs == k]
            # Exit status 1 with a failed build among the results is a report; anything
            # else broke.
            if code not in (0, 1) or (code == 1 and all(r.ok for r in mine)):
                errs[k].seek(0)
                stderr = errs[k].read().strip()[-2000:]
                raise RuntimeError(f"the AOT compile process failed ({code}): {stderr}")
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
            child.wait()
        for reader, child in zip(readers, children):
            reader.join(timeout=5)  # a ptxas the child started may hold the pipe a moment
            if not reader.is_alive():
                child.stdout.close()
        for err in errs:
            err.close()
    return [results[i] for i in sorted(results)]


def render_table(results: list[AotResult], lang: str = "en") -> Any:
    """A :class:`~pdlab.ui.fmt.FitTable` of :func:`run_aot_check`'s results, one row per
    build; ``lang="zh"``: Chinese headers, which are short already."""
    from pdlab.catalog import text
    from pdlab.errors import error_text
    from pdlab.ui.fmt import FitTable

    zh = lang == "zh"
    title = text(lang, "aot_title")
    table = FitTable(title=title, legend="列：" if zh else "Columns: ")
    for col, short, means, under in (
        ("kernel", None, "", None),
        ("target", "sm", "target", None),
        ("dtype", None, "", "target"),
        ("widths", None, "", "kernel"),
        ("ok", None, "", None),
        ("MMA", None, "", None),
        ("copy", None, "", None),
        ("regs", "reg", "registers per thread", None),
        ("spills", "sp", "spills (LDL/STL)", "regs"),
        ("shared", "smem", "shared memory", None),
        ("s", None, "", "shared"),
    ):
        justify = "right" if col in ("regs", "spills", "shared", "s") else "left"
        if zh:  # the Chinese headers are short already: none is shortened
            col, under, short, means = _zh_header(col), _zh_header(under), None, ""
        table.add_column(col, justify=justify, short=short, means=means, under=under)
    for r in results:
        if r.ok:
            status = f"[green]{text(lang, 'aot_ok')}[/]"
        else:
            status = f"[red]FAIL[/] {error_text(r.error, lang)}"
        regs, spills = ("?" if x is None else str(x) for x in (r.registers, r.spills))
        shared = "-" if r.shared_bytes is None else f"{r.shared_bytes // 1024} KiB"
        build = (r.kernel, f"sm_{r.target}", r.dtype, r.widths, status, r.mma, r.copy)
        table.add_row(*build, regs, spills, shared, f"{r.seconds:.1f}")
    return table


def _zh_header(col: str | None) -> str | None:
    from pdlab.catalog import text

    return col if col in (None, "MMA") else text("zh", f"aot_col_{col}")


def _shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        k = n = -1
    if not 0 <= k < n:
        raise argparse.ArgumentTypeError(f"expected K/N with 0 <= K < N, got {text!r}")
    return k, n


def main(argv: list[str] | None = None) -> int:
    """One JSON line per build: ``{"index": its place among all the builds, "result": ...}``
    (``--shard K/N``: only every N-th build, from the K-th; the parent's children do this)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, nargs="+", default=[80, 90])
    parser.add_argument("--dtypes", nargs="+", default=["fp16", "bf16"])
    parser.add_argument("--widths", nargs="+", default=list(WIDTHS))
    parser.add_argument("--shard", type=_shard, default=(0, 1), metavar="K/N")
    args = parser.parse_args(argv)
    shard, shards = args.shard
    if not compiled_flavour():  # this process interprets: children compile, in order here
        if args.shard != (0, 1):
            parser.error("--shard: run with TRITON_INTERPRET=0 (a child of run_aot_check)")
        every = run_aot_check(tuple(args.targets), tuple(args.dtypes), tuple(args.widths))
        for index, result in enumerate(every):
            print(json.dumps({"index": index, "result": dataclasses.asdict(result)}), flush=True)
        return 0 if all(r.ok for r in every) else 1
    ok = True
    builds = _builds(tuple(args.targets), tuple(args.dtypes), tuple(args.widths))
    for index, build in enumerate(builds):
        if index % shards == shard:
            result = compile_one(*build)
            ok = ok and result.ok
            print(json.dumps({"index": index, "result": dataclasses.asdict(result)}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
