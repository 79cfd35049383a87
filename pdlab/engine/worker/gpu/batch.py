"""How a model runner lays out one step's batch: the order of its rows and which rows are
still prefilling, under Model Runner V2 (vLLM 0.33.0's default) and under V1.

Mirrors, in vLLM 0.33.0:

* ``sort_batch_req_ids``, ``BatchReqState`` and ``GPUModelRunner.gather_batch_req_state``
  in ``vllm/v1/worker/gpu/model_runner.py`` (Model Runner V2);
* ``get_uniform_decode_token_count`` and ``is_uniform_query_len`` in
  ``vllm/v1/worker/utils.py``;
* the V1 runner (``vllm/v1/worker/gpu_model_runner.py``): ``is_prefilling =
  num_computed_tokens < num_prompt_tokens``, the four-region reorder
  (:func:`pdlab.engine.attention.backend.reorder_batch_to_split_decodes_and_prefills`) and
  ``_is_uniform_decode`` with ``uniform_decode_query_len = 1 + num_spec_tokens``.

V2 keeps, per request, ``prefill_len``: every token id the request had when the runner was
given it (a request resumed after preemption is re-sent whole, outputs included). A row is
prefilling while ``min(num_computed_tokens, prefill_len) < prefill_len``. Without prefill
context parallelism, V2 marks a prefilling row that schedules one new token over cached
context ``prefill_runs_as_decode``, and the step stays ``decode_graph_eligible`` when every
row is a decode or such a row: D's first step after a KV transfer (why it is one token:
``core/sched/scheduler.py``, ``pdlab tour --chapter 3``). Under PCP it is simply "no row is
prefilling", and each rank orders its rows decodes first (``PCPManager._reorder_segments``
in ``vllm/v1/worker/gpu/pcp_manager.py``).

Under speculative decoding V2 counts a row's new tokens without its drafts, so D's first
step, padded to ``1 + K`` with ``-1`` placeholders, is still ``prefill_runs_as_decode``. V1
asks only for the shape (``_is_uniform_decode``: every row has ``1 + K`` tokens), so a
one-token row left unpadded beside verifying rows loses the full decode graph under either
runner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pdlab.engine.attention.backend import reorder_batch_to_split_decodes_and_prefills
from pdlab.errors import PdlabValueError, Phrase, invalid, noted

RUNNERS = ("v2", "v1")


def sort_batch_req_ids(
    num_tokens_per_req: Mapping[str, int],
    draft_tokens: Mapping[str, Sequence[int]] | None = None,
    decode_query_len: int = 1,
) -> list[str]:
    """V2's batch order: rows with draft tokens first, then rows whose query length is
    ``decode_query_len``, then by query length (a stable sort, so ties keep the
    scheduler's order)."""
    drafts = draft_tokens or {}

    def key(rid: str) -> tuple[bool, bool, int]:
        n = num_tokens_per_req[rid]
        return (not drafts.get(rid), n != decode_query_len, n)

    return sorted(num_tokens_per_req, key=key)


def is_uniform_decode(
    max_num_scheduled_tokens: int, uniform_decode_query_len: int, num_tokens: int, num_reqs: int
) -> bool:
    """V1's test for its full decode graph (``GPUModelRunner._is_uniform_decode``): every row
    has ``uniform_decode_query_len`` tokens (``1 + num_spec_tokens``). It reads only the
    shape, not ``is_prefilling``."""
    return (
        max_num_scheduled_tokens == uniform_decode_query_len
        and num_tokens == max_num_scheduled_tokens * num_reqs
    )


def get_uniform_decode_token_count(
    num_reqs: int, num_tokens: int, max_query_len: int, decode_graph_eligible: bool
) -> int | None:
    """The per-row token count of a uniform decode batch (the batch a full decode CUDA
    graph replays), or None (upstream's ``is_uniform_query_len`` is the shape test)."""
    if decode_graph_eligible and num_reqs > 0 and num_tokens == max_query_len * num_reqs:
        return max_query_len
    return None


@dataclass(frozen=True)
class BatchReqState:
    """One step's rows in batch order, and what the runner decided about them.

    ``prefill_len`` and ``num_computed_prefill_tokens`` are V2's; under V1 they are the
    prompt length and ``num_computed_tokens`` (V1's ``is_prefilling`` reads the prompt).
    ``prefill_runs_as_decode`` is None where the runner computes no such thing (V1, or V2
    under PCP), as upstream's field is."""

    model_runner: str
    req_ids: list[str]
    num_scheduled_tokens: list[int]
    num_computed_tokens: list[int]
    num_prompt_tokens: list[int]
    prefill_len: list[int]
    num_computed_prefill_tokens: list[int]
    is_prefilling: list[bool]
    has_prefill: bool
    prefill_runs_as_decode: list[bool] | None
    decode_graph_eligible: bool
    uniform_decode_token_count: int | None
    # Draft tokens per row (V2's num_draft_tokens_np); None when no row has any.
    num_draft_tokens: list[int] | None = None
    # 1 + K: V2's decode_query_len, V1's uniform_decode_query_len.
    decode_query_len: int = 1

    @property
    def uniform_decode(self) -> bool:
        """The runner picks its full decode graph: the uniform token count is the decode
        query length (V2's ``uniform_decode=uniform_tok_count == self.decode_query_len``
        in ``execute_model``; V1's ``_is_uniform_decode``)."""
        return self.uniform_decode_token_count == self.decode_query_len


def gather_batch_req_state(
    num_scheduled_tokens: Mapping[str, int], num_computed_tokens: Mapping[str, int],
    num_prompt_tokens: Mapping[str, int], prefill_len: Mapping[str, int] | None = None,
    *,
    model_runner: str = "v2", use_pcp: bool = False, reorder_batch_threshold: int = 1,
    draft_tokens: Mapping[str, Sequence[int]] | None = None, decode_query_len: int = 1,
) -> BatchReqState:  # fmt: skip
    """Order the step's rows and compute ``is_prefilling``, ``prefill_runs_as_decode`` and
    ``decode_graph_eligible`` the way the chosen runner does.

    ``num_scheduled_tokens`` is the scheduler's dict, in its order; ``prefill_len``
    defaults to the prompt length. V1 orders by region with ``reorder_batch_threshold``.
    ``draft_tokens`` is the scheduler's ``scheduled_spec_decode_tokens`` (counted in
    ``num_scheduled_tokens``), ``decode_query_len`` the runner's ``1 + K``."""
    if model_runner not in RUNNERS:
        raise invalid("model_runner", model_runner, Phrase("err_x_one_of", choices=RUNNERS))
    n = decode_query_len
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        width = noted(Phrase("err_x_int_ge", n=1), "err_n_verify_width")
        raise invalid("decode_query_len", n, width)
    rids = list(num_scheduled_tokens)
    drafts = {r: d for r, d in (draft_tokens or {}).items() if d}
    for r, d in drafts.items():
        if r not in num_scheduled_tokens or len(d) >= num_scheduled_tokens[r]:
            raise PdlabValueError(
                "err_too_many_drafts", req=r, n=len(d), scheduled=num_scheduled_tokens.get(r)
            )
    plen = dict(prefill_len) if prefill_len is not None else dict(num_prompt_tokens)
    if model_runner == "v2":
        order = sort_batch_req_ids(num_scheduled_tokens, drafts, decode_query_len)
    else:
        idx = reorder_batch_to_split_decodes_and_prefills(
            [num_scheduled_tokens[r] for r in rids],
            [num_computed_tokens[r] for r in rids],
            [num_prompt_tokens[r] for r in rids],
            reorder_batch_threshold,
        )
        order = [rids[i] for i in idx]
    q = [num_scheduled_tokens[r] for r in order]
    nd = [len(drafts.get(r, ())) for r in order]
    c = [num_computed_tokens[r] for r in order]
    p = [num_prompt_tokens[r] for r in order]
    if model_runner == "v2":
        pl = [plen[r] for r in order]
        cp = [min(ci, li) for ci, li in zip(c, pl)]
    else:
        pl, cp = list(p), list(c)
    is_prefilling = [ci < li for ci, li in zip(cp, pl)]
    if model_runner == "v2" and use_pcp:
        # Decodes first on each PCP rank (module docstring); pdlab runs rank 0's view.
        perm = sorted(range(len(order)), key=lambda i: is_prefilling[i])
        order, q, nd, c, p, pl, cp, is_prefilling = (
            [xs[i] for i in perm] for xs in (order, q, nd, c, p, pl, cp, is_prefilling)
        )
    has_prefill = any(is_prefilling)
    runs_as_decode: list[bool] | None = None
    eligible = not has_prefill
    if model_runner == "v2" and has_prefill and not use_pcp:
        # A row's new tokens are its scheduled tokens less its drafts: D's first step,
        # padded to 1 + K with placeholders, is one new token over context.
        new = [qi - di for qi, di in zip(q, nd)]
        runs_as_decode = [pf and ni == 1 and ci > 0 for pf, ni, ci in zip(is_prefilling, new, cp)]
        eligible = all(rd or not pf for rd, pf in zip(runs_as_decode, is_prefilling))
    elif model_runner == "v1":
        # V1 has no such flag; its full decode graph needs every row to have 1 + K tokens
        # (``_is_uniform_decode``), whatever is_prefilling says.
        eligible = is_uniform_decode(max(q, default=0), decode_query_len, sum(q), len(q))
    uniform = get_uniform_decode_token_count(len(q), sum(q), max(q, default=0), eligible)
    return BatchReqState(
        model_runner=model_runner, req_ids=order,
        num_scheduled_tokens=q, num_computed_tokens=c, num_prompt_tokens=p,
        prefill_len=pl, num_computed_prefill_tokens=cp,
        is_prefilling=is_prefilling, has_prefill=has_prefill, prefill_runs_as_decode=runs_as_decode,
        decode_graph_eligible=eligible, uniform_decode_token_count=uniform,
        num_draft_tokens=nd if drafts else None, decode_query_len=decode_query_len,
    )  # fmt: skip


def pcp_rank_chunks(
    num_scheduled_tokens: Sequence[int],
    is_prefilling: Sequence[bool],
    pcp_size: int,
    decode_context_parallel_size: int = 1,
) -> list[list[tuple[int, int, int]]]:
    """Which part of each row every PCP rank computes: per rank, ``(row, offset, length)``.

    Mirrors ``PCPManager._iter_rank_chunks`` (``vllm/v1/worker/gpu/pcp_manager.py``, without
    decode context parallelism's short-prefill rule): a row that is still prefilling is cut
    into ``2 * pcp_size`` chunks and rank ``r`` takes chunks ``r`` and ``2 * pcp_size - 1 -
    r``; any other row stays whole (``replicated = ~is_prefilling``) and goes to one rank,
    in turn, when PCP runs alone (``pcp_shard_decode_requests``), or to every rank under
    decode context parallelism. So D's one-token row, still prefilling, is split: rank 0
    gets its one token and the others get nothing of it. pdlab computes every row on one
    device; this only shows the layout."""
    chunks = 2 * pcp_size
    shard = decode_context_parallel_size == 1
    ranks: list[list[tuple[int, int, int]]] = [[] for _ in range(pcp_size)]
    ordinal = 0
    for row, (q, pf) in enumerate(zip(num_scheduled_tokens, is_prefilling)):
        if q == 0:
            continue
        if pf:
            size = -(-q // chunks)
            for r in range(pcp_size):
                for idx in (r, chunks - 1 - r):
                    n = min(size, q - idx * size)
                    if n > 0:
                        ranks[r].append((row, idx * size, n))
        elif shard:
            ranks[ordinal % pcp_size].append((row, 0, q))
            ordinal += 1
        else:
            for r in range(pcp_size):
                ranks[r].append((row, 0, q))
    return ranks
