"""Writing to and reading from the paged latent cache: ``reshape_and_cache_mla``, ``gather_cache``.

Mirrors vLLM's ``csrc/cache_kernels.cu``: ``reshape_and_cache_mla`` (write this step's
latent rows into their slots) and ``gather_and_maybe_dequant_cache`` / ``gather_cache``
(copy a request's cached rows, page by page, into one contiguous tensor for the prefill
path's up-projection). pdlab stores no fp8, so "dequant" is a plain copy.

The layout
----------
One layer's cache is ``kv_cache[num_blocks, block_size, L + R]``: page ``b``, slot ``o``
holds one token's row ``[kv_c_normed (L) | k_pe (R)]`` (576 = 512 + 64 for DeepSeek). A
token's *slot* is the flat index ``b * block_size + o``; the scheduler hands out
``slot_mapping[T]`` for the tokens of a step (a negative slot means "do not write": vLLM
pads the batch with -1). A request's *block table* row lists its pages in order, so
position ``p`` of that request lives at page ``block_table[req, p // block_size]``,
slot ``p % block_size``.

The tiling
----------
* ``reshape_and_cache_mla``: one program per token. It loads the slot, and copies the
  ``L`` latent values and the ``R`` rope values into the row, each as one masked vector
  (512 and 64; odd widths are padded and masked, ``common.py``).
* ``gather_cache``: a 2-D grid, (request, tile of ``BLOCK_T`` output tokens). Each program
  looks up the page of each of its tokens in the block table (page ids are cast to int64
  before multiplying by a stride: a cache of a few million slots overflows int32 offsets)
  and copies a ``[BLOCK_T, L + R]`` tile.

Neither kernel does arithmetic on the values, so bf16 moves through the interpreter intact;
there is no ``UPCAST`` flag here (see ``common.py``).
"""

from __future__ import annotations

import torch

from pdlab.kernels import backend as _backend
from pdlab.kernels import checks
from pdlab.kernels.common import (
    FLOAT_DTYPES,
    block,
    check_dim,
    check_launchable,
    check_same_device,
    check_tensor,
    fail,
    tl,
    triton,
)

NUM_WARPS = 4


# %% reshape_and_cache_mla: Triton
@triton.jit
def reshape_and_cache_mla_kernel(
    kv_c_ptr, k_pe_ptr, cache_ptr, slot_mapping_ptr,
    stride_kv_c, stride_k_pe, stride_cache_block, stride_cache_slot,
    block_size, L, R,
    BLOCK_L: tl.constexpr, BLOCK_R: tl.constexpr,
):  # fmt: skip
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_mapping_ptr + token)  # int64
    # A padded token (slot < 0) writes no column: fold the test into the column bounds.
    num_l = tl.where(slot >= 0, L, 0)
    num_r = tl.where(slot >= 0, R, 0)
    page = slot // block_size
    row_ptr = cache_ptr + page * stride_cache_block + (slot % block_size) * stride_cache_slot

    cols_l = tl.arange(0, BLOCK_L)
    mask_l = cols_l < num_l
    kv_c = tl.load(kv_c_ptr + token * stride_kv_c + cols_l, mask=mask_l)
    tl.store(row_ptr + cols_l, kv_c, mask=mask_l)

    cols_r = tl.arange(0, BLOCK_R)
    mask_r = cols_r < num_r
    k_pe = tl.load(k_pe_ptr + token * stride_k_pe + cols_r, mask=mask_r)
    tl.store(row_ptr + L + cols_r, k_pe, mask=mask_r)  # the rope part follows the latent


def reshape_and_cache_mla_config(L: int, R: int) -> dict:
    """Tile widths and launch options, chosen in plain Python (no autotuning)."""
    return {"BLOCK_L": block(L), "BLOCK_R": block(R), "num_warps": NUM_WARPS}


def reshape_and_cache_mla_triton(
    kv_c: torch.Tensor, k_pe: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor
) -> None:
    L, R = _check_reshape_and_cache(kv_c, k_pe, kv_cache, slot_mapping)
    kv_c, k_pe = kv_c.contiguous(), k_pe.contiguous()
    if kv_cache.stride(2) != 1:
        fail("kv_cache", f"strides {kv_cache.stride()}", "contiguous rows (stride 1 last)")
    num_tokens = kv_c.shape[0]
    if num_tokens == 0:
        return
    cfg = reshape_and_cache_mla_config(L, R)
    check_launchable(reshape_and_cache_mla_kernel)
    reshape_and_cache_mla_kernel[(num_tokens,)](
        kv_c, k_pe, kv_cache, slot_mapping,
        kv_c.stride(0), k_pe.stride(0), kv_cache.stride(0), kv_cache.stride(1),
        kv_cache.shape[1], L, R, **cfg,
    )  # fmt: skip


