"""Every kernel checks its index ranges in Python before launch, on every backend, and says
which argument is out of range; the checks are on by default and a switch turns them off."""

import re

import pytest
import torch

import pdlab.kernels as K
from pdlab.kernels import checks
from tests.kernel_utils import DEVICE, HAS_TRITON

BACKENDS = [
    "torch",
    pytest.param("triton", marks=pytest.mark.skipif(not HAS_TRITON, reason="needs triton")),
]
NB, BS, L, R, H = 6, 4, 16, 8, 2  # 6 blocks of 4 slots, rows of 16 + 8


def _i32(x):
    return torch.tensor(x, dtype=torch.int32, device=DEVICE)


def _cache():
    g = torch.Generator().manual_seed(0)
    return torch.randn(NB, BS, L + R, generator=g).to(DEVICE)


def _write(slots, backend):
    T = len(slots)
    g = torch.Generator().manual_seed(1)
    kv_c, k_pe = (
        torch.randn(T, L, generator=g).to(DEVICE),
        torch.randn(T, R, generator=g).to(DEVICE),
    )
    cache = _cache()
    sm = torch.tensor(slots, dtype=torch.int64, device=DEVICE)
    K.reshape_and_cache_mla(kv_c, k_pe, cache, sm, backend=backend)
    return cache


def _decode(block_table, seq_lens, backend):
    q = torch.randn(len(seq_lens), H, L + R, generator=torch.Generator().manual_seed(2)).to(DEVICE)
    return K.mla_decode(
        q, _cache(), _i32(block_table), _i32(seq_lens), 0.1, 2, kv_lora_rank=L, backend=backend
    )


def _gather(block_table, cu, starts, backend):
    return K.gather_cache(
        _cache(),
        _i32(block_table),
        _i32(cu),
        None if starts is None else _i32(starts),
        backend=backend,
    )


def _flash(cu_q, cu_k, tq, tk, max_q, max_k, backend):
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(n, H, 8, generator=g).to(DEVICE) for n in (tq, tk, tk))
    return K.flash_attn_varlen(
        q, k, v, _i32(cu_q), _i32(cu_k), max_q, max_k, 0.3, True, backend=backend
    )


CASES = [
    (
        "slot past the cache",
        lambda b: _write([0, NB * BS], b),
        "slot_mapping[1]=24 is out of range: expected a slot in [0, 24)",
    ),
    (
        "decode block -1",
        lambda b: _decode([[0, -1]], [7], b),
        "block_table[0, 1]=-1 is out of range: expected a block id in [0, 6)",
    ),
    (
        "decode block past the cache",
        lambda b: _decode([[0, 6]], [5], b),
        "block_table[0, 1]=6 is out of range",
    ),
    (
        "seq_lens past the table",
        lambda b: _decode([[0, 1]], [9], b),
        "seq_lens[0]=9 is out of range: expected a length in [0, 8]",
    ),
    (
        "negative seq_lens",
        lambda b: _decode([[0, 1], [2, 3]], [3, -1], b),
        "seq_lens[1]=-1 is out of range",
    ),
    (
        "gather block -1",
        lambda b: _gather([[0, -1]], [0, 6], None, b),
        "block_table[0, 1]=-1 is out of range",
    ),
    (
        "gather past the table",
        lambda b: _gather([[0, 1]], [0, 9], None, b),
        "past its block table's capacity of 8",
    ),
    (
        "gather start past the table",
        lambda b: _gather([[0, 1]], [0, 2], [7], b),
        "past its block table's capacity of 8",
    ),
    (
        "gather negative start",
        lambda b: _gather([[0, 1]], [0, 2], [-1], b),
        "seq_starts[0]=-1 is out of range",
    ),
    (
        "gather decreasing cu",
        lambda b: _gather([[0, 1], [2, 3]], [0, 5, 3], None, b),
        "cu_seq_lens[2]=3 is out of range: expected >= cu_seq_lens[1]=5",
    ),
    (
        "flash decreasing cu_q",
        lambda b: _flash([0, 3, 2], [0, 3, 5], 2, 5, 3, 3, b),
        "cu_seqlens_q[2]=2 is out of range",
    ),
    (
        "flash cu_q not from 0",
        lambda b: _flash([1, 3], [0, 3], 3, 3, 3, 3, b),
        "cu_seqlens_q[0]=1 is out of range",
    ),
    (
        "flash cu_k past k",
        lambda b: _flash([0, 3], [0, 9], 3, 5, 3, 9, b),
        "cu_seqlens_k[1]=9 is out of range: expected 5, the number of rows of k",
    ),
    (
        "flash max_seqlen_q too small",
        lambda b: _flash([0, 3], [0, 3], 3, 3, 2, 3, b),
        "max_seqlen_q=2 is too small: expected at least 3",
    ),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("what, call, needle", CASES, ids=[c[0] for c in CASES])
def test_out_of_range_indices_are_refused_before_launch(backend, what, call, needle):
    with pytest.raises(ValueError, match=re.escape(needle)):
        call(backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_range_edges_still_run(backend):
    cache = _write([-1, 0, NB * BS - 1, -7], backend)  # negative slots are skipped
    assert torch.equal(cache[1 : NB - 1], _cache()[1 : NB - 1])
    out, lse = _decode([[0, 1], [5, -1]], [8, 4], backend)  # the padding after 4 is never read
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    rows = _gather([[0, 5], [3, -1]], [0, 8, 9], [0, 3], backend)
    assert rows.shape == (9, L + R)
    assert torch.equal(rows[8], _cache()[3, 3])


def test_the_switch_turns_the_checks_off_and_back(monkeypatch):
    assert K.index_checks_enabled()
    with K.index_checks(False):
        assert not K.index_checks_enabled()
        # the torch twin now meets the bad slot itself: torch's own IndexError, no crash
        with pytest.raises(IndexError):
            _write([NB * BS + 100], "torch")
    assert K.index_checks_enabled()
    monkeypatch.setenv("PDLAB_CHECK_INDICES", "0")
    assert not K.index_checks_enabled()
    K.set_index_checks(True)  # the function wins over the environment
    try:
        assert K.index_checks_enabled()
    finally:
        K.set_index_checks(None)
    monkeypatch.setenv("PDLAB_CHECK_INDICES", "maybe")
    with pytest.raises(ValueError, match="PDLAB_CHECK_INDICES='maybe' is invalid"):
        _write([0], "torch")
    with pytest.raises(ValueError, match="enabled='yes' is invalid"):
        checks.set_index_checks("yes")
