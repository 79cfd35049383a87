"""The one command for GPU owners: ``python -m pdlab.tools.gpu_check``.

On a CUDA machine it prints one table, in bf16 at DeepSeek-V3's widths, and writes it as
JSON (``--json PATH``): ``mla_decode`` in GB/s of useful bytes (:data:`DECODE`) and
``flash_attn_varlen`` in TFLOP/s of useful work (:data:`PREFILL`), each beside the ceiling
measured in the same run and torch SDPA on the same math. The whole table takes a few
minutes. ``--tests`` also runs ``tests/engine/test_kernels*.py`` compiled first (bf16
included, which the CPU interpreter cannot check). Without a GPU it says what to run instead.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from pdlab.sim import kernel_costs as cost
from pdlab.tools import measure

if TYPE_CHECKING:
    from rich.table import Table

# kernels/ is installed as pdlab.kernels (editable), so the tests sit next to it in a checkout.
TESTS = Path(__file__).resolve().parents[2] / "tests" / "engine"


def run_tests() -> dict:
    """Run ``tests/engine/test_kernels*.py`` in a child pytest; count its JUnit outcomes."""
    files = sorted(str(p) for p in TESTS.glob("test_kernels*.py"))
    if not files:
        return {
            "error": f"no tests/engine/test_kernels*.py next to the package ({TESTS}); run this "
            "from a git checkout of pdlab"
        }
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"]
        proc = subprocess.run(
            [*cmd, *files], env=env, cwd=TESTS.parents[1], capture_output=True, text=True
        )
        seconds = time.perf_counter() - t0
        counts = {"passed": 0, "failed": 0, "skipped": 0, "triton_bf16_passed": 0}
        failures = []
        if xml.exists():
            for case in ET.parse(xml).iter("testcase"):
                name = case.get("name", "")
                if case.find("failure") is not None or case.find("error") is not None:
                    counts["failed"] += 1
                    failures.append(f"{case.get('classname')}::{name}")
                elif case.find("skipped") is not None:
                    counts["skipped"] += 1
                else:
                    counts["passed"] += 1
                    counts["triton_bf16_passed"] += "triton-bf16" in name
    return {
        **counts,
        "failures": failures,
        "seconds": seconds,
        "returncode": proc.returncode,
        "tail": proc.stdout[-3000:] + proc.stderr[-2000:],
    }


DECODE = {"batch": (64, 128), "heads": (16, 128), "context": (4096, 32768), "splits": (None, 4)}
PREFILL = {"heads": 128, "seqlen": (4096, 8192, 16384)}
L, R, D_QK, D_V, PAGE = 512, 64, 192, 128, 64


def _decode_rows(device: torch.device, ceilings: dict, reps: int) -> list[dict]:
    from pdlab.kernels.decode_attention import mla_decode

    rows = []
    dtype = torch.bfloat16
    for B in DECODE["batch"]:
        for ctx in DECODE["context"]:
            cache, table, seq_lens = measure.shuffled_paged_cache(
                B, ctx, PAGE, L + R, dtype, device
            )
            for H in DECODE["heads"]:
                q = torch.randn(B, H, L + R, device=device).to(dtype)
                _, useful = cost.mla_decode_cost([ctx] * B, H, L + R, L)  # bf16: 2 bytes
                sdpa = _sdpa_decode(q, cache, table, ctx, reps)
                for splits in DECODE["splits"]:
                    run = partial(
                        mla_decode, q, cache, table, seq_lens, 0.1, splits, kv_lora_rank=L
                    )
                    ms = measure.time_cuda(partial(run, backend="triton"), reps <= 5)
                    gbps, shape = useful / ms / 1e6, f"B={B} H={H} ctx={ctx // 1024}K"
                    row = {"kernel": "mla_decode", "shape": shape, "splits": splits or "auto"}
                    row |= {"ms": ms, "gbps": gbps, "of_ceiling": gbps / ceilings["copy_gbps"]}
                    row |= {"sdpa_ms": sdpa, "sdpa_gbps": useful / sdpa / 1e6 if sdpa else None}
                    rows.append(row)
    return rows


def _sdpa_decode(q, cache, table, ctx: int, reps: int) -> float | None:
    """torch SDPA on the same math, the rows gathered once beforehand (one KV head)."""
    B, H, _ = q.shape
    try:
        keys = cache[table.long()].view(B, -1, L + R)[:, None, :ctx]  # [B, 1, ctx, L + R]
        keys = keys.contiguous()
        f = torch.nn.functional.scaled_dot_product_attention
        run = partial(f, q[:, :, None], keys, keys[..., :L], scale=0.1, enable_gqa=True)
        return measure.time_cuda(run, reps <= 5)
    except Exception:  # an SDPA without enable_gqa or out of memory: leave the cell empty
        return None


def _prefill_rows(device: torch.device, ceilings: dict, reps: int) -> list[dict]:
    from pdlab.kernels.flash_attn import flash_attn_varlen

    H, dtype, rows = PREFILL["heads"], torch.bfloat16, []
    f = torch.nn.functional.scaled_dot_product_attention
    for S in PREFILL["seqlen"]:
        q = torch.randn(S, H, D_QK, device=device).to(dtype)
        k = torch.randn(S, H, D_QK, device=device).to(dtype)
        v = torch.randn(S, H, D_V, device=device).to(dtype)
        cu = torch.tensor([0, S], dtype=torch.int32, device=device)
        flops, _ = cost.flash_attn_cost([S], [S], H, D_QK, D_V, True)  # the visible pairs only
        run = partial(flash_attn_varlen, q, k, v, cu, cu, S, S, D_QK**-0.5, True)
        ms = measure.time_cuda(partial(run, backend="triton"), reps <= 5)
        qb, kb, vb = (t.transpose(0, 1)[None] for t in (q, k, v))  # [1, H, S, D]
        try:
            sdpa_run = partial(f, qb, kb, vb, is_causal=True, scale=D_QK**-0.5)
            sdpa = measure.time_cuda(sdpa_run, reps <= 5)
        except Exception:  # no SDPA backend for these widths: leave the cell empty
            sdpa = None
        tflops, shape = flops / ms / 1e9, f"H={H} S={S // 1024}K causal"
        row = {"kernel": "flash_attn_varlen", "shape": shape, "splits": "-", "ms": ms}
        row |= {"tflops": tflops, "of_ceiling": tflops / ceilings["matmul_tflops"], "sdpa_ms": sdpa}
        rows.append(row | {"sdpa_tflops": flops / sdpa / 1e9 if sdpa else None})
    return rows


def render(result: dict) -> Table:
    """The one table: each case beside the measured ceiling and torch SDPA."""
    from rich.table import Table

    c = result["ceilings"]
    table = Table(
        title=f"pdlab gpu_check on {result['device']}: copy {c['copy_gbps']:.0f} GB/s, "
        f"matmul {c['matmul_tflops']:.0f} TFLOP/s (measured now, {c['matmul_shape']})"
    )
    for col in ("kernel", "shape", "splits", "ms", "GB/s | TFLOP/s", "of ceiling", "SDPA"):
        table.add_column(col, justify="left" if col in ("kernel", "shape") else "right")
    for r in result["rows"]:
        unit = "GB/s" if "gbps" in r else "TFLOP/s"
        rate, other = r.get("gbps", r.get("tflops")), r.get("sdpa_gbps") or r.get("sdpa_tflops")
        sdpa = "-" if other is None else f"{other:.0f} {unit}"
        cells = (str(r["splits"]), f"{r['ms']:.3f}", f"{rate:.0f} {unit}", f"{r['of_ceiling']:.0%}")
        table.add_row(r["kernel"], r["shape"], *cells, sdpa)
    return table


def run_benchmark(reps: int = 10) -> dict:
    """Measure the ceilings, then every case; a JSON-ready dict."""
    device = torch.device("cuda")
    t0 = time.perf_counter()
    ceilings = measure.measure_ceilings(device, torch.bfloat16, quick=reps <= 5)
    with torch.no_grad():
        rows = _decode_rows(device, ceilings, reps) + _prefill_rows(device, ceilings, reps)
    return {
        "device": torch.cuda.get_device_name(device),
        "capability": "sm_{}{}".format(*torch.cuda.get_device_capability(device)),
        "torch": torch.__version__,
        "ceilings": ceilings,
        "rows": rows,
        "seconds": time.perf_counter() - t0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Measure pdlab's Triton kernels on a CUDA GPU.")
    parser.add_argument("--json", type=Path, default=Path("gpu_check.json"))
    parser.add_argument("--quick", action="store_true", help="fewer repetitions per case")
    parser.add_argument("--tests", action="store_true", help="first run the kernel tests")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(
            "gpu_check: no CUDA device here. On a CPU run `make test` (the interpreter and "
            "the torch twins) and `pdlab doctor --aot` (compiles for sm_80/sm_90)."
        )
        return 2
    import triton
    from rich.console import Console

    console = Console()
    console.print(
        f"[bold]pdlab gpu_check[/], torch {torch.__version__}, triton {triton.__version__}"
    )
    tests = None
    if args.tests:
        console.print("running tests/engine/test_kernels*.py compiled ...")
        tests = run_tests()
        console.print(
            tests.get("error")
            or f"tests: {tests['passed']} passed, {tests['failed']} failed, "
            f"{tests['skipped']} skipped ({tests['triton_bf16_passed']} Triton bf16 cases)"
        )
    result = run_benchmark(reps=5 if args.quick else 10)
    console.print(render(result))
    args.json.write_text(json.dumps({**result, "tests": tests}, indent=2))
    console.print(f"{result['seconds']:.0f} s; wrote {args.json}")
    failed = tests is not None and ("error" in tests or tests["failed"] or tests["returncode"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
