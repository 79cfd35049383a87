"""The n-gram proposer (prompt lookup): drafts copied from an earlier occurrence of the
request's last tokens, no model at all.

Mirrors ``NgramGPUSpeculator`` (``vllm/v1/worker/gpu/spec_decode/ngram/speculator.py``,
vLLM 0.33.0's Model Runner V2; its two Triton kernels ``_ngram_scan_kernel`` and
``_ngram_finalize_kernel`` in plain Python): for each request that sampled this step,
among the suffix lengths ``n`` in ``[prompt_lookup_min, prompt_lookup_max]`` it finds the
earlier positions where the last ``n`` tokens occur again (ending before the suffix
itself), keeps the longest ``n`` and, for it, the rightmost position, and drafts the K
tokens that followed that occurrence. Slots past the known tokens, and every slot when
nothing matches, hold the last sampled token (upstream: "they are verified as ordinary
(rejectable) drafts, so the fill value only affects efficiency"). No KV cache, no hidden
state: the ``draft`` event's ``hidden_position`` is -1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pdlab.engine.worker.gpu.spec_decode.mtp import DraftRow


def ngram_drafts(token_ids: Sequence[int], k: int, min_n: int, max_n: int) -> list[int]:
    """The K drafts prompt lookup proposes after ``token_ids`` (the last one just sampled)."""
    toks, length = list(token_ids), len(token_ids)
    best: tuple[int, int] | None = None  # (n, pos): longest n, then rightmost pos
    # A suffix of n tokens can only recur earlier when n < length: longer bounds are moot.
    for n in range(min_n, min(max_n, length - 1) + 1):
        suffix = toks[length - n :]
        for pos in range(length - n - 1, -1, -1):
            if toks[pos : pos + n] == suffix:
                best = (n, pos)
                break
    last = toks[-1]
    if best is None:
        return [last] * k
    start = best[1] + best[0]
    found = toks[start : start + k]
    return found + [last] * (k - len(found))


class NgramProposer:
    """Prompt lookup over the runner's own copy of each request's tokens."""

    method = "ngram"

    def __init__(
        self, num_speculative_tokens: int, prompt_lookup_min: int,
        prompt_lookup_max: int, token_ids_of: Callable[[str], Sequence[int]],
    ) -> None:  # fmt: skip
        self.num_speculative_tokens = num_speculative_tokens
        self.min_n, self.max_n = prompt_lookup_min, prompt_lookup_max
        self.token_ids_of = token_ids_of

    def propose(self, rows: Sequence[DraftRow], *_: Any) -> dict[str, list[int]]:
        """Drafts for every row that sampled (the MTP proposer's signature; the target's
        inputs, hidden states and metadata are not read)."""
        k = self.num_speculative_tokens
        return {
            r.req_id: ngram_drafts(self.token_ids_of(r.req_id), k, self.min_n, self.max_n)
            for r in rows
            if r.wants_drafts
        }
