"""Per-step attention metadata, and how a batch splits into decodes and prefills.

Mirrors, in vLLM 0.33.0:

* ``CommonAttentionMetadata`` (``vllm/v1/attention/backend.py``), with ``is_prefilling``,
  which the model runner sets for every request (how V2 and V1 compute it:
  ``pdlab/engine/worker/gpu/batch.py``);
* ``split_decodes_and_prefills``, ``reorder_batch_to_split_decodes_and_prefills`` and
  ``split_prefill_chunks`` (``vllm/v1/attention/backends/utils.py``).

A request is routed by two facts: its query length against ``decode_threshold`` (the
backend's ``reorder_batch_threshold``), and whether it is still in its prompt
(``is_prefilling``). The four kinds of request, in the order V1 sorts the batch (V2 sorts
by query length instead, ``sort_batch_req_ids``):

=============  ====================  =================  ==========================
region         query_len             context            is_prefilling
=============  ====================  =================  ==========================
decode         <= threshold          > 0                False
short_extend   <= threshold          > 0                True  (D's first step: 1, N-1)
long_extend    > threshold           > 0                any   (a later chunk of a prompt)
prefill        any                   0                  True  (a first chunk)
=============  ====================  =================  ==========================

How ``split_decodes_and_prefills`` reads them: :func:`split_query_lens`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pdlab.errors import PdlabValueError

if TYPE_CHECKING:  # tensors are made in from_batch only: the rules below run without torch
    import torch

REGIONS = ("decode", "short_extend", "long_extend", "prefill")


@dataclass
class CommonAttentionMetadata:
    """One step's batch, shared by every layer (the fields of upstream's class that pdlab
    uses, plus ``req_ids`` and ``num_computed_tokens_cpu`` for the trace).

    ``seq_lens`` counts the tokens in the cache after this step's write, so a request's
    context (tokens cached before the step) is ``seq_lens - query_lens``.
    """

    query_start_loc: torch.Tensor  # int32[B + 1], on the model's device
    query_start_loc_cpu: torch.Tensor  # int32[B + 1]
    seq_lens: torch.Tensor  # int32[B]
    num_reqs: int
    num_actual_tokens: int
    max_query_len: int
    max_seq_len: int
    block_table_tensor: torch.Tensor  # int32[B, max_blocks]
    slot_mapping: torch.Tensor  # int64[T]
    is_prefilling: torch.Tensor | None = None  # bool[B], on the CPU
    req_ids: Sequence[str] = ()
    num_computed_tokens_cpu: torch.Tensor | None = None  # int32[B]

    @property
    def query_lens_cpu(self) -> torch.Tensor:
        return self.query_start_loc_cpu[1:] - self.query_start_loc_cpu[:-1]

    @classmethod
    def from_batch(
        cls, query_lens: Sequence[int], num_computed_tokens: Sequence[int],
        num_prompt_tokens: Sequence[int], block_table: torch.Tensor, slot_mapping: torch.Tensor,
        req_ids: Sequence[str], is_prefilling: Sequence[bool] | None = None,
    ) -> CommonAttentionMetadata:  # fmt: skip
        """The metadata of a batch already in order, as upstream's model runner builds it.
        ``is_prefilling`` left out is V1's ``num_computed_tokens < num_prompt_tokens``.
        Tensors go to ``block_table``'s device; the ``_cpu`` ones stay on the CPU."""
        import torch

        device = block_table.device
        qsl = torch.zeros(len(query_lens) + 1, dtype=torch.int32)
        qsl[1:] = torch.cumsum(torch.tensor(list(query_lens), dtype=torch.int32), 0)
        seq_lens = [c + q for c, q in zip(num_computed_tokens, query_lens)]
        computed = torch.tensor(list(num_computed_tokens), dtype=torch.int32)
        if is_prefilling is None:  # V1's rule
            prefilling = computed < torch.tensor(list(num_prompt_tokens), dtype=torch.int32)
        else:
            prefilling = torch.tensor(list(is_prefilling), dtype=torch.bool)
        return cls(
            query_start_loc=qsl.to(device), query_start_loc_cpu=qsl,
            seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
            num_reqs=len(query_lens), num_actual_tokens=int(qsl[-1]),
            max_query_len=max(query_lens, default=0), max_seq_len=max(seq_lens, default=0),
            block_table_tensor=block_table, slot_mapping=slot_mapping.to(device),
            is_prefilling=prefilling, req_ids=list(req_ids), num_computed_tokens_cpu=computed,
        )  # fmt: skip


def split_decodes_and_prefills(
    common_attn_metadata: CommonAttentionMetadata,
    decode_threshold: int = 1,
    require_uniform: bool = False,
    treat_short_extends_as_decodes: bool = True,
) -> tuple[int, int, int, int]:
    """``(num_decodes, num_prefills, num_decode_tokens, num_prefill_tokens)`` for a batch
    already in the runner's order (decode-like rows first: V1's four regions, or V2's
    ``sort_batch_req_ids``): :func:`split_query_lens` on the metadata's query lengths and
    ``is_prefilling``."""
    m = common_attn_metadata
    qsl = m.query_start_loc_cpu.tolist()
    return split_query_lens(
        [b - a for a, b in zip(qsl, qsl[1:])],
        None if m.is_prefilling is None else [bool(x) for x in m.is_prefilling.tolist()],
        decode_threshold,
        require_uniform,
        treat_short_extends_as_decodes,
        num_tokens=m.num_actual_tokens,
    )


