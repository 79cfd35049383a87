"""The MTP proposer: DeepSeek's multi-token-prediction layer drafts K tokens per request
from the target model's hidden states, right after the target's step.

Mirrors ``MTPSpeculator`` (``vllm/v1/worker/gpu/spec_decode/mtp/speculator.py``), which is
``TargetDependentARSpeculator.propose`` (``.../target_dependent_ar/speculator.py``) in
vLLM 0.33.0's Model Runner V2:

1. **The draft prefill** runs the MTP layer over the target's batch as it is, same
   positions, same attention metadata, same slots (its KV-cache entry is layer
   ``num_hidden_layers``): at position ``p`` its input is token ``p + 1`` (the target's
   input ids shifted by one, ``prepare_prefill_inputs``) and the target's output
   ``h[p]``. At a row's last valid position (``query_start + query_len - num_rejected -
   1``) the next token is the one just sampled, or, for a prompt chunk, the next prompt
   token; the output there gives draft 1. Rejected positions keep the target's shape
   (upstream: "to avoid CPU-GPU synchronization"): their entries are rewritten by a later
   step, as the target's are.
2. **The draft decode steps** (``_multi_step_decode``), K - 1 of them: each feeds the draft
   just proposed, one position further on, with ``shared_head(output)`` of the step before
   as its previous hidden state (DeepSeek's MTP layer recycles its normed output), one
   query per request; each gives the next draft.

On D's first step the drafter is handed ``h[N - 1]``, from the target's recompute of
position ``N - 1`` (why D recomputes it: ``pdlab tour --chapter 3``), with the token just
sampled from it. Drafts are greedy (argmax), as upstream's ``sample_draft`` is at temperature 0.
A row whose next draft position has no slot (past its blocks or ``max_model_len``) stops
drafting there; upstream clamps the position instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pdlab.engine.attention.backend import CommonAttentionMetadata
from pdlab.engine.attention.mla_builder import MLAMetadata, MLAMetadataBuilder
from pdlab.errors import PdlabValueError


@dataclass
class DraftRow:
    """One row of the target's batch, as the proposer needs it."""

    req_id: str
    query_start: int  # in the flattened batch
    query_len: int
    num_rejected: int  # verified positions rolled back (0 for a prompt chunk)
    next_token: int  # the last token sampled, or the next prompt token of a chunk
    wants_drafts: bool  # it sampled this step (a prompt chunk's drafts are dropped)
    block_ids: list[int]

    @property
    def last_token_index(self) -> int:
        return self.query_start + self.query_len - self.num_rejected - 1


class MTPProposer:
    """Drafts with ``model.mtp`` (``DeepSeekMTP`` in
    ``pdlab/engine/model_executor/models/deepseek_mtp.py``)."""

    method = "mtp"

    def __init__(
        self,
        model: Any,
        num_speculative_tokens: int,
        builder: MLAMetadataBuilder,
        block_size: int,
        max_model_len: int,
    ) -> None:
        if getattr(model, "mtp", None) is None:
            n = getattr(model.config, "num_nextn_predict_layers", 0)
            raise PdlabValueError("err_mtp_needs_layer", n=n)
        self.mtp = model.mtp
        self.num_speculative_tokens = num_speculative_tokens
        self.builder = builder
        self.block_size = block_size
        self.max_model_len = max_model_len

    @torch.no_grad()
    def propose(
        self,
        rows: Sequence[DraftRow],
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        hidden_states: torch.Tensor,
        make_ctx: Callable[[MLAMetadata], Any],
        attn_metadata: MLAMetadata,
    ) -> dict[str, list[int]]:
        """Drafts for every row that ``wants_drafts``; every row writes its MTP entries."""
        ids = input_ids.clone()
        for r in rows:
            a, b = r.query_start, r.query_start + r.query_len
            ids[a : b - 1] = input_ids[a + 1 : b]
            ids[b - 1] = r.next_token
            ids[r.last_token_index] = r.next_token
        out = self.mtp(ids, positions, hidden_states, make_ctx(attn_metadata))
        want = [r for r in rows if r.wants_drafts]
        if not want:
            return {}
        last = torch.tensor([r.last_token_index for r in want], device=ids.device)
        h, pos = out[last], positions[last]
        drafts = self.mtp.compute_logits(h).argmax(-1)
        result = {r.req_id: [int(t)] for r, t in zip(want, drafts)}
        for _ in range(1, self.num_speculative_tokens):
            pos = pos + 1
            keep = [i for i, r in enumerate(want) if self._has_slot(r, int(pos[i]))]
            if not keep:
                break
            sel = torch.tensor(keep, device=ids.device)
            want, pos, prev, inp = [want[i] for i in keep], pos[sel], h[sel], drafts[sel]
            meta = self._decode_metadata(want, pos.tolist(), ids.device)
            h = self.mtp(inp, pos, self.mtp.shared_head(prev), make_ctx(meta))
            drafts = self.mtp.compute_logits(h).argmax(-1)
            for r, t in zip(want, drafts):
                result[r.req_id].append(int(t))
        return result

    def _has_slot(self, row: DraftRow, position: int) -> bool:
        return position < self.max_model_len and position // self.block_size < len(row.block_ids)

    def _decode_metadata(
        self, rows: Sequence[DraftRow], positions: list[int], device: torch.device
    ) -> MLAMetadata:
        """One query per row at ``positions`` over the MTP entries before it: a decode."""
        bs = self.block_size
        width = max(len(r.block_ids) for r in rows)
        table = torch.zeros(len(rows), width, dtype=torch.int32)
        for i, r in enumerate(rows):
            table[i, : len(r.block_ids)] = torch.tensor(r.block_ids, dtype=torch.int32)
        slots = [r.block_ids[p // bs] * bs + p % bs for r, p in zip(rows, positions)]
        cm = CommonAttentionMetadata.from_batch(
            [1] * len(rows),
            positions,
            [p + 1 for p in positions],
            table.to(device),
            torch.tensor(slots, dtype=torch.int64),
            [r.req_id for r in rows],
            [False] * len(rows),
        )
        return self.builder.build(cm)