# %% reshape_and_cache_mla: torch twin
def reshape_and_cache_mla_torch(
    kv_c: torch.Tensor, k_pe: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor
) -> None:
    _check_reshape_and_cache(kv_c, k_pe, kv_cache, slot_mapping)
    valid = slot_mapping >= 0
    slots = slot_mapping[valid]
    block_size = kv_cache.shape[1]
    rows = torch.cat([kv_c[valid], k_pe[valid]], dim=-1)
    kv_cache[slots // block_size, slots % block_size] = rows


def reshape_and_cache_mla(
    kv_c: torch.Tensor, k_pe: torch.Tensor, kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor, *, backend: str | None = None,
) -> None:  # fmt: skip
    """Write ``[kv_c | k_pe]`` of each token into ``kv_cache`` at its slot, in place.

    ``kv_c[T, L]``, ``k_pe[T, R]`` (RoPE applied), ``kv_cache[num_blocks, block_size, L+R]``
    of the same dtype, ``slot_mapping`` int64 ``[T]`` (slot = block_id * block_size +
    offset; a negative slot is skipped).
    """
    if _backend.resolve(backend) == "triton":
        reshape_and_cache_mla_triton(kv_c, k_pe, kv_cache, slot_mapping)
    else:
        reshape_and_cache_mla_torch(kv_c, k_pe, kv_cache, slot_mapping)


def _check_reshape_and_cache(kv_c, k_pe, kv_cache, slot_mapping) -> tuple[int, int]:
    checks.reshape_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping)
    check_tensor("kv_c", kv_c, 2, FLOAT_DTYPES)
    check_tensor("k_pe", k_pe, 2)
    check_tensor("kv_cache", kv_cache, 3)
    check_tensor("slot_mapping", slot_mapping, 1, (torch.int64,))
    T, L = kv_c.shape
    R = k_pe.shape[1]
    check_dim("k_pe", k_pe, 0, T, "one row per token of kv_c")
    check_dim("slot_mapping", slot_mapping, 0, T, "one slot per token of kv_c")
    check_dim("kv_cache", kv_cache, 2, L + R, "row width L + R = kv_c width + k_pe width")
    for name, t in (("k_pe", k_pe), ("kv_cache", kv_cache)):
        if t.dtype != kv_c.dtype:
            fail(name, str(t.dtype), f"dtype {kv_c.dtype} (the dtype of kv_c)")
    check_same_device(kv_c=kv_c, k_pe=k_pe, kv_cache=kv_cache, slot_mapping=slot_mapping)
    return L, R


