"""Every Triton kernel compiles ahead of time for sm_80 and sm_90, with no GPU present.

The run happens under ``TRITON_INTERPRET=1`` on a CPU machine (``backend.py`` sets it), so
this also checks that the interpreter does not leak into the compile.
"""

import dataclasses
import io

import pytest
from kernel_utils import HAS_TRITON  # imports pdlab.kernels (and its backend) before triton

if not HAS_TRITON:
    pytest.skip("needs triton", allow_module_level=True)

from pdlab.tools import aot, aot_specs  # noqa: E402

# One worker builds them all (``--dist loadgroup``): the module's fixture compiles every
# kernel, and two workers would each compile the whole set.
pytestmark = pytest.mark.xdist_group("aot")


# Session scope: the worker may run other modules' tests between these, and a module-scoped
# fixture would then be rebuilt (every kernel compiled again).
@pytest.fixture(scope="session")
def results():
    return aot.run_aot_check(targets=(80, 90), dtypes=("fp16", "bf16"), widths=("tiny", "deepseek"))


def test_every_kernel_builds_for_every_target(results):
    failed = [
        f"{r.kernel} sm_{r.target} {r.dtype} {r.widths}: {r.error}" for r in results if not r.ok
    ]
    assert not failed, "\n".join(failed)
    names = {s.name for s in aot_specs.specs(aot_specs.WIDTHS["tiny"], "fp16")}
    assert len(names) == 6
    built = {(r.kernel, r.target, r.dtype, r.widths.split()[0]) for r in results}
    assert built == {
        (n, t, d, w)
        for n in names
        for t in (80, 90)
        for d in ("fp16", "bf16")
        for w in ("tiny", "deepseek")
    }


def test_multi_query_decode_builds_without_spills(results):
    """The 1 + K decode (query_start_loc) at DeepSeek's widths for q_len 2 and 3, split and
    not, for both targets and half types: built, on tensor cores, no local-memory spills."""
    spec = [r for r in results if "q_len=" in r.widths]
    for q_len in aot_specs.SPEC_Q_LENS:
        for t in (80, 90):
            for d in ("fp16", "bf16"):
                mine = [
                    r
                    for r in spec
                    if r.kernel == "mla_decode stage 1"
                    and f"q_len={q_len}" in r.widths
                    and (r.target, r.dtype) == (t, d)
                ]
                assert {r.widths.split()[0] for r in mine} == {"deepseek"}
                assert len(mine) == 2, mine  # the sample batch (not split) and one request
                for r in mine:
                    assert r.ok and r.spills == 0 and r.registers <= 255, r
                    assert r.mma == ("wgmma" if t == 90 else "mma"), r
    assert any(r.kernel == "mla_decode stage 2" for r in spec)


def test_fp32_tiles_fit_too():
    """fp32 (what the CPU engine runs, and the GPU tests' first case) doubles tile bytes."""
    results = aot.run_aot_check(dtypes=("fp32",), widths=("deepseek",))
    failed = [f"{r.kernel} sm_{r.target} {r.widths}: {r.error}" for r in results if not r.ok]
    assert results and not failed, "\n".join(failed)


def test_matrix_products_use_tensor_cores(results):
    for r in results:
        if r.kernel in ("flash_attn_varlen", "mla_decode stage 1"):
            # 128 query rows, or 64 cached tokens on M (swap-AB): Hopper's warp-group MMA
            # on sm_90, mma.sync on sm_80; the tiles reach shared memory by cp.async.
            assert r.tensor_cores and r.mma == ("wgmma" if r.target == 90 else "mma"), r
            assert r.copy == "cp.async", r
        else:
            assert r.mma == "-", r


def test_resources_read_from_the_cubin(results):
    """Registers and spills come from the SASS (cuobjdump); no kernel spills to local memory."""
    for r in results:
        assert r.registers is not None and 0 < r.registers <= 255, r
        assert r.spills == 0, r
        assert r.copy in ("-", "cp.async", "TMA"), r


def test_build_is_specialised_like_the_jit():
    """Multiples of 16 carry tt.divisibility (the JIT's rule), a 1 becomes a constant, and
    every integer argument of every kernel has a sample value."""
    from triton.runtime.jit import native_specialize_impl  # noqa: PLC0415

    for spec in aot_specs.specs(aot_specs.WIDTHS["deepseek"], "bf16"):
        src = aot._source(spec, "bf16")
        for i, name in enumerate(spec.kernel.arg_names):
            if name in spec.ints and name not in spec.constexprs:
                kind, desc = native_specialize_impl(
                    aot.CUDABackend, spec.ints[name], False, True, True
                )
                has_attr = bool(src.attrs.get((i,)))
                assert has_attr == (desc == "D"), (spec.name, name)
                assert (src.signature[name] == "constexpr") == (kind == "constexpr")


def test_shared_memory_fits(results):
    for r in results:
        assert r.shared_bytes is not None and r.shared_bytes <= aot.MAX_SHARED[r.target], r


def test_render_table(results):
    table = aot.render_table(results)
    assert table.row_count == len(results)


def test_bad_arguments():
    with pytest.raises(ValueError, match="dtypes"):
        aot.run_aot_check(dtypes=("fp8",))
    with pytest.raises(ValueError, match="targets"):
        aot.run_aot_check(targets=(75,))
    for jobs in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="jobs: expected a whole number"):
            aot.run_aot_check(jobs=jobs)


def _fields(r):
    return dataclasses.replace(r, seconds=0.0)


def test_the_results_come_in_one_order_whatever_the_number_of_processes(results):
    """Two children share the sm_80 fp16 tiny builds (every other one each); the results are
    the session's own (made with the default number of processes), in the same order."""
    mine = aot.run_aot_check(targets=(80,), dtypes=("fp16",), widths=("tiny",), jobs=2)
    same = [r for r in results if (r.target, r.dtype, r.widths.split()[0]) == (80, "fp16", "tiny")]
    assert len(mine) == len(same) >= 6
    assert [_fields(r) for r in mine] == [_fields(r) for r in same]


def test_a_child_that_fails_stops_the_others_and_says_how(monkeypatch):
    """One child fails at once while the other would run for ten minutes: the check
    raises, naming the status and the child's last words, and leaves no child behind."""
    import sys

    import psutil

    def command(targets, dtypes, widths, shard, shards):
        if shard == 1:
            return [sys.executable, "-c", "import sys; sys.exit('ptxas fell over')"]
        return [sys.executable, "-c", "import time; time.sleep(600)"]

    monkeypatch.setattr(aot, "_child_command", command)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(RuntimeError, match=r"failed \(1\): ptxas fell over"):
        aot.run_aot_check(targets=(80,), dtypes=("fp16",), widths=("tiny",), jobs=2)
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert not left, left


def test_doctor_summary_counts_the_builds_and_their_spills(results, monkeypatch):
    """``pdlab doctor --aot``'s summary line from the same builds: how many compiled, and
    whether any spills (one made to spill here says so)."""
    from rich.console import Console

    from pdlab.tools import doctor

    console = Console(file=io.StringIO())
    monkeypatch.setattr(aot, "run_aot_check", lambda: results)
    check = doctor.run_aot(console)
    assert check.ok and check.detail == (
        f"{len(results)}/{len(results)} kernel builds compiled for sm_80 and sm_90, none spills"
    )
    spilled = [dataclasses.replace(results[0], spills=3), *results[1:]]
    monkeypatch.setattr(aot, "run_aot_check", lambda: spilled)
    assert doctor.run_aot(console).detail.endswith("1 spilling registers (the spills column)")
