"""Index-range checks that run in Python before any kernel launches.

The shape checks in each kernel file say whether the tensors fit together; these say
whether the *values* of the index tensors stay inside the memory they address. A Triton
kernel trusts its indices (an out-of-range slot writes into a neighbouring tensor, a wild
block id reads wild memory, a decreasing ``cu_seqlens`` walks a negative range), and the
torch twins would index the same values differently (``-1`` wraps), so the two backends
would silently disagree. Each public kernel function calls one function here first, and
every backend gets the same ``ValueError`` naming the argument, the value and what is
allowed.

vLLM leaves these checks out of its hot path (its inputs come from its own scheduler);
pdlab keeps them on by default because a learner calls the kernels directly. Turn them off
for benchmarking with ``PDLAB_CHECK_INDICES=0`` or :func:`set_index_checks`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

from pdlab.errors import PdlabValueError, Phrase, either, invalid, noted

ENV_VAR = "PDLAB_CHECK_INDICES"
_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_enabled: bool | None = None  # None: follow the environment variable


def _from_env() -> bool:
    value = os.environ.get(ENV_VAR, "1").strip().lower() or "1"
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise invalid(ENV_VAR, value, either(noted(1, "err_n_check"), noted(0, "err_n_skip")))


def index_checks_enabled() -> bool:
    """Whether the kernels check index ranges: :func:`set_index_checks`, else the env var."""
    return _from_env() if _enabled is None else _enabled


def set_index_checks(enabled: bool | None) -> None:
    """Turn the index checks on (True) or off (False) for this process; None follows
    ``PDLAB_CHECK_INDICES`` again."""
    global _enabled
    if enabled is not None and not isinstance(enabled, bool):
        raise invalid("enabled", enabled, Phrase("err_x_bool_none"))
    _enabled = enabled


@contextlib.contextmanager
def index_checks(enabled: bool) -> Iterator[None]:
    """``with index_checks(False): ...`` runs a block without the checks."""
    global _enabled
    before = _enabled
    set_index_checks(enabled)
    try:
        yield
    finally:
        _enabled = before


def _tensor(t: object, ndim: int) -> bool:
    """Only well-formed tensors are range-checked; the kernel's own shape and dtype checks
    report the rest with their sentence."""
    return isinstance(t, torch.Tensor) and t.dim() == ndim


def _index(t: object, ndim: int) -> bool:
    return _tensor(t, ndim) and not t.is_floating_point() and not t.is_complex()


def _bad(name: str, index: object, value: int, allowed: Phrase) -> None:
    raise PdlabValueError("err_out_of_range", name=f"{name}[{index}]", value=value, allowed=allowed)


def _first(mask: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in mask.nonzero()[0])


def _cu_seqlens(name: str, cu: torch.Tensor, total: int | None = None, what: str = "") -> list[int]:
    """``cu`` starts at 0, never decreases and (unless ``total`` is None) ends at ``total``
    rows of ``what``."""
    vals = cu.tolist()
    if not vals:
        raise PdlabValueError("err_empty_offsets", name=name)
    if vals[0] != 0:
        _bad(name, 0, vals[0], noted(0, "err_n_first_row"))
    for i in range(1, len(vals)):
        if vals[i] < vals[i - 1]:
            at_least = Phrase("err_x_ge", bound=f"{name}[{i - 1}]={vals[i - 1]}")
            _bad(name, i, vals[i], noted(at_least, "err_n_monotone"))
    if total is not None and vals[-1] != total:
        _bad(name, len(vals) - 1, vals[-1], Phrase("err_x_rows_of", total=total, what=what))
    return vals


def reshape_and_cache_mla(
    kv_c: object, k_pe: object, kv_cache: object, slot_mapping: object
) -> None:
    """``slot_mapping`` names slots of ``kv_cache`` (negative: skip the token)."""
    if not index_checks_enabled() or not (_index(slot_mapping, 1) and _tensor(kv_cache, 3)):
        return
    num_slots = kv_cache.shape[0] * kv_cache.shape[1]
    bad = slot_mapping >= num_slots
    if bool(bad.any()):
        (i,) = _first(bad)
        allowed = Phrase("err_x_slot", span=f"[0, {num_slots})")
        _bad("slot_mapping", i, int(slot_mapping[i]), allowed)


def gather_cache(
    kv_cache: object, block_table: object, cu_seq_lens: object, seq_starts: object = None
) -> None:
    """``cu_seq_lens`` monotone from 0; each request's range of positions inside its
    block table's capacity; the blocks it reads inside the cache."""
    if not (index_checks_enabled() and _index(block_table, 2) and _tensor(kv_cache, 3)):
        return
    if not _index(cu_seq_lens, 1) or cu_seq_lens.shape[0] != block_table.shape[0] + 1:
        return
    cu = torch.tensor(_cu_seqlens("cu_seq_lens", cu_seq_lens), dtype=torch.long)
    lens = cu[1:] - cu[:-1]
    starts = torch.zeros_like(lens)
    if seq_starts is not None:
        if not _index(seq_starts, 1) or seq_starts.shape[0] != lens.shape[0]:
            return
        starts = seq_starts.cpu().long()
        if bool((starts < 0).any()):
            (i,) = _first(starts < 0)
            _bad("seq_starts", i, int(starts[i]), Phrase("err_x_position_ge", n=0))
    block_size = kv_cache.shape[1]
    capacity = block_table.shape[1] * block_size
    ends = starts + lens
    if bool((ends > capacity).any()):
        (i,) = _first(ends > capacity)
        n, pos, blocks = capacity - int(starts[i]), int(ends[i]) - 1, block_table.shape[1]
        table_size = {"capacity": capacity, "blocks": blocks, "block_size": block_size}
        allowed = Phrase("err_x_read_past", n=n, i=i, pos=pos, **table_size)
        _bad("cu_seq_lens", f"{i + 1}] - cu_seq_lens[{i}", int(lens[i]), allowed)
    # A request reads blocks [start // bs, ceil(end / bs)); entries before start are unused.
    _block_table_range(block_table, kv_cache.shape[0], block_size, starts, ends)


