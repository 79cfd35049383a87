"""The torch twin of ``mla_decode``: the same two stages as tensor operations.

Mirrors what ``decode_attention_kernels.py`` computes (after vLLM's
``vllm/v1/attention/ops/triton_decode_attention.py``), with the same signature as
``mla_decode_triton`` in ``decode_attention.py``, which re-exports it and explains the splits.

Stage 1: the same splits of whole tiles, each gathered through the block table as
``rows[per_split, L + R]`` and attended to in one batched product, a bounded number of
splits (``TWIN_ROWS`` rows) at a time; stage 2: the splits folded together by their LSE
(:func:`merge_splits_torch`).

With ``query_start_loc`` (``1 + K`` queries per request, bottom-right causal), the keys
every query sees go through the batched product; each of the last ``q_len - 1`` keys,
which only the later queries see, is a part of one key, merged in by its LSE, so a key a
query may not see never meets its weights, not even as ``0 * NaN``.

The argument checks and the split count both backends share are here too
(:func:`check_decode`, :func:`resolve_splits`), so the twin imports nothing of the launcher.
"""

from __future__ import annotations

import math

import torch

from pdlab.kernels import checks
from pdlab.kernels.common import FLOAT_DTYPES, check_dim, check_same_device, check_tensor, fail
from pdlab.kernels.decode_plan import CPU_NUM_SMS, mla_decode_config, num_kv_splits_auto
from pdlab.kernels.merge import merge_attn_states_torch, merge_splits_torch

TWIN_ROWS = 4096  # cached rows the torch twin gathers at once (9 MiB of fp32 at 576 wide)


