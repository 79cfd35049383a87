"""Absorbed MLA decode over the paged latent cache: ``mla_decode`` (split-KV, two stages).

Mirrors vLLM's ``vllm/v1/attention/ops/triton_decode_attention.py``
(``_fwd_grouped_kernel_stage1`` and ``_fwd_kernel_stage2``, driven by ``decode_attention_fwd``
from the Triton MLA backend's ``_forward_decode``), and the idea of FlashMLA: tokens on the
matrix product's M side, page-aligned tiles, a multi-buffered copy of the cache.

The math
--------
With ``W_UK`` folded into the query (the "absorbed" form, DeepSeek's ``attn_impl="absorb"``),
every head attends over the same latent rows: this is multi-query attention (MQA). For one
request with query ``q[H, L + R] = [q_nope @ W_UK | q_pe]`` and cached rows
``c_j = [kv_c_j (L) | k_pe_j (R)]``, ``j < seq_len``::

    s[h, j] = scale * q[h] . c_j            (QK width L + R: 576 for DeepSeek, 80 tiny)
    out[h]  = sum_j softmax(s[h])_j kv_c_j  (V = the first L columns of the same rows)
    lse[h]  = log sum_j exp(s[h, j])

``scale`` is the un-absorbed one, ``qk_head_dim ** -0.5`` (192, not 576): absorption
changes how the scores are computed, not their values. ``out`` is still latent; the caller
maps it through ``W_UV``. The kernel works in base 2: ``exp(x) = exp2(x * log2(e))``, so
``log2(e)`` is folded into the scale once and each exponential is one ``ex2`` instruction.

Why two stages, and how many splits
-----------------------------------
A decode step has one query token per request, so a grid over (head group, request) alone
has too few programs to fill a GPU when the batch is small. Stage 1 also splits each
request's KV range into up to ``num_kv_splits`` parts of whole tiles (``per_split =
cdiv(cdiv(seq_len, S), BLOCK_N) * BLOCK_N`` tokens), writing a partial ``(out, lse)`` per
split to an fp32 workspace; stage 2 merges them by their LSE (``merge_attn_states``'
algebra). Splitting costs a workspace round trip, ``8 L`` bytes per head and split, so
:func:`num_kv_splits_auto` splits only as far as needed to fill the device once
(``cdiv(num_sms, batch * head_groups)``), never below ``MIN_TILES_PER_SPLIT`` tiles per
split, and never so far that the workspace exceeds 1/8 of the cache bytes read. A request
whose tokens fit one split (short, or ``S = 1``) is not split: stage 1 writes its final
``out`` and ``lse`` directly, and stage 2 skips it; with ``S = 1`` for the whole batch
stage 2 and its workspace are not even launched. ``seq_len = 0`` gives ``out = 0``,
``lse = -inf``.

The tiling ("swap-AB")
----------------------
Stage 1, grid ``(cdiv(H, BLOCK_H), num_reqs, S)``: one program owns ``BLOCK_H`` heads of
one request and one split. Head groups come first in the launch order, so programs reading
the same rows run side by side and share them through L2. The cache tile goes on the M
side of both products, the heads on the N side::

      s^T [BLOCK_N, BLOCK_H]  = kv_c [BLOCK_N, L] @ q_lat^T [L, BLOCK_H]  + k_pe @ q_pe^T
    acc^T [L,       BLOCK_H] += kv_c^T [L, BLOCK_N] @ p^T [BLOCK_N, BLOCK_H]

             q_lat^T (L x 16, loaded once)
    kv_c  -> +----------------------+
    64 rows  | s^T: 64 tokens x 16  |   softmax down each column (one head)
    of L     +----------------------+

Hopper's warp-group MMA (``wgmma``) needs 64 rows on M: 64 tokens fill it, where 16 heads
(the old layout, ``q @ kv_c^T``) forced Ampere's ``mma.sync``. ``BLOCK_N`` tokens are a
whole number of pages or a part of one (the page size is a compile-time constant,
``PAGE_SIZE``, so ``pos // PAGE_SIZE`` is a shift); each token's page comes from the block
table, cast to int64 before the stride multiply. The loop is ``tl.range(...,
num_stages=NUM_STAGES)``: the copy of the next tiles (``cp.async``) is issued while the
current one is multiplied. The latent tile that served as K is reused as V: one read of a
row feeds both products. The row width 576 is handled as its two natural parts, latent
``L`` (512) and rope ``R`` (64), each a power-of-two tile (padded and masked otherwise).

Stage 2, grid ``(num_reqs, H)``: one program folds its request's splits together with the
online-softmax update, in fp32.
"""