# %% gather_cache: Triton
@triton.jit
def gather_cache_kernel(
    cache_ptr, block_table_ptr, cu_seq_lens_ptr, seq_starts_ptr, out_ptr,
    stride_cache_block, stride_cache_slot, stride_block_table, stride_out,
    block_size, D,
    HAS_SEQ_STARTS: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    req = tl.program_id(0)
    tile = tl.program_id(1)
    out_begin = tl.load(cu_seq_lens_ptr + req)
    num_tokens = tl.load(cu_seq_lens_ptr + req + 1) - out_begin

    t = tile * BLOCK_T + tl.arange(0, BLOCK_T)  # token index within this request's chunk
    mask_t = t < num_tokens
    if HAS_SEQ_STARTS:
        pos = tl.load(seq_starts_ptr + req) + t  # a chunk of the context, not its start
    else:
        pos = t
    page = tl.load(
        block_table_ptr + req.to(tl.int64) * stride_block_table + pos // block_size,
        mask=mask_t,
        other=0,
    ).to(tl.int64)

    cols = tl.arange(0, BLOCK_D)
    mask = mask_t[:, None] & (cols < D)[None, :]
    src = (
        cache_ptr
        + page[:, None] * stride_cache_block
        + (pos % block_size).to(tl.int64)[:, None] * stride_cache_slot
        + cols[None, :]
    )
    rows = tl.load(src, mask=mask)
    dst = out_ptr + (out_begin + t).to(tl.int64)[:, None] * stride_out + cols[None, :]
    tl.store(dst, rows, mask=mask)


def gather_cache_config(D: int) -> dict:
    """A tile of about 8K values: 64 tokens of the tiny model's 80 (padded to 128), 8 of 576."""
    block_d = block(D)
    return {"BLOCK_T": max(1, 8192 // block_d), "BLOCK_D": block_d, "num_warps": NUM_WARPS}


def gather_cache_triton(
    kv_cache: torch.Tensor, block_table: torch.Tensor, cu_seq_lens: torch.Tensor,
    seq_starts: torch.Tensor | None = None,
) -> torch.Tensor:  # fmt: skip
    _check_gather(kv_cache, block_table, cu_seq_lens, seq_starts)
    if kv_cache.stride(2) != 1:
        fail("kv_cache", f"strides {kv_cache.stride()}", "contiguous rows (stride 1 last)")
    # Two host numbers size the grid and the output (vLLM's metadata builder has them on the
    # CPU already; here they cost one device sync).
    lens = cu_seq_lens[1:] - cu_seq_lens[:-1]
    total = int(cu_seq_lens[-1])
    max_len = int(lens.max()) if lens.numel() else 0
    D = kv_cache.shape[2]
    out = torch.empty((total, D), dtype=kv_cache.dtype, device=kv_cache.device)
    if total == 0 or max_len == 0:
        return out
    block_table = block_table.contiguous()
    cfg = gather_cache_config(D)
    grid = (block_table.shape[0], triton.cdiv(max_len, cfg["BLOCK_T"]))
    starts = seq_starts if seq_starts is not None else cu_seq_lens  # unused when absent
    check_launchable(gather_cache_kernel)
    gather_cache_kernel[grid](
        kv_cache, block_table, cu_seq_lens, starts, out,
        kv_cache.stride(0), kv_cache.stride(1), block_table.stride(0), out.stride(0),
        kv_cache.shape[1], D, HAS_SEQ_STARTS=seq_starts is not None, **cfg,
    )  # fmt: skip
    return out


# %% gather_cache: torch twin
def gather_cache_torch(
    kv_cache: torch.Tensor, block_table: torch.Tensor, cu_seq_lens: torch.Tensor,
    seq_starts: torch.Tensor | None = None,
) -> torch.Tensor:  # fmt: skip
    _check_gather(kv_cache, block_table, cu_seq_lens, seq_starts)
    cu = cu_seq_lens.long()
    lens = cu[1:] - cu[:-1]
    total = int(cu[-1])
    # For every output row: its request, then its position in that request's sequence.
    req = torch.repeat_interleave(
        torch.arange(lens.numel(), device=cu.device), lens, output_size=total
    )
    pos = torch.arange(total, device=cu.device) - cu[:-1][req]
    if seq_starts is not None:
        pos = pos + seq_starts.long()[req]
    block_size = kv_cache.shape[1]
    page = block_table[req, pos // block_size].long()
    return kv_cache[page, pos % block_size]


def gather_cache(
    kv_cache: torch.Tensor, block_table: torch.Tensor, cu_seq_lens: torch.Tensor,
    seq_starts: torch.Tensor | None = None,
    *, backend: str | None = None,
) -> torch.Tensor:  # fmt: skip
    """Copy each request's cached rows into one contiguous ``[total, L + R]`` tensor.

    Request ``i`` contributes ``n_i = cu_seq_lens[i+1] - cu_seq_lens[i]`` rows, the tokens at
    positions ``[seq_starts[i], seq_starts[i] + n_i)`` of its sequence (``[0, n_i)`` when
    ``seq_starts`` is None), written at rows ``[cu_seq_lens[i], cu_seq_lens[i+1])`` of the
    output, as vLLM's ``gather_cache`` does for one chunk of a long context.
    ``block_table`` int32 ``[B, max_blocks]``, ``cu_seq_lens`` int32 ``[B + 1]``,
    ``seq_starts`` int32 ``[B]`` or None.
    """
    if _backend.resolve(backend) == "triton":
        return gather_cache_triton(kv_cache, block_table, cu_seq_lens, seq_starts)
    return gather_cache_torch(kv_cache, block_table, cu_seq_lens, seq_starts)


def _check_gather(kv_cache, block_table, cu_seq_lens, seq_starts) -> None:
    checks.gather_cache(kv_cache, block_table, cu_seq_lens, seq_starts)
    check_tensor("kv_cache", kv_cache, 3, FLOAT_DTYPES)
    check_tensor("block_table", block_table, 2, (torch.int32,))
    check_tensor("cu_seq_lens", cu_seq_lens, 1, (torch.int32,))
    B = block_table.shape[0]
    check_dim("cu_seq_lens", cu_seq_lens, 0, B + 1, "num_reqs + 1, num_reqs = block_table rows")
    tensors = {"kv_cache": kv_cache, "block_table": block_table, "cu_seq_lens": cu_seq_lens}
    if seq_starts is not None:
        check_tensor("seq_starts", seq_starts, 1, (torch.int32,))
        check_dim("seq_starts", seq_starts, 0, B, "one start per request")
        tensors["seq_starts"] = seq_starts
    check_same_device(**tensors)
