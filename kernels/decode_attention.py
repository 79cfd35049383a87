"""Absorbed MLA decode over the paged latent cache: ``mla_decode`` (split-KV, two stages).

Mirrors ``decode_attention_fwd`` in vLLM's ``vllm/v1/attention/ops/triton_decode_attention.py``
(called from the Triton MLA backend's ``forward_mqa``), and the idea of FlashMLA: tokens
on the matrix product's M side, page-aligned tiles, a multi-buffered copy of the cache.

The math and the tiling picture are in ``decode_attention_kernels.py``, the plan in
``decode_plan.py``, the torch twin in ``decode_attention_twin.py``; this file holds the
launcher and the entry point, ``mla_decode``.

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
"""

from __future__ import annotations

import torch

from pdlab.kernels import backend as _backend
from pdlab.kernels import checks
from pdlab.kernels.common import (
    check_launchable,
    device_target,
    fail,
    guard_interpreter_dtype,
    out_buffer,
    triton,
    upcast,
)
from pdlab.kernels.decode_attention_kernels import (
    mla_decode_stage1_kernel,
    mla_decode_stage2_kernel,
)
from pdlab.kernels.decode_attention_twin import check_decode, mla_decode_torch, resolve_splits
from pdlab.kernels.decode_plan import (  # noqa: F401 - the plan's names callers read here
    BLOCK_H,
    BLOCK_N,
    CPU_NUM_SMS,
    DEFAULT_NUM_KV_SPLITS,
    MAX_NUM_KV_SPLITS,
    MIN_TILES_PER_SPLIT,
    mla_decode_config,
    num_kv_splits_auto,
)


def max_query_len(query_start_loc: torch.Tensor | None) -> int:
    """The longest request's query count (1 without ``query_start_loc``): one host copy."""
    if query_start_loc is None:
        return 1
    if query_start_loc.shape[0] < 2:
        return 0
    return int((query_start_loc[1:] - query_start_loc[:-1]).max())


def plan_num_kv_splits(
    q: torch.Tensor, seq_lens: torch.Tensor, num_kv_splits: int | None = None,
    L: int = 512, query_start_loc: torch.Tensor | None = None,
) -> int:  # fmt: skip
    """The split count ``mla_decode`` will use for this call (``None``: automatic)."""
    return resolve_splits(num_kv_splits, q, seq_lens, L, max_query_len(query_start_loc))


def mla_decode_triton(
    q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
    scale: float, num_kv_splits: int | None = DEFAULT_NUM_KV_SPLITS,
    kv_lora_rank: int | None = None, query_start_loc: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    checks.mla_decode(q, kv_cache, block_table, seq_lens, query_start_loc)
    args = (q, kv_cache, block_table, seq_lens, num_kv_splits, kv_lora_rank, query_start_loc)
    L = check_decode(*args)
    T, H, D = q.shape
    B, R, varlen = seq_lens.shape[0], D - L, query_start_loc is not None
    if kv_cache.stride(2) != 1:
        fail("kv_cache", f"strides {kv_cache.stride()}", "contiguous rows (stride 1 last)")
    q = q if q.stride(-1) == 1 else q.contiguous()
    block_table = block_table.contiguous()
    up = upcast(q.dtype)
    guard_interpreter_dtype(q.dtype, up)
    out = out_buffer((T, H, L), q.dtype, q.device, up)
    lse = torch.empty((T, H), dtype=torch.float32, device=q.device)
    Q = max_query_len(query_start_loc)
    if T == 0 or H == 0 or B == 0 or Q == 0:
        return out.to(q.dtype), lse
    if varlen and Q == 1 and T == B:  # then query_start_loc is 0, 1, ..., B: one query each
        varlen = False
    S = resolve_splits(num_kv_splits, q, seq_lens, L, Q)
    if S > 1:  # one partial result per query row, head and split
        mid_out = torch.empty((T, H, S, L), dtype=torch.float32, device=q.device)
        mid_lse = torch.empty((T, H, S), dtype=torch.float32, device=q.device)
    else:  # nothing is split: stage 1 writes every result, there is no workspace
        mid_out, mid_lse = out, lse
    mid_strides = (H * S * L, S * L, L)
    cfg = mla_decode_config(L, R, q.element_size(), device_target(q.device), Q, varlen)
    c1 = cfg["stage1"]
    groups = triton.cdiv(H, c1["BLOCK_H"])
    qsl = query_start_loc.contiguous() if varlen else seq_lens  # unread when not varlen
    check_launchable(mla_decode_stage1_kernel)
    mla_decode_stage1_kernel[(groups * triton.cdiv(Q, c1["BLOCK_Q"]), B, S)](
        q, kv_cache, block_table, seq_lens, qsl,
        out, lse, mid_out, mid_lse,
        q.stride(0), q.stride(1), kv_cache.stride(0), kv_cache.stride(1), block_table.stride(0),
        out.stride(0), out.stride(1), *mid_strides,
        H, groups, S, float(scale),
        L=L, R=R, UPCAST=up, PAGE_SIZE=kv_cache.shape[1], VARLEN=varlen, **c1,
    )  # fmt: skip
    if S > 1:
        mla_decode_stage2_kernel[(B, H)](
            mid_out, mid_lse, seq_lens, qsl, out, lse,
            *mid_strides, out.stride(0), out.stride(1),
            H, S, L, VARLEN=varlen, **cfg["stage2"],
        )  # fmt: skip
    return out.to(q.dtype), lse


def mla_decode(
    q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
    scale: float, num_kv_splits: int | None = DEFAULT_NUM_KV_SPLITS,
    query_start_loc: torch.Tensor | None = None,
    *, kv_lora_rank: int | None = None, backend: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Absorbed MLA attention of one query token per request over the paged latent cache.

    ``q[B, H, L + R]`` (``[q_nope @ W_UK | q_pe]``), ``kv_cache[num_blocks, block_size, L + R]``
    of q's dtype, ``block_table`` int32 ``[B, max_blocks]``, ``seq_lens`` int32 ``[B]`` (tokens
    in the cache, this step's included), ``scale = qk_head_dim ** -0.5 * mscale ** 2``.
    ``kv_lora_rank`` is ``L``; by default the largest power of two below ``L + R`` (512 of
    576, 64 of the tiny model's 80, as in every preset); pass it when that does not hold.
    ``num_kv_splits=None`` chooses the split count with :func:`num_kv_splits_auto`; an int
    fixes it (a request still splits only as far as it has tiles).
    Returns the latent ``out[B, H, L]`` in q's dtype and fp32 ``lse[B, H]``.

    ``query_start_loc`` (int32 ``[B + 1]``, optional): more than one query per request, as
    a row verifying ``K`` drafts has ``1 + K``. ``q`` is then ``[T, H, L + R]`` with request
    ``b``'s queries at rows ``query_start_loc[b] : query_start_loc[b + 1]`` (``q_len_b`` of
    them, at most ``seq_lens[b]``, lengths may differ), and its query ``j`` sees keys
    ``< seq_lens[b] - q_len_b + j + 1``: bottom-right causal, as FlashAttention and
    FlashMLA's decode with ``s_q > 1`` align it. ``out`` is ``[T, H, L]``, ``lse`` ``[T, H]``.
    ``None`` is one query per request (``T == B``).
    """
    args = (q, kv_cache, block_table, seq_lens, scale, num_kv_splits, kv_lora_rank)
    if _backend.resolve(backend) == "triton":
        return mla_decode_triton(*args, query_start_loc)
    return mla_decode_torch(*args, query_start_loc)
