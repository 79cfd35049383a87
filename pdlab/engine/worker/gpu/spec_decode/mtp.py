"""The MTP proposer: DeepSeek's multi-token-prediction layer drafts K tokens per request
from the target model's hidden states, right after the target's step.

Mirrors ``MTPSpeculator`` (``vllm/v1/worker/gpu/spec_decode/mtp/speculator.py``), which is
``TargetDependentARSpeculator.propose`` (``.../target_dependent_ar/speculator.py``) in
vLLM 0.33.0's Model Runner V2:

1. **The draft prefill** runs the MTP layer over the target's batch as it is (same
   positions, metadata and slots; its KV-cache entry is layer ``num_hidden_layers``): at
   position ``p`` its input is token ``p + 1`` (``prepare_prefill_inputs``) and the
   target's output ``h[p]``. At a row's last valid position (``last_token_index``) the
   next token is the one just sampled, or, for a prompt chunk, the next prompt token; the
   output there gives draft 1. Rejected positions keep the target's shape (upstream: "to
   avoid CPU-GPU synchronization"); a later step rewrites their entries.
2. **The draft decode steps** (``_multi_step_decode``), K - 1 of them: each feeds the draft
   just proposed, one position further on, with ``shared_head(output)`` of the step before
   as its previous hidden state, one query per request; each gives the next draft.

**More than one MTP module** (``SpeculativeConfig.use_multi_module_mtp``) follows
``MultiModuleMTPSpeculator`` (``.../multi_module_mtp/speculator.py``): draft step ``j`` runs
module ``j`` (upstream's ``spec_step_idx % num_mtp_layers``; K above the module count is
refused, K = 1 is the path above). Every step runs over the row's window, none further on:
module ``j`` at position ``p`` reads token ``p + 1 + j`` (drafts in the last places, or at a
prompt chunk's end the next prompt tokens, ``DraftRow.lookahead``) and ``shared_head`` of
module ``j - 1``'s output at ``p``. After ``r`` rejections the later modules' rows at the
``r - 1`` positions before the window were built on rejected drafts, so the window starts
that much earlier (upstream's re-prefill), from the inputs kept of the request's last step;
with none kept (D's first step) nothing is rebuilt, as 0.33.0's ``_prefill_backoff``
docstring says.

On D's first step the drafter is handed ``h[N - 1]`` (why D recomputes it: ``pdlab tour
--chapter 3``). Drafts are greedy (argmax), as upstream's ``sample_draft`` at temperature 0.
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
    # The known tokens after ``next_token`` for a prompt chunk (multi-module MTP swaps them
    # in for drafts, upstream's ``draft_input_id_overrides``); empty when it sampled.
    lookahead: tuple[int, ...] = ()

    @property
    def last_token_index(self) -> int:
        return self.query_start + self.query_len - self.num_rejected - 1


class MTPProposer:
    """Drafts with ``model.mtp`` (``DeepSeekMTP`` in
    ``pdlab/engine/model_executor/models/deepseek_mtp.py``)."""

    method = "mtp"

    def __init__(
        self, model: Any, num_speculative_tokens: int,
        builder: MLAMetadataBuilder, block_size: int, max_model_len: int,
    ) -> None:  # fmt: skip
        if getattr(model, "mtp", None) is None:
            n = getattr(model.config, "num_nextn_predict_layers", 0)
            raise PdlabValueError("err_mtp_needs_layer", n=n)
        self.mtp = model.mtp
        self.modules = list(getattr(model, "mtp_layers", [model.mtp]))
        if 1 < len(self.modules) < num_speculative_tokens:
            raise PdlabValueError(
                "err_mtp_k_over_modules", k=num_speculative_tokens, n=len(self.modules)
            )
        # req_id -> (first position, module-0 input ids, hidden states) of its last window's
        # last K - 1 positions: what a rebuild after rejections reads (multi-module only).
        self._kept: dict[str, tuple[int, list[int], torch.Tensor]] = {}
        self.num_speculative_tokens = num_speculative_tokens
        self.builder, self.block_size, self.max_model_len = builder, block_size, max_model_len

    @torch.no_grad()
    def propose(
        self, rows: Sequence[DraftRow], input_ids: torch.Tensor,
        positions: torch.Tensor, hidden_states: torch.Tensor,
        make_ctx: Callable[[MLAMetadata], Any], attn_metadata: MLAMetadata,
    ) -> dict[str, list[int]]:  # fmt: skip
        """Drafts for every row that ``wants_drafts``; every row writes its MTP entries."""
        if len(self.modules) > 1 and self.num_speculative_tokens > 1:
            return self._propose_modules(rows, input_ids, positions, hidden_states, make_ctx)
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
            meta = self._span_metadata(want, pos.tolist(), [1] * len(want), ids.device)
            h = self.mtp(inp, pos, self.mtp.shared_head(prev), make_ctx(meta))
            drafts = self.mtp.compute_logits(h).argmax(-1)
            for r, t in zip(want, drafts):
                result[r.req_id].append(int(t))
        return result

    def _propose_modules(
        self, rows: Sequence[DraftRow], input_ids: torch.Tensor,
        positions: torch.Tensor, hidden_states: torch.Tensor,
        make_ctx: Callable[[MLAMetadata], Any],
    ) -> dict[str, list[int]]:  # fmt: skip
        """Multi-module MTP (the module docstring): each row's window, module ``j`` for
        draft ``j + 1``, all rows in one batch per module, shortest windows first (the
        decodes before the prefills, as the metadata builder's split expects)."""
        k, keep = self.num_speculative_tokens, self.num_speculative_tokens - 1
        wins = []  # (row, first position, module-0 input ids, hidden states)
        for r in rows:
            a, last = r.query_start, r.last_token_index
            first = int(positions[a])
            toks = [*input_ids[a + 1 : last + 1].tolist(), r.next_token]
            hid = hidden_states[a : last + 1]
            back, kept = max(0, r.num_rejected - 1), self._kept.get(r.req_id)
            if back and kept and kept[0] <= first - back < first <= kept[0] + len(kept[1]):
                i = first - back - kept[0]
                toks = kept[1][i : i + back] + toks
                hid = torch.cat([kept[2][i : i + back], hid])
                first -= back
            wins.append((r, first, toks, hid))
            n = len(toks)
            self._kept[r.req_id] = (first + max(0, n - keep), toks[-keep:], hid[-keep:].clone())
        self._kept = {r.req_id: self._kept[r.req_id] for r in rows}
        wins.sort(key=lambda w: len(w[2]))
        firsts, lens = [w[1] for w in wins], [len(w[2]) for w in wins]
        meta = self._span_metadata([w[0] for w in wins], firsts, lens, input_ids.device)
        seqs = [list(w[2]) for w in wins]
        last = torch.tensor(lens, device=input_ids.device).cumsum(0) - 1
        pos = torch.cat([torch.arange(f, f + n) for (_, f, _, _), n in zip(wins, lens)])
        prev = torch.cat([w[3] for w in wins])
        drafts: dict[str, list[int]] = {w[0].req_id: [] for w in wins}
        for j in range(k):
            mtp = self.modules[j % len(self.modules)]
            inp = torch.tensor([t for q, n in zip(seqs, lens) for t in q[j : j + n]])
            out = mtp(inp.to(input_ids.device), pos.to(input_ids.device), prev, make_ctx(meta))
            tokens = mtp.compute_logits(out[last]).argmax(-1).tolist()
            for (r, _, _, _), q, t in zip(wins, seqs, tokens):
                drafts[r.req_id].append(t)
                q.append(r.lookahead[j] if j < len(r.lookahead) else t)
            prev = mtp.shared_head(out)
        return {r.req_id: drafts[r.req_id] for r in rows if r.wants_drafts}

    def _has_slot(self, row: DraftRow, position: int) -> bool:
        return position < self.max_model_len and position // self.block_size < len(row.block_ids)

    def _span_metadata(
        self, rows: Sequence[DraftRow],
        firsts: Sequence[int], lens: Sequence[int], device: torch.device,
    ) -> MLAMetadata:  # fmt: skip
        """Row ``i``'s ``lens[i]`` queries at positions ``firsts[i] ..`` over the MTP
        entries before them, through the row's block table."""
        bs = self.block_size
        width = max(len(r.block_ids) for r in rows)
        table = torch.zeros(len(rows), width, dtype=torch.int32)
        slots = []
        for i, (r, first, n) in enumerate(zip(rows, firsts, lens)):
            table[i, : len(r.block_ids)] = torch.tensor(r.block_ids, dtype=torch.int32)
            slots += [r.block_ids[p // bs] * bs + p % bs for p in range(first, first + n)]
        cm = CommonAttentionMetadata.from_batch(
            list(lens), list(firsts), [f + n for f, n in zip(firsts, lens)],
            table.to(device), torch.tensor(slots, dtype=torch.int64),
            [r.req_id for r in rows], [False] * len(rows),
        )  # fmt: skip
        return self.builder.build(cm)