def _block_table_range(
    block_table: torch.Tensor, num_blocks: int, block_size: int,
    starts: torch.Tensor, ends: torch.Tensor,
) -> None:  # fmt: skip
    col = torch.arange(block_table.shape[1])[None, :]
    used = (col >= (starts // block_size)[:, None]) & (
        col < ((ends + block_size - 1) // block_size)[:, None]
    )
    used &= (ends > starts)[:, None]
    table = block_table.cpu()
    bad = used & ((table < 0) | (table >= num_blocks))
    if bool(bad.any()):
        i, j = _first(bad)
        allowed = Phrase("err_x_block_id_in", span=f"[0, {num_blocks})")
        _bad("block_table", f"{i}, {j}", int(table[i, j]), allowed)


def flash_attn_varlen(
    q: object, k: object, v: object, cu_seqlens_q: object, cu_seqlens_k: object,
    max_seqlen_q: object, max_seqlen_k: object,
) -> None:  # fmt: skip
    """``cu_seqlens_q``/``cu_seqlens_k`` monotone from 0, ending at the rows of ``q``/``k``;
    no sequence longer than ``max_seqlen_q``/``max_seqlen_k`` (the grid is sized by them)."""
    if not (index_checks_enabled() and _index(cu_seqlens_q, 1) and _index(cu_seqlens_k, 1)):
        return
    if not (_tensor(q, 3) and _tensor(k, 3)):
        return
    cq = _cu_seqlens("cu_seqlens_q", cu_seqlens_q, q.shape[0], "q")
    ck = _cu_seqlens("cu_seqlens_k", cu_seqlens_k, k.shape[0], "k")
    for name, cu, limit in (("max_seqlen_q", cq, max_seqlen_q), ("max_seqlen_k", ck, max_seqlen_k)):
        if isinstance(limit, bool) or not isinstance(limit, int):
            return
        longest = max((b - a for a, b in zip(cu, cu[1:])), default=0)
        if longest > limit:
            raise PdlabValueError(
                "err_seqlen_small", name=name, value=limit,
                longest=longest, where=f"cu_seqlens_{name[-1]}",
            )  # fmt: skip


def mla_decode(
    q: object, kv_cache: object, block_table: object, seq_lens: object,
    query_start_loc: object = None,
) -> None:  # fmt: skip
    """``seq_lens`` in ``[0, block table capacity]``; the blocks they cover in the cache;
    ``query_start_loc`` (if given) monotone from 0 to the rows of ``q``, no request with more
    queries than keys."""
    if not (index_checks_enabled() and _index(block_table, 2) and _index(seq_lens, 1)):
        return
    if not _tensor(kv_cache, 3) or seq_lens.shape[0] != block_table.shape[0]:
        return
    block_size = kv_cache.shape[1]
    capacity = block_table.shape[1] * block_size
    lens = seq_lens.cpu().long()
    bad = (lens < 0) | (lens > capacity)
    if bool(bad.any()):
        (i,) = _first(bad)
        blocks = block_table.shape[1]
        allowed = Phrase(
            "err_x_length_in_table", capacity=capacity, blocks=blocks, block_size=block_size
        )
        _bad("seq_lens", i, int(lens[i]), allowed)
    _block_table_range(block_table, kv_cache.shape[0], block_size, torch.zeros_like(lens), lens)
    if not (_index(query_start_loc, 1) and _tensor(q, 3)):
        return
    if query_start_loc.shape[0] != lens.shape[0] + 1:
        return
    qsl = _cu_seqlens("query_start_loc", query_start_loc, q.shape[0], "q")
    for b in range(lens.shape[0]):
        if qsl[b + 1] - qsl[b] > int(lens[b]):
            allowed = Phrase("err_x_queries_in_keys", b=b, n=int(lens[b]))
            _bad("query_start_loc", f"{b + 1}] - query_start_loc[{b}", qsl[b + 1] - qsl[b], allowed)
