"""``mla_decode``'s plan in plain Python: its tiles (:func:`mla_decode_config`) and how many
parts it splits each request's keys into (:func:`num_kv_splits_auto`, :func:`used_splits`).
No torch and no triton: the cost model (``pdlab/sim/kernel_costs.py``) reads the same plan
the kernel launches with, and ``pdlab tour --chapter 5`` runs without either.
``decode_attention.py`` re-exports what its callers read; the reasons for the numbers are in
its docstring. Mirrors the plan half of ``decode_attention_fwd`` in vLLM 0.33.0's
``vllm/v1/attention/ops/triton_decode_attention.py`` (whose split count is its caller's
``num_kv_splits``).
"""

from __future__ import annotations

from pdlab.engine.math_utils import cdiv


def block(n: int, minimum: int = 16) -> int:
    """The tile width for ``n`` columns: the next power of two, at least ``minimum``."""
    width = minimum
    while width < n:
        width *= 2
    return width


DEFAULT_NUM_KV_SPLITS = None  # automatic: num_kv_splits_auto
BLOCK_H = 16
BLOCK_N = 64  # tokens per tile: wgmma's M
MAX_BLOCK_Q = 4  # queries of one request per program (1 + K for K <= 3 in one program)
TAIL_TILE = 16  # keys of the causal tail tile (at most MAX_BLOCK_Q - 1 are used)
TAIL_K = 64  # latent columns per slice of the tail tile's score product (BLOCK_K)
MAX_ROWS = BLOCK_H  # (query, head) rows per program: the N side stays 16 wide
MIN_TILES_PER_SPLIT = 4
MAX_NUM_KV_SPLITS = 64
CPU_NUM_SMS = 132  # without a GPU, plan splits for an H100 SXM, as the AOT build targets


def mla_decode_config(
    L: int, R: int, elem_bytes: int = 2, target: int = 90,
    q_len: int = 1, varlen: bool | None = None,
) -> dict:  # fmt: skip
    """Tiles chosen in plain Python (no autotuning) for compute capability ``target`` (90 =
    sm_90). Two stages of a 64 x 576 bf16 tile are 144 KiB of shared memory; in fp32 the
    tile is halved to 32 rows so that two stages still fit an A100. ``q_len > 1`` (the
    longest request's queries): ``BLOCK_Q`` queries of ``BLOCK_H`` heads per program and a
    causal tail tile (the registers behind these numbers: the kernels' docstring);
    ``varlen`` (default ``q_len > 1``): the build that reads ``query_start_loc``."""
    varlen = q_len > 1 if varlen is None else varlen
    block_n = BLOCK_N if elem_bytes <= 2 else BLOCK_N // 2
    block_q = query_block(q_len) if q_len > 1 else 1
    return {
        "stage1": {
            "BLOCK_Q": block_q,
            "BLOCK_H": heads_per_program(q_len),
            "BLOCK_T": TAIL_TILE,
            "BLOCK_K": min(TAIL_K, block(L)),
            "BLOCK_N": block_n,
            "BLOCK_L": block(L),
            "BLOCK_R": block(R),
            "NUM_STAGES": 2,
            # One warp group issues Hopper's wgmma for one query per request; the 1 + K
            # build needs two there, and Ampere's mma.sync 8 in any case (4 take all 255
            # registers: measured with `pdlab doctor --aot`).
            "num_warps": 4 if target >= 90 and not varlen else 8,
        },
        "stage2": {"BLOCK_N": block_n, "BLOCK_L": block(L, minimum=1), "num_warps": 4},
    }


def query_block(q_len: int) -> int:
    """Queries of one request a stage-1 program holds (``BLOCK_Q``): ``q_len`` rounded up
    to a power of two, at most :data:`MAX_BLOCK_Q` (longer requests take several programs)."""
    return min(block(max(1, q_len), minimum=1), MAX_BLOCK_Q)


def heads_per_program(q_len: int) -> int:
    """Heads of one stage-1 program (``BLOCK_H``) for requests of up to ``q_len`` queries:
    its ``BLOCK_Q * BLOCK_H`` rows (query-major) are the N side of both products."""
    return max(1, MAX_ROWS // query_block(q_len)) if q_len > 1 else BLOCK_H


def num_kv_splits_auto(
    batch: int, num_heads: int, max_seq_len: int, num_sms: int,
    L: int = 512, R: int = 64, q_len: int = 1,
) -> int:  # fmt: skip
    """How many parts to split each request's KV range into: ``S = min(cdiv(num_sms, batch *
    head_groups), cdiv(max_seq_len, BLOCK_N) // MIN_TILES_PER_SPLIT, workspace cap,
    MAX_NUM_KV_SPLITS)``, at least 1 (why: ``decode_attention.py``). With ``q_len`` queries
    per request each query has its own rows and workspace, so both terms follow the rows."""
    groups = -(-num_heads // heads_per_program(q_len))
    fill = -(-num_sms // max(1, batch * groups))
    by_length = -(-max_seq_len // BLOCK_N) // MIN_TILES_PER_SPLIT
    by_workspace = (max_seq_len * 2 * (L + R)) // (8 * 8 * L * max(1, num_heads * q_len))
    return max(1, min(fill, by_length, by_workspace, MAX_NUM_KV_SPLITS))


def used_splits(seq_len: int, num_kv_splits: int, tile: int) -> int:
    """Splits a request of ``seq_len`` tokens really uses (the kernels' rule): tile-aligned
    parts of ``cdiv(cdiv(seq_len, S), tile) * tile`` tokens; 1 or 0 means not split."""
    per_split = max(1, cdiv(cdiv(seq_len, num_kv_splits), tile)) * tile
    return cdiv(seq_len, per_split)