from __future__ import annotations

import math

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
    device_target,
    fail,
    guard_interpreter_dtype,
    out_buffer,
    tl,
    triton,
    upcast,
)
from pdlab.kernels.merge import merge_splits_torch

DEFAULT_NUM_KV_SPLITS = None  # automatic: num_kv_splits_auto
BLOCK_H = 16
BLOCK_N = 64  # tokens per tile: wgmma's M
MIN_TILES_PER_SPLIT = 4
MAX_NUM_KV_SPLITS = 64
CPU_NUM_SMS = 132  # without a GPU, plan splits for an H100 SXM, as the AOT build targets
TWIN_ROWS = 4096  # cached rows the torch twin gathers at once (9 MiB of fp32 at 576 wide)


# %% Stage 1 (Triton): one split of one request, for a group of heads
@triton.jit
def mla_decode_stage1_kernel(
    q_ptr,
    cache_ptr,
    block_table_ptr,
    seq_lens_ptr,
    out_ptr,
    lse_ptr,
    mid_out_ptr,
    mid_lse_ptr,
    stride_q_b,
    stride_q_h,
    stride_cache_block,
    stride_cache_slot,
    stride_block_table,
    stride_o_b,
    stride_o_h,
    stride_mid_b,
    stride_mid_h,
    stride_mid_s,
    num_heads,
    num_kv_splits,
    scale,
    L: tl.constexpr,
    R: tl.constexpr,
    UPCAST: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_L: tl.constexpr,
    BLOCK_R: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    heads = tl.program_id(0) * BLOCK_H + tl.arange(0, BLOCK_H)
    req = tl.program_id(1).to(tl.int64)
    split = tl.program_id(2)

    # This split's tokens [start, end): whole tiles; a request that fits one split is final.
    seq_len = tl.load(seq_lens_ptr + req)
    per_split = tl.maximum(tl.cdiv(tl.cdiv(seq_len, num_kv_splits), BLOCK_N), 1) * BLOCK_N
    used_splits = tl.cdiv(seq_len, per_split)
    if split >= tl.maximum(used_splits, 1):
        return
    start = split * per_split
    end = tl.minimum(start + per_split, seq_len)

    mask_h = heads < num_heads
    cols_l = tl.arange(0, BLOCK_L)
    cols_r = tl.arange(0, BLOCK_R)
    mask_l = cols_l < L
    mask_r = cols_r < R
    # The query, transposed: [L, BLOCK_H] and [R, BLOCK_H], the N side of both products.
    q_cols = q_ptr + req * stride_q_b + heads[None, :] * stride_q_h
    q_lat = tl.load(q_cols + cols_l[:, None], mask=mask_l[:, None] & mask_h[None, :], other=0.0)
    q_pe = tl.load(q_cols + L + cols_r[:, None], mask=mask_r[:, None] & mask_h[None, :], other=0.0)
    if UPCAST:  # bf16 on the interpreter: fp32 math
        q_lat = q_lat.to(tl.float32)
        q_pe = q_pe.to(tl.float32)
    qk_scale = scale * 1.4426950408889634  # log2(e): exp2 below

    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)  # running max, base 2
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)  # running sum of exp2
    acc = tl.zeros([BLOCK_L, BLOCK_H], dtype=tl.float32)  # out^T, unnormalised

    tile_rows = tl.arange(0, BLOCK_N)
    tile_offs = tile_rows[:, None] * stride_cache_slot  # a page-aligned tile: rows in one page
    for start_n in tl.range(start, end, BLOCK_N, num_stages=NUM_STAGES):
        pos = start_n + tile_rows  # token positions in the sequence
        mask_n = pos < end
        if PAGE_SIZE % BLOCK_N == 0:  # the tile lies in one page: one block-table entry
            page = tl.load(block_table_ptr + req * stride_block_table + start_n // PAGE_SIZE)
            base = cache_ptr + page.to(tl.int64) * stride_cache_block
            rows = base + (start_n % PAGE_SIZE) * stride_cache_slot + tile_offs
        else:  # the tile spans pages (or parts of them): one entry per token
            page = tl.load(
                block_table_ptr + req * stride_block_table + pos // PAGE_SIZE, mask=mask_n, other=0
            ).to(tl.int64)
            rows = (
                cache_ptr
                + (page * stride_cache_block + (pos % PAGE_SIZE) * stride_cache_slot)[:, None]
            )
        kv_c = tl.load(
            rows + cols_l[None, :], mask=mask_n[:, None] & mask_l[None, :], other=0.0
        )  # [BLOCK_N, BLOCK_L]: K's latent part, and V
        k_pe = tl.load(
            rows + L + cols_r[None, :], mask=mask_n[:, None] & mask_r[None, :], other=0.0
        )
        if UPCAST:
            kv_c = kv_c.to(tl.float32)
            k_pe = k_pe.to(tl.float32)

        s = tl.dot(kv_c, q_lat) + tl.dot(k_pe, q_pe)  # s^T [BLOCK_N, BLOCK_H]
        s = tl.where(mask_n[:, None], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        # A head that has seen no token yet keeps m = -inf; subtract 0 instead (no inf - inf).
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[None, :])
        l_i = l_i * alpha + tl.sum(p, axis=0)
        acc = acc * alpha[None, :] + tl.dot(tl.trans(kv_c), p.to(kv_c.dtype))
        m_i = m_new

    # The split's result, normalised, and its natural-log LSE; nothing seen gives 0, -inf.
    seen = l_i > 0
    l_safe = tl.where(seen, l_i, 1.0)
    out = acc / l_safe[None, :]
    lse = tl.where(seen, (m_i + tl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
    mask_out = mask_l[:, None] & mask_h[None, :]
    if used_splits <= 1:  # not split: this is the final result, stage 2 skips the request
        o = out_ptr + req * stride_o_b + heads[None, :] * stride_o_h + cols_l[:, None]
        tl.store(o, out.to(out_ptr.dtype.element_ty), mask=mask_out)
        tl.store(lse_ptr + req * num_heads + heads, lse, mask=mask_h)
    else:
        mid = req * stride_mid_b + heads * stride_mid_h + split * stride_mid_s
        tl.store(mid_out_ptr + mid[None, :] + cols_l[:, None], out, mask=mask_out)
        tl.store(mid_lse_ptr + (req * num_heads + heads) * num_kv_splits + split, lse, mask=mask_h)


# %% Stage 2 (Triton): merge the splits of one (request, head)
@triton.jit
def mla_decode_stage2_kernel(
    mid_out_ptr,
    mid_lse_ptr,
    seq_lens_ptr,
    out_ptr,
    lse_ptr,
    stride_mid_b,
    stride_mid_h,
    stride_mid_s,
    stride_o_b,
    stride_o_h,
    num_heads,
    num_kv_splits,
    L,
    BLOCK_N: tl.constexpr,
    BLOCK_L: tl.constexpr,
):
    req = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    seq_len = tl.load(seq_lens_ptr + req)
    per_split = tl.maximum(tl.cdiv(tl.cdiv(seq_len, num_kv_splits), BLOCK_N), 1) * BLOCK_N
    used_splits = tl.cdiv(seq_len, per_split)
    if used_splits <= 1:  # stage 1 wrote this request's result already
        return
    cols = tl.arange(0, BLOCK_L)
    mask_l = cols < L
    base = req * stride_mid_b + head * stride_mid_h  # mid_out[req, head, :, :]
    lse_base = (req * num_heads + head) * num_kv_splits  # mid_lse[req, head, :], contiguous

    m = float("-inf")
    total = 0.0
    acc = tl.zeros([BLOCK_L], dtype=tl.float32)
    for split in range(0, used_splits):  # every used split saw at least one token
        lse_s = tl.load(mid_lse_ptr + lse_base + split)
        out_s = tl.load(mid_out_ptr + base + split * stride_mid_s + cols, mask=mask_l, other=0.0)
        m_new = tl.maximum(m, lse_s)
        alpha = tl.exp(m - m_new)
        w = tl.exp(lse_s - m_new)
        acc = acc * alpha + w * out_s  # out_s is a normalised partial
        total = total * alpha + w
        m = m_new
    tl.store(
        out_ptr + req * stride_o_b + head * stride_o_h + cols,
        (acc / total).to(out_ptr.dtype.element_ty),
        mask=mask_l,
    )
    tl.store(lse_ptr + req * num_heads + head, m + tl.log(total))


def mla_decode_config(L: int, R: int, elem_bytes: int = 2, target: int = 90) -> dict:
    """Tiles chosen in plain Python (no autotuning) for compute capability ``target`` (90 =
    sm_90). Two stages of a 64 x 576 bf16 tile are 144 KiB of shared memory; in fp32 the
    tile is halved to 32 rows so that two stages still fit an A100. One warp group (4 warps)
    issues Hopper's wgmma; Ampere's mma.sync holds its operands in registers, so 8 warps
    share them there (4 would spill, measured with ``pdlab doctor --aot``)."""
    block_n = BLOCK_N if elem_bytes <= 2 else BLOCK_N // 2
    return {
        "stage1": {
            "BLOCK_H": BLOCK_H,
            "BLOCK_N": block_n,
            "BLOCK_L": block(L),
            "BLOCK_R": block(R),
            "NUM_STAGES": 2,
            "num_warps": 4 if target >= 90 else 8,
        },
        "stage2": {"BLOCK_N": block_n, "BLOCK_L": block(L, minimum=1), "num_warps": 4},
    }


def device_num_sms(device: torch.device) -> int:
    """Streaming multiprocessors of ``device``; :data:`CPU_NUM_SMS` without a GPU."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return CPU_NUM_SMS


def num_kv_splits_auto(
    batch: int, num_heads: int, max_seq_len: int, num_sms: int, L: int = 512, R: int = 64
) -> int:
    """How many parts to split each request's KV range into.

    ``S = min(cdiv(num_sms, batch * head_groups), cdiv(max_seq_len, BLOCK_N) //
    MIN_TILES_PER_SPLIT, workspace cap, MAX_NUM_KV_SPLITS)``, at least 1: enough programs
    for one wave over the device, but each split at least ``MIN_TILES_PER_SPLIT`` tiles long,
    and the workspace round trip (``8 L`` bytes per head and split) at most 1/8 of the
    cache bytes the request reads (``2 (L + R)`` per token). A big batch gets ``S = 1``.
    """
    groups = -(-num_heads // BLOCK_H)
    fill = -(-num_sms // max(1, batch * groups))
    by_length = -(-max_seq_len // BLOCK_N) // MIN_TILES_PER_SPLIT
    by_workspace = (max_seq_len * 2 * (L + R)) // (8 * 8 * L * max(1, num_heads))
    return max(1, min(fill, by_length, by_workspace, MAX_NUM_KV_SPLITS))


def used_splits(seq_len: int, num_kv_splits: int, tile: int) -> int:
    """Splits a request of ``seq_len`` tokens really uses (the kernels' rule): tile-aligned
    parts of ``cdiv(cdiv(seq_len, S), tile) * tile`` tokens; 1 or 0 means not split."""
    per_split = max(1, triton.cdiv(triton.cdiv(seq_len, num_kv_splits), tile)) * tile
    return triton.cdiv(seq_len, per_split)


def _resolve_splits(
    num_kv_splits: int | None, q: torch.Tensor, seq_lens: torch.Tensor, L: int
) -> int:
    if num_kv_splits is not None:
        return num_kv_splits
    B, H, D = q.shape
    max_seq_len = int(seq_lens.max()) if B else 0  # one device sync, as vLLM's metadata
    return num_kv_splits_auto(B, H, max_seq_len, device_num_sms(q.device), L, D - L)


def plan_num_kv_splits(
    q: torch.Tensor, seq_lens: torch.Tensor, num_kv_splits: int | None = None, L: int = 512
) -> int:
    """The split count ``mla_decode`` will use for this call (``None``: automatic)."""
    return _resolve_splits(num_kv_splits, q, seq_lens, L)


def mla_decode_triton(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    num_kv_splits: int | None = DEFAULT_NUM_KV_SPLITS,
    kv_lora_rank: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    checks.mla_decode(q, kv_cache, block_table, seq_lens)
    L = _check_decode(q, kv_cache, block_table, seq_lens, num_kv_splits, kv_lora_rank)
    B, H, D = q.shape
    R = D - L
    if kv_cache.stride(2) != 1:
        fail("kv_cache", f"strides {kv_cache.stride()}", "contiguous rows (stride 1 last)")
    q = q if q.stride(-1) == 1 else q.contiguous()
    block_table = block_table.contiguous()
    up = upcast(q.dtype)
    guard_interpreter_dtype(q.dtype, up)
    out = out_buffer((B, H, L), q.dtype, q.device, up)
    lse = torch.empty((B, H), dtype=torch.float32, device=q.device)
    if B == 0 or H == 0:
        return out.to(q.dtype), lse
    S = _resolve_splits(num_kv_splits, q, seq_lens, L)
    if S > 1:
        mid_out = torch.empty((B, H, S, L), dtype=torch.float32, device=q.device)
        mid_lse = torch.empty((B, H, S), dtype=torch.float32, device=q.device)
    else:  # nothing is split: stage 1 writes every result, there is no workspace
        mid_out, mid_lse = out, lse
    mid_strides = (H * S * L, S * L, L)
    cfg = mla_decode_config(L, R, q.element_size(), device_target(q.device))
    c1 = cfg["stage1"]
    check_launchable(mla_decode_stage1_kernel)
    mla_decode_stage1_kernel[(triton.cdiv(H, c1["BLOCK_H"]), B, S)](
        q,
        kv_cache,
        block_table,
        seq_lens,
        out,
        lse,
        mid_out,
        mid_lse,
        q.stride(0),
        q.stride(1),
        kv_cache.stride(0),
        kv_cache.stride(1),
        block_table.stride(0),
        out.stride(0),
        out.stride(1),
        *mid_strides,
        H,
        S,
        float(scale),
        L=L,
        R=R,
        UPCAST=up,
        PAGE_SIZE=kv_cache.shape[1],
        **c1,
    )
    if S > 1:
        mla_decode_stage2_kernel[(B, H)](
            mid_out,
            mid_lse,
            seq_lens,
            out,
            lse,
            *mid_strides,
            out.stride(0),
            out.stride(1),
            H,
            S,
            L,
            **cfg["stage2"],
        )
    return out.to(q.dtype), lse


# %% torch twin
def mla_decode_torch(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    num_kv_splits: int | None = DEFAULT_NUM_KV_SPLITS,
    kv_lora_rank: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same two stages as tensor operations. Stage 1: the same splits of whole tiles,
    each gathered through the block table as ``rows[per_split, L + R]`` and attended to in
    one batched product, a bounded number of splits (``TWIN_ROWS`` rows) at a time; stage 2:
    the splits folded together by their LSE (:func:`merge_splits_torch`)."""
    checks.mla_decode(q, kv_cache, block_table, seq_lens)
    L = _check_decode(q, kv_cache, block_table, seq_lens, num_kv_splits, kv_lora_rank)
    B, H, D = q.shape
    if B == 0 or H == 0 or int(seq_lens.max()) == 0:
        return q.new_zeros((B, H, L)), torch.full((B, H), float("-inf"), device=q.device)
    S = _resolve_splits(num_kv_splits, q, seq_lens, L)
    tile = mla_decode_config(L, D - L, q.element_size())["stage1"]["BLOCK_N"]
    seq = seq_lens.long()
    per_split = ((seq + S - 1) // S + tile - 1).div(tile, rounding_mode="floor").clamp(min=1) * tile
    n = torch.arange(int(per_split.max()), device=q.device)
    pos = torch.arange(S, device=q.device)[None, :, None] * per_split[:, None, None] + n
    valid = ((n < per_split[:, None, None]) & (pos < seq[:, None, None])).view(B * S, -1)
    # Copy whole runs of rows: splits start on tile boundaries, so positions come in runs of
    # gcd(block_size, tile) rows that sit together in one page.
    block_size = kv_cache.shape[1]
    run = math.gcd(block_size, tile)
    first = torch.where(valid.view(B, S, -1), pos, 0)[..., ::run]  # each run's first row
    page = torch.gather(block_table.long(), 1, (first // block_size).view(B, -1))
    ids = (page * (block_size // run) + (first % block_size).view(B, -1) // run).view(B * S, -1)
    runs = kv_cache.reshape(-1, run, D)  # a page is block_size / run consecutive runs
    q_jobs = (q.float() * scale).repeat_interleave(S, dim=0)  # one (request, split) a job
    out_s = torch.zeros((B * S, H, L), dtype=torch.float32, device=q.device)
    lse_s = torch.full((B * S, H), float("-inf"), dtype=torch.float32, device=q.device)
    live = valid.any(dim=1).nonzero()[:, 0]  # an empty split stays 0, -inf
    step = max(1, TWIN_ROWS // valid.shape[1])  # bounded buffers are reused, not faulted in
    for chunk in live.split(step):
        rows = runs.index_select(0, ids[chunk].view(-1)).view(len(chunk), -1, run, D).float()
        ok = valid[chunk]
        part = ~ok.view(len(chunk), -1, run).all(dim=-1)  # runs with a row past the end:
        rows[part] = rows[part].masked_fill(~ok.view(len(chunk), -1, run)[part][..., None], 0)
        rows = rows.view(len(chunk), -1, D)  # zeroed, as 0 * NaN (an unused slot) is NaN
        scores = torch.bmm(q_jobs[chunk], rows.transpose(1, 2))  # [jobs, H, per_split]
        scores.masked_fill_(~ok[:, None], float("-inf"))
        lse_s[chunk] = torch.logsumexp(scores, dim=-1)
        probs = scores.sub_(lse_s[chunk][..., None]).exp_()
        out_s[chunk] = torch.bmm(probs, rows[..., :L])
    out, lse = merge_splits_torch(
        out_s.view(B, S, H, L).transpose(1, 2), lse_s.view(B, S, H).transpose(1, 2)
    )
    return out.to(q.dtype), lse


def mla_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    num_kv_splits: int | None = DEFAULT_NUM_KV_SPLITS,
    *,
    kv_lora_rank: int | None = None,
    backend: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Absorbed MLA attention of one query token per request over the paged latent cache.

    ``q[B, H, L + R]`` (``[q_nope @ W_UK | q_pe]``), ``kv_cache[num_blocks, block_size, L + R]``
    of q's dtype, ``block_table`` int32 ``[B, max_blocks]``, ``seq_lens`` int32 ``[B]`` (tokens
    in the cache, this step's included), ``scale = qk_head_dim ** -0.5 * mscale ** 2``.
    ``kv_lora_rank`` is ``L``; by default the largest power of two below ``L + R`` (512 of
    576, 64 of the tiny model's 80, as in every preset); pass it when that does not hold.
    ``num_kv_splits=None`` chooses the split count with :func:`num_kv_splits_auto`; an int
    fixes it (a request still splits only as far as it has tiles).
    Returns the latent ``out[B, H, L]`` in q's dtype and fp32 ``lse[B, H]``.
    """
    if _backend.resolve(backend) == "triton":
        return mla_decode_triton(
            q, kv_cache, block_table, seq_lens, scale, num_kv_splits, kv_lora_rank
        )
    return mla_decode_torch(q, kv_cache, block_table, seq_lens, scale, num_kv_splits, kv_lora_rank)


def _check_decode(q, kv_cache, block_table, seq_lens, num_kv_splits, kv_lora_rank) -> int:
    check_tensor("q", q, 3, FLOAT_DTYPES)
    check_tensor("kv_cache", kv_cache, 3)
    check_tensor("block_table", block_table, 2, (torch.int32,))
    check_tensor("seq_lens", seq_lens, 1, (torch.int32,))
    B, _, D = q.shape
    check_dim("kv_cache", kv_cache, 2, D, "row width L + R = q's width")
    if kv_cache.dtype != q.dtype:
        fail("kv_cache", str(kv_cache.dtype), f"dtype {q.dtype} (q's)")
    check_dim("block_table", block_table, 0, B, "one row per request of q")
    check_dim("seq_lens", seq_lens, 0, B, "one length per request of q")
    if num_kv_splits is not None and (
        isinstance(num_kv_splits, bool) or not isinstance(num_kv_splits, int) or num_kv_splits < 1
    ):
        fail("num_kv_splits", repr(num_kv_splits), "an int >= 1, or None (automatic)")
    if kv_lora_rank is None:
        kv_lora_rank = 1 << ((D - 1).bit_length() - 1) if D > 1 else 0
    if (
        isinstance(kv_lora_rank, bool)
        or not isinstance(kv_lora_rank, int)
        or not 0 < kv_lora_rank < D
    ):
        fail("kv_lora_rank", repr(kv_lora_rank), f"an int in [1, {D - 1}] (L of L + R = {D})")
    check_same_device(q=q, kv_cache=kv_cache, block_table=block_table, seq_lens=seq_lens)
    return kv_lora_rank