def split_query_lens(
    query_lens: Sequence[int], is_prefilling: Sequence[bool] | None = None,
    decode_threshold: int = 1, require_uniform: bool = False,
    treat_short_extends_as_decodes: bool = True, num_tokens: int | None = None,
) -> tuple[int, int, int, int]:  # fmt: skip
    """``split_decodes_and_prefills``'s rule on plain lists (a row's query length and its
    ``is_prefilling``; ``num_tokens`` defaults to their sum). The decodes are the requests
    before the first one that counts as a prefill:

    * ``query_len > decode_threshold`` is a prefill;
    * with ``require_uniform``, a request is a prefill when its query length differs from
      the first request's (a query of length 0 is padding and never counts), so that every
      decode has the same query length;
    * with ``treat_short_extends_as_decodes=False``, a request still in its prompt
      (``is_prefilling``) is a prefill whatever its query length.
    """
    q = list(query_lens)
    num_reqs = len(q)
    num_tokens = sum(q) if num_tokens is None else num_tokens
    everything_decodes = (num_reqs, 0, num_tokens, 0)
    if (
        max(q, default=0) <= decode_threshold
        and (not require_uniform or decode_threshold <= 1)
        and treat_short_extends_as_decodes
    ):
        return everything_decodes
    if q[0] > decode_threshold:
        return 0, num_reqs, 0, num_tokens
    if require_uniform:
        same_or_padding = [n == q[0] or n == 0 for n in q]
        if treat_short_extends_as_decodes and all(same_or_padding):
            return everything_decodes
        is_prefill = [not s for s in same_or_padding]
    else:
        is_prefill = [n > decode_threshold for n in q]
    if not treat_short_extends_as_decodes:
        if is_prefilling is None:
            raise PdlabValueError("err_no_is_prefilling")
        is_prefill = [a or bool(b) for a, b in zip(is_prefill, is_prefilling)]
    if not any(is_prefill):
        return everything_decodes
    num_decodes = is_prefill.index(True)
    num_decode_tokens = sum(q[:num_decodes])
    return num_decodes, num_reqs - num_decodes, num_decode_tokens, num_tokens - num_decode_tokens


def batch_region(
    num_scheduled_tokens: int, num_computed_tokens: int, num_prompt_tokens: int, threshold: int
) -> str:
    """Which of the four regions (:data:`REGIONS`) a request belongs to this step."""
    if num_computed_tokens == 0:
        return "prefill"
    if num_scheduled_tokens > threshold:
        return "long_extend"
    return "short_extend" if num_computed_tokens < num_prompt_tokens else "decode"


def reorder_batch_to_split_decodes_and_prefills(
    num_scheduled_tokens: Sequence[int], num_computed_tokens: Sequence[int],
    num_prompt_tokens: Sequence[int], decode_threshold: int = 1,
) -> list[int]:  # fmt: skip
    """The batch order upstream's model runner produces: decode, short_extend, long_extend,
    prefill (:func:`batch_region`). Returns the request indices in their new slots.

    Upstream reorders its persistent batch in place and moves only the requests that sit in
    the wrong region: they are sorted by region (stably) and swapped into the misplaced
    slots, following each swap's cycle. A request already in its region keeps its slot, so
    the order within a region is not always the arrival order; this function reproduces that.
    """
    regions = [
        REGIONS.index(batch_region(q, c, p, decode_threshold))
        for q, c, p in zip(num_scheduled_tokens, num_computed_tokens, num_prompt_tokens)
    ]
    target = sorted(regions)
    slots = list(range(len(regions)))  # slots[i] = the request now in slot i
    misplaced = [i for i in range(len(regions)) if regions[i] != target[i]]
    # The misplaced requests, ordered by region, go to the misplaced slots in slot order.
    movers = sorted(misplaced, key=lambda i: regions[i])
    goes_to = dict(zip(movers, misplaced))
    for src in list(goes_to):
        dst = goes_to[src]
        while src != dst:
            slots[src], slots[dst] = slots[dst], slots[src]
            nxt = goes_to.get(dst, dst)
            goes_to[dst] = dst
            dst = nxt
    return slots


def split_prefill_chunks(
    seq_lens_cpu: torch.Tensor | Sequence[int], workspace_size: int, request_offset: int = 0
) -> list[tuple[int, int]]:
    """Group consecutive requests into ``(start, end)`` ranges whose total length fits in
    ``workspace_size`` rows, filling each range greedily. Every single length must fit."""
    lens = [int(x) for x in seq_lens_cpu]
    too_long = [x for x in lens if x > workspace_size]
    if too_long:
        raise PdlabValueError("err_seq_too_long", value=too_long[0], limit=workspace_size)
    bounds, i = [], 0
    while i < len(lens):
        start, total = i, 0
        while i < len(lens) and total + lens[i] <= workspace_size:
            total += lens[i]
            i += 1
        bounds.append((start + request_offset, i + request_offset))
    return bounds
