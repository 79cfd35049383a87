"""reshape_and_cache_mla and gather_cache, Triton and torch, against rows placed by hand.

These two only move values, so the check is exact (bit for bit) in every dtype: each row
lands in its slot, padded tokens (slot -1) write nothing, no other slot changes (NaN traps
stay NaN), and gathering reads back exactly the rows of each request, in order.
"""

import pytest
import torch
from kernel_utils import ALL_IMPLS, DEVICE, paged_cache

from pdlab.kernels import gather_cache, reshape_and_cache_mla


def _cu(lens):
    return torch.tensor(
        [0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=DEVICE
    )


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality, NaN included (NaN traps must still be NaN)."""
    return a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all())


@pytest.mark.parametrize("backend,dtype", ALL_IMPLS)
@pytest.mark.parametrize("block_size", [1, 4, 16, 64])
def test_write_then_gather_roundtrip(backend, dtype, block_size):
    g = torch.Generator().manual_seed(block_size)
    L, R = 64, 16
    lens = [1, block_size, block_size + 1, 37, 5]
    empty = paged_cache(lens, block_size, L + R, dtype, g, fill=False)
    cache = empty.kv_cache.clone()
    # One step writes every token of every request, interleaved, plus padding tokens (-1).
    slots = torch.cat([empty.slot_mapping(i, torch.arange(n)) for i, n in enumerate(lens)])
    rows = torch.cat(empty.rows)
    pad = torch.full((3,), -1, dtype=torch.int64, device=DEVICE)
    order = torch.randperm(rows.shape[0] + 3, generator=g).to(DEVICE)
    slots_step = torch.cat([slots, pad])[order]
    rows_step = torch.cat([rows, torch.randn(3, L + R, generator=g).to(dtype).to(DEVICE)])[order]
    reshape_and_cache_mla(
        rows_step[:, :L].contiguous(),
        rows_step[:, L:].contiguous(),
        cache,
        slots_step,
        backend=backend,
    )

    expected = empty.kv_cache.clone().view(-1, L + R)
    expected[slots] = rows
    assert _same(cache.view(-1, L + R), expected), "a row is missing, or a stray slot was written"

    got = gather_cache(cache, empty.block_table, _cu(lens), backend=backend)
    assert _same(got, rows)


@pytest.mark.parametrize("backend,dtype", ALL_IMPLS[:1] + ALL_IMPLS[3:4])
@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_gather_a_chunk_of_each_context(backend, dtype, block_size):
    """seq_starts: request i contributes positions [start_i, start_i + n_i), as when a long
    context is gathered chunk by chunk (vLLM's _compute_prefill_context)."""
    g = torch.Generator().manual_seed(7 + block_size)
    lens = [40, 9, 17, 3]
    p = paged_cache(lens, block_size, 80, dtype, g)
    starts, counts = [16, 0, 5, 2], [20, 9, 12, 1]
    got = gather_cache(
        p.kv_cache,
        p.block_table,
        _cu(counts),
        torch.tensor(starts, dtype=torch.int32, device=DEVICE),
        backend=backend,
    )
    expected = torch.cat([r[s : s + c] for r, s, c in zip(p.rows, starts, counts)])
    assert _same(got, expected)
    # A request with nothing to gather this chunk contributes no row.
    got = gather_cache(p.kv_cache, p.block_table, _cu([0, 9, 0, 3]), backend=backend)
    assert _same(got, torch.cat([p.rows[1], p.rows[3]]))


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_deepseek_row_width(backend):
    """576 = 512 + 64 is not a power of two: the row is written and read in full."""
    if backend == "triton":
        pytest.importorskip("triton")
    g = torch.Generator().manual_seed(3)
    L, R, lens = 512, 64, [3, 17]
    empty = paged_cache(lens, 16, L + R, torch.bfloat16, g, fill=False)
    cache = empty.kv_cache.clone()
    for i, n in enumerate(lens):
        r = empty.rows[i]
        reshape_and_cache_mla(
            r[:, :L].contiguous(),
            r[:, L:].contiguous(),
            cache,
            empty.slot_mapping(i, torch.arange(n)),
            backend=backend,
        )
    got = gather_cache(cache, empty.block_table, _cu(lens), backend=backend)
    assert _same(got, torch.cat(empty.rows))


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_bad_inputs_name_the_argument(backend):
    if backend == "triton":
        pytest.importorskip("triton")
    cache = torch.zeros(4, 4, 80)
    kv_c, k_pe = torch.zeros(3, 64), torch.zeros(3, 16)
    with pytest.raises(ValueError, match=r"slot_mapping: expected dtype torch\.int64"):
        reshape_and_cache_mla(kv_c, k_pe, cache, torch.zeros(3, dtype=torch.int32), backend=backend)
    with pytest.raises(ValueError, match=r"kv_cache: .*row width L \+ R"):
        reshape_and_cache_mla(
            kv_c, torch.zeros(3, 8), cache, torch.zeros(3, dtype=torch.int64), backend=backend
        )
    with pytest.raises(ValueError, match=r"k_pe: expected dtype torch\.float32"):
        reshape_and_cache_mla(
            kv_c, k_pe.half(), cache, torch.zeros(3, dtype=torch.int64), backend=backend
        )
    table = torch.zeros(2, 3, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"block_table: expected dtype torch\.int32"):
        gather_cache(cache, table.long(), torch.zeros(3, dtype=torch.int32), backend=backend)
    with pytest.raises(ValueError, match=r"cu_seq_lens: .*num_reqs \+ 1"):
        gather_cache(cache, table, torch.zeros(2, dtype=torch.int32), backend=backend)
    with pytest.raises(ValueError, match=r"seq_starts: .*one start per request"):
        gather_cache(
            cache,
            table,
            torch.zeros(3, dtype=torch.int32),
            torch.zeros(3, dtype=torch.int32),
            backend=backend,
        )