def mla_decode_torch(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    num_kv_splits: int | None = None,
    kv_lora_rank: int | None = None,
    query_start_loc: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``mla_decode`` as tensor operations (see the module docstring)."""
    checks.mla_decode(q, kv_cache, block_table, seq_lens, query_start_loc)
    L = check_decode(
        q, kv_cache, block_table, seq_lens, num_kv_splits, kv_lora_rank, query_start_loc
    )
    T, H, D = q.shape
    B = seq_lens.shape[0]
    if T == 0 or H == 0 or int(seq_lens.max()) == 0:
        return q.new_zeros((T, H, L)), torch.full((T, H), float("-inf"), device=q.device)
    seq = seq_lens.long()
    if query_start_loc is None:  # one query per request: [B, 1, H, D]
        q_lens, Q, qp = torch.ones_like(seq), 1, q.float()[:, None]
    else:
        q_lens = (query_start_loc[1:] - query_start_loc[:-1]).long()
        Q = int(q_lens.max())
        j = torch.arange(Q, device=q.device)
        has = j[None, :] < q_lens[:, None]  # [B, Q]: query j of request b exists
        qp = q.new_zeros((B, Q, H, D), dtype=torch.float32)
        qp[has] = q.float()  # tokens are ordered by request, then by j
    S = resolve_splits(num_kv_splits, q, seq_lens, L, Q)
    tile = mla_decode_config(L, D - L, q.element_size())["stage1"]["BLOCK_N"]
    # Keys every query of the request sees; the remaining q_len - 1 are the causal tail.
    seq_all = torch.where(q_lens > 0, seq - q_lens + 1, 0)
    out, lse = _stage1_and_2(qp * scale, kv_cache, block_table, seq, seq_all, S, tile, L)
    for i in range(Q - 1):  # tail key seq_all + i: seen by queries j > i
        o_i, l_i = _tail_key(qp * scale, kv_cache, block_table, seq_all + i, q_lens, i, L)
        out, lse = merge_attn_states_torch(
            out.view(B * Q, H, L), lse.view(B * Q, H), o_i.view(B * Q, H, L), l_i.view(B * Q, H)
        )
    out, lse = out.view(B, Q, H, L), lse.view(B, Q, H)
    if query_start_loc is not None:
        out, lse = out[has], lse[has]
    return out.reshape(T, H, L).to(q.dtype), lse.reshape(T, H)


def _stage1_and_2(
    qs: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor, seq: torch.Tensor,
    seq_all: torch.Tensor, S: int, tile: int, L: int,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """The split-KV stages over keys ``< seq_all`` of each request, for scaled queries
    ``qs[B, Q, H, D]``; splits cut ``[0, seq)`` as the kernel cuts them. Returns fp32
    ``out[B, Q, H, L]`` and ``lse[B, Q, H]``."""
    B, Q, H, D = qs.shape
    device = qs.device
    per_split = ((seq + S - 1) // S + tile - 1).div(tile, rounding_mode="floor").clamp(min=1) * tile
    n = torch.arange(int(per_split.max()), device=device)
    pos = torch.arange(S, device=device)[None, :, None] * per_split[:, None, None] + n
    valid = ((n < per_split[:, None, None]) & (pos < seq_all[:, None, None])).view(B * S, -1)
    # Copy whole runs of rows: splits start on tile boundaries, so positions come in runs of
    # gcd(block_size, tile) rows that sit together in one page.
    block_size = kv_cache.shape[1]
    run = math.gcd(block_size, tile)
    first = torch.where(valid.view(B, S, -1), pos, 0)[..., ::run]  # each run's first row
    page = torch.gather(block_table.long(), 1, (first // block_size).view(B, -1))
    ids = (page * (block_size // run) + (first % block_size).view(B, -1) // run).view(B * S, -1)
    runs = kv_cache.reshape(-1, run, D)  # a page is block_size / run consecutive runs
    q_jobs = qs.view(B, Q * H, D).repeat_interleave(S, dim=0)  # one (request, split) a job
    out_s = torch.zeros((B * S, Q * H, L), dtype=torch.float32, device=device)
    lse_s = torch.full((B * S, Q * H), float("-inf"), dtype=torch.float32, device=device)
    live = valid.any(dim=1).nonzero()[:, 0]  # an empty split stays 0, -inf
    step = max(1, TWIN_ROWS // valid.shape[1])  # bounded buffers are reused, not faulted in
    for chunk in live.split(step):
        rows = runs.index_select(0, ids[chunk].view(-1)).view(len(chunk), -1, run, D).float()
        ok = valid[chunk]
        part = ~ok.view(len(chunk), -1, run).all(dim=-1)  # runs with a row past the end:
        rows[part] = rows[part].masked_fill(~ok.view(len(chunk), -1, run)[part][..., None], 0)
        rows = rows.view(len(chunk), -1, D)  # zeroed, as 0 * NaN (an unused slot) is NaN
        scores = torch.bmm(q_jobs[chunk], rows.transpose(1, 2))  # [jobs, Q H, per_split]
        scores.masked_fill_(~ok[:, None], float("-inf"))
        lse_s[chunk] = torch.logsumexp(scores, dim=-1)
        probs = scores.sub_(lse_s[chunk][..., None]).exp_()
        out_s[chunk] = torch.bmm(probs, rows[..., :L])
    out, lse = merge_splits_torch(
        out_s.view(B, S, Q * H, L).transpose(1, 2), lse_s.view(B, S, Q * H).transpose(1, 2)
    )
    return out.view(B, Q, H, L), lse.view(B, Q, H)


def _tail_key(
    qs: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor, position: torch.Tensor,
    q_lens: torch.Tensor, i: int, L: int,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """The part of one key, at ``position[b]`` of each request, seen by its queries
    ``i < j < q_len``: softmax over one key is 1, so ``out`` is the key's first ``L``
    columns and ``lse`` its score, for the queries that see it; ``0`` and ``-inf`` (the key
    never read into their result) for the others."""
    B, Q, H, _ = qs.shape
    j = torch.arange(Q, device=qs.device)
    sees = (j[None, :] > i) & (j[None, :] < q_lens[:, None])  # [B, Q]
    pos = torch.where(sees.any(dim=1), position, 0)
    block_size = kv_cache.shape[1]
    page = torch.gather(block_table.long(), 1, (pos // block_size)[:, None])[:, 0]
    row = kv_cache[page, pos % block_size].float()  # [B, D]
    score = torch.einsum("bqhd,bd->bqh", qs, row)
    lse = torch.where(sees[..., None], score, float("-inf"))
    out = torch.where(sees[..., None, None], row[:, None, None, :L], 0.0).expand(B, Q, H, L)
    return out.contiguous(), lse


def check_decode(
    q, kv_cache, block_table, seq_lens, num_kv_splits, kv_lora_rank, query_start_loc=None
) -> int:
    """Checks ``mla_decode``'s arguments (both backends); returns ``kv_lora_rank``."""
    check_tensor("q", q, 3, FLOAT_DTYPES)
    check_tensor("kv_cache", kv_cache, 3)
    check_tensor("block_table", block_table, 2, (torch.int32,))
    check_tensor("seq_lens", seq_lens, 1, (torch.int32,))
    T, _, D = q.shape
    check_dim("kv_cache", kv_cache, 2, D, "row width L + R = q's width")
    if kv_cache.dtype != q.dtype:
        fail("kv_cache", str(kv_cache.dtype), f"dtype {q.dtype} (q's)")
    if query_start_loc is None:
        check_dim("block_table", block_table, 0, T, "one row per request of q")
        check_dim("seq_lens", seq_lens, 0, T, "one length per request of q")
    else:
        B = block_table.shape[0]
        check_tensor("query_start_loc", query_start_loc, 1, (torch.int32,))
        check_dim("seq_lens", seq_lens, 0, B, "one length per row of block_table")
        check_dim("query_start_loc", query_start_loc, 0, B + 1, "num_reqs + 1 offsets")
    s = num_kv_splits
    if s is not None and (isinstance(s, bool) or not isinstance(s, int) or s < 1):
        fail("num_kv_splits", repr(num_kv_splits), "an int >= 1, or None (automatic)")
    if kv_lora_rank is None:
        kv_lora_rank = 1 << ((D - 1).bit_length() - 1) if D > 1 else 0
    r = kv_lora_rank
    if isinstance(r, bool) or not isinstance(r, int) or not 0 < r < D:
        fail("kv_lora_rank", repr(kv_lora_rank), f"an int in [1, {D - 1}] (L of L + R = {D})")
    check_same_device(q=q, kv_cache=kv_cache, block_table=block_table, seq_lens=seq_lens)
    if query_start_loc is not None:
        check_same_device(q=q, query_start_loc=query_start_loc)
    return kv_lora_rank


def resolve_splits(
    num_kv_splits: int | None, q: torch.Tensor, seq_lens: torch.Tensor, L: int, q_len: int = 1
) -> int:
    """The split count: ``num_kv_splits``, or :func:`num_kv_splits_auto`'s for ``None``."""
    if num_kv_splits is not None:
        return num_kv_splits
    B, (_, H, D) = seq_lens.shape[0], q.shape
    max_seq_len = int(seq_lens.max()) if B else 0  # one device sync, as vLLM's metadata
    num_sms = CPU_NUM_SMS  # without a GPU
    if q.device.type == "cuda":
        num_sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    return num_kv_splits_auto(B, H, max_seq_len, num_sms, L, D - L, q_len)
