"""The kernel package's tools: the CPU benchmark, and running without triton (a Mac)."""

import json
import os
import subprocess
import sys

import pytest
import torch

from pdlab.kernels.backend import triton_installed
from pdlab.tools.bench_kernels import bench_kernels, render_table
from pdlab.ui.layout import FitTable


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
        "mla_decode",
        "mla_decode",
    ]
    assert all(r["impl"] == "torch" and r["ms"] > 0 and "error" not in r for r in result["rows"])
    # The two attentions stand beside a dense torch version of the same math.
    for r in result["rows"]:
        has_dense = r["kernel"] in ("flash_attn_varlen", "mla_decode")
        assert ("dense_ms" in r) == has_dense
        if has_dense:
            assert r["dense_ms"] > 0 and r["vs_dense"] == r["ms"] / r["dense_ms"]
    assert seen[0] == (0, 7) and seen[-1] == (7, 7)
    json.dumps(result)
    table = render_table(result)
    assert isinstance(table, FitTable) and table.row_count == 7  # fits the width it gets


_NO_TRITON = """
import sys
sys.modules["triton"] = None          # as on macOS: `import triton` fails
import pytest
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


def test_bench_paths_reports_each_path_beside_this_machines_floor():
    """The floor is max(FLOPs / matmul rate, bytes / copy rate), both rates measured in the
    same run; the cost model gives FLOPs and bytes."""
    from pdlab.engine.config import ModelConfig
    from pdlab.sim import kernel_costs as cost
    from pdlab.tools.bench import bench_paths, render_paths_table

    res = bench_paths("deepseek-v3", contexts=[48], num_heads=2, repeats=1)
    c = res["ceilings"]
    assert c["matmul_tflops"] > 0 and c["copy_gbps"] > 0
    cfg = ModelConfig.preset("deepseek-v3").replace(num_attention_heads=2)
    (r,) = res["rows"]
    for path, model in (
        ("prefill", cost.prefill_path_cost(cfg, 48, e=4, prefill_backend="pdlab")),  # what runs
        ("decode", cost.decode_path_cost(cfg, 48, e=4)),
    ):
        floor = max(model.flops / (c["matmul_tflops"] * 1e9), model.bytes / (c["copy_gbps"] * 1e6))
        assert r[f"{path}_floor_ms"] == floor
        assert r[f"{path}_vs_floor"] == r[f"{path}_ms"] / floor
    assert r["max_abs_diff"] < 1e-4
    assert render_paths_table(res).row_count == 1


def test_gpu_check_table_logic_runs_on_small_shapes(monkeypatch):
    """gpu_check needs a GPU to mean anything, but its table is built by plain code: run
    it on the CPU at small shapes (CPU timer, torch twins where triton would be compiled)
    so that the GPU run does not meet its first bug."""
    from pdlab.kernels import decode_attention, flash_attn
    from pdlab.tools import gpu_check, measure

    monkeypatch.setattr(measure, "time_cuda", measure.time_cpu)
    monkeypatch.setattr(
        gpu_check, "DECODE", {"batch": (2,), "heads": (4,), "context": (128,), "splits": (None, 4)}
    )
    monkeypatch.setattr(gpu_check, "PREFILL", {"heads": 2, "seqlen": (64,)})
    for mod, name in ((decode_attention, "mla_decode"), (flash_attn, "flash_attn_varlen")):
        real = getattr(mod, name)  # gpu_check asks for backend="triton": give it the twin
        monkeypatch.setattr(mod, name, lambda *a, _f=real, **k: _f(*a, **{**k, "backend": "torch"}))
    cpu = torch.device("cpu")
    ceilings = measure.measure_ceilings(cpu, torch.float32)
    rows = gpu_check._decode_rows(cpu, ceilings, 3) + gpu_check._prefill_rows(cpu, ceilings, 3)
    assert [r["splits"] for r in rows] == ["auto", 4, "-"]
    for r in rows[:2]:
        useful = 2.0 * (2 * 128 * 576 + 2 * 4 * 576 + 2 * 4 * 512)
        assert r["gbps"] == useful / r["ms"] / 1e6
        assert r["of_ceiling"] == r["gbps"] / ceilings["copy_gbps"]
    flops = 2.0 * 2 * 64 * 65 / 2 * (192 + 128)
    assert rows[2]["tflops"] == flops / rows[2]["ms"] / 1e9
    table = gpu_check.render({"device": "cpu", "ceilings": ceilings, "rows": rows})
    assert table.row_count == 3


def test_decode_cost_of_1_plus_k_queries_counts_pairs_and_reads_rows_once():
    """Query j of q_len sees seq_len - q_len + j + 1 keys: FLOPs follow those pairs; the
    latent rows are read once per request, each query and output adds its own bytes."""
    from pdlab.sim import kernel_costs as cost

    H, W, V, e = 4, 80, 64, 2
    flops, nbytes = cost.mla_decode_cost([10, 7], H, W, V, e, q_lens=[3, 1])
    assert flops == 2.0 * H * (W + V) * ((8 + 9 + 10) + 7)
    assert nbytes == e * ((10 + 7) * W + 4 * H * (W + V))
    assert cost.mla_decode_cost([10, 7], H, W, V, e, [1, 1]) == cost.mla_decode_cost(
        [10, 7], H, W, V, e
    )
    # The split workspace is per query: 3 queries of a split request write 3 partials.
    one = cost.split_workspace_cost([300], H, 64, 4, 64)
    three = cost.split_workspace_cost([300], H, 64, 4, 64, q_lens=[3])
    assert one[1] > 0 and three == (3 * one[0], 3 * one[1])


def test_bench_paths_with_speculative_tokens_times_1_plus_k_beside_one_query(tmp_path):
    """``pdlab bench paths --num-speculative-tokens 2``: the decode kernel for 1 + K queries
    beside one query and beside the same queries flattened, each beside its floor from the
    modelled cost; the shared and flattened results agree."""
    from pdlab.cli import main
    from pdlab.sim import kernel_costs as cost
    from pdlab.tools.bench import bench_paths, render_spec_table

    res = bench_paths(
        "deepseek-v3", contexts=[40, 130], num_heads=2, repeats=1, num_speculative_tokens=2
    )
    c, L, R = res["ceilings"], 512, 64
    assert [r["context"] for r in res["spec"]] == [40, 130]
    for r in res["spec"]:
        n = r["context"]
        flat = [n + 1, n + 2, n + 3]
        lens = {"one": ([n + 1], None), "spec": ([n + 3], [3]), "flat": (flat, None)}
        for name, (seq, q_lens) in lens.items():
            flops, nbytes = cost.mla_decode_call_cost(seq, 2, L, R, r[f"{name}_splits"], 4, q_lens)
            floor = max(flops / (c["matmul_tflops"] * 1e9), nbytes / (c["copy_gbps"] * 1e6))
            assert r[f"{name}_floor_ms"] == floor and r[f"{name}_ms"] > 0
        # 3 queries see n+1, n+2, n+3 keys; one query n + 1: FLOPs about 3x, bytes far less.
        assert r["flop_ratio"] == pytest.approx(3 * (n + 2) / (n + 1), rel=0.05)
        assert 1 < r["bytes_ratio"] < r["flop_ratio"] and r["flat_bytes_ratio"] > 2
        assert r["max_abs_diff"] < 1e-4
    assert render_spec_table(res).row_count == 2
    out = tmp_path / "spec.json"
    argv = ["bench", "paths", "--heads", "2", "--context", "32", "--repeats", "1"]
    assert main([*argv, "--num-speculative-tokens", "1", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["spec"][0]["K"] == 1
    with pytest.raises(ValueError, match="num_speculative_tokens=0 is invalid"):
        bench_paths("deepseek-v3", contexts=[8], num_heads=2, num_speculative_tokens=0)
