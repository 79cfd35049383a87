"""The kernel package's tools: the CPU benchmark, and running without triton (a Mac)."""

import json
import os
import subprocess
import sys

from rich.table import Table

from pdlab.kernels.backend import triton_installed
from pdlab.kernels.bench import bench_kernels, render_table


def test_cpu_benchmark_times_the_twins_and_says_so():
    seen = []
    result = bench_kernels(
        device="cpu", quick=True, progress=lambda done, total, label: seen.append((done, total))
    )
    assert result["gpu"] is False
    # the note says what is installed: triton through its interpreter, or no triton at all
    assert ("through the interpreter" in result["note"]) == triton_installed()
    assert ("Triton is not installed" in result["note"]) == (not triton_installed())
    kernels = [r["kernel"] for r in result["rows"]]
    assert kernels == [
        "reshape_and_cache_mla",
        "gather_cache",
        "flash_attn_varlen",
        "merge_attn_states",
        "mla_decode",
    ]
    assert all(r["impl"] == "torch" and r["ms"] > 0 and "error" not in r for r in result["rows"])
    assert seen[0] == (0, 5) and seen[-1] == (5, 5)
    json.dumps(result)
    table = render_table(result)
    assert isinstance(table, Table) and table.row_count == 5


_NO_TRITON = """
import sys
sys.modules["triton"] = None          # as on macOS: `import triton` fails
import torch
from pdlab import kernels as K
assert K.get_backend() == "torch"
from pdlab.attention.reference import naive_attention
torch.manual_seed(0)
cache = torch.randn(6, 4, 80)
table = torch.tensor([[5, 2, 0], [1, 3, 4]], dtype=torch.int32)
lens = torch.tensor([9, 3], dtype=torch.int32)
q = torch.randn(2, 4, 80)
out, lse = K.mla_decode(q, cache, table, lens, 0.2)
rows = K.gather_cache(cache, table, torch.tensor([0, 9, 12], dtype=torch.int32))
o, l = naive_attention(q[:1], rows[:9, None], rows[:9, None, :64], 0.2, False)
torch.testing.assert_close(out[:1], o)
print("ok")
"""


def test_kernels_import_and_run_without_triton():
    env = {k: v for k, v in os.environ.items() if k != "PDLAB_BACKEND"}
    proc = subprocess.run(
        [sys.executable, "-c", _NO_TRITON], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
