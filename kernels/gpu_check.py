"""The one command for GPU owners: ``python -m pdlab.kernels.gpu_check``.

On a CUDA machine it (1) runs the kernel tests, where every Triton kernel is compiled and
checked against the oracle, bf16 included (on a CPU the interpreter cannot check bf16
natively), (2) runs the benchmark, and (3) prints a compact summary to paste into an issue:
the device, tests passed and failed (and how many were Triton in bf16), and the benchmark
table. ``--json PATH`` also writes the results as JSON. Exit status 0 when every test passed.
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
from pathlib import Path

import torch

# kernels/ is installed as pdlab.kernels (editable), so the tests sit next to it in a checkout.
TESTS = Path(__file__).resolve().parent.parent / "tests"


def run_tests(extra: list[str] | None = None) -> dict:
    """Run ``tests/test_kernels*.py`` in a child pytest; count outcomes from its JUnit XML."""
    files = sorted(str(p) for p in TESTS.glob("test_kernels*.py"))
    if not files:
        return {
            "error": f"no tests/test_kernels*.py next to the package ({TESTS}); run this "
            "from a git checkout of pdlab"
        }
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        t0 = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--junitxml={xml}",
                *files,
                *(extra or []),
            ],
            env=env,
            cwd=TESTS.parent,
            capture_output=True,
            text=True,
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check pdlab's Triton kernels on a CUDA GPU.")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    parser.add_argument("--quick", action="store_true", help="shorter benchmark")
    parser.add_argument("--no-bench", action="store_true", help="tests only")
    args = parser.parse_args(argv)

    if not torch.cuda.is_available():
        print(
            "gpu_check: no CUDA device here. On a CPU run `make test` (the interpreter and "
            "the torch twins) and `pdlab doctor --aot` (compiles for sm_80/sm_90)."
        )
        return 2
    from rich.console import Console

    from pdlab.kernels.bench import bench_kernels, render_table

    console = Console()
    name = torch.cuda.get_device_name(0)
    major, minor = torch.cuda.get_device_capability(0)
    import triton

    console.print(
        f"[bold]pdlab gpu_check[/] on {name} (sm_{major}{minor}), torch "
        f"{torch.__version__}, triton {triton.__version__}"
    )

    console.print("running tests/test_kernels*.py compiled ...")
    tests = run_tests()
    if "error" in tests:
        console.print(f"[red]tests: {tests['error']}[/]")
    else:
        colour = "green" if tests["failed"] == 0 and tests["returncode"] == 0 else "red"
        console.print(
            f"[{colour}]tests: {tests['passed']} passed, {tests['failed']} failed, "
            f"{tests['skipped']} skipped in {tests['seconds']:.0f}s "
            f"({tests['triton_bf16_passed']} Triton bf16 cases passed)[/]"
        )
        for f in tests["failures"][:20]:
            console.print(f"  [red]FAILED[/] {f}")
        if tests["returncode"] not in (0, 1):  # 1 = tests failed; else pytest itself broke
            console.print(tests["tail"])

    bench = None
    if not args.no_bench:
        console.print("benchmarking ...")
        bench = bench_kernels(quick=args.quick)
        console.print(render_table(bench))
    if args.json:
        args.json.write_text(
            json.dumps({"device": name, "tests": tests, "bench": bench}, indent=2, default=str)
        )
        console.print(f"wrote {args.json}")
    ok = "error" not in tests and tests["failed"] == 0 and tests["returncode"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
