"""The model runner's sampling, and its side of speculative decoding: verifying a row's
drafts, keeping ``num_computed_tokens`` in step with the scheduler's rollback, and asking
the drafter for the next step's drafts. :class:`pdlab.model.runner.ModelRunner` mixes it in.

Mirrors Model Runner V2 in vLLM 0.33.0 (``vllm/v1/worker/gpu/model_runner.py``:
``sample``, ``postprocess_sampled`` with ``post_update``, the speculator's ``propose`` and
``take_draft_token_ids``; ``input_batch.py``: ``combine_sampled_and_draft_tokens`` picks
the logits rows, the last ``1 + len(drafts)`` positions of each sampling row).
"""

from __future__ import annotations

from typing import Any

import torch

from pdlab.attention.builder import MLAMetadata
from pdlab.spec_decode.mtp import DraftRow, MTPProposer
from pdlab.spec_decode.rejection_sampler import gather_draft_sampled, rejection_sample_greedy


class SpecDecodeMixin:
    """Needs ``model``, ``requests``, ``connector_worker``, ``drafter``, ``emit``,
    ``keep_logits``, ``logits``, ``_drafts``, ``_draft_token_ids`` and ``_ctx``."""

    model: Any
    requests: dict[str, Any]
    connector_worker: Any
    drafter: Any  # MTPProposer, NgramProposer or None
    emit: Any
    keep_logits: bool
    logits: dict[str, list[torch.Tensor]]
    _drafts: dict[str, list[int]]
    _draft_token_ids: Any
    _ctx: Any

    def take_draft_token_ids(self) -> Any:
        """The drafts proposed in the last step, for the scheduler's
        ``update_draft_token_ids`` (None when nothing was drafted)."""
        out, self._draft_token_ids = self._draft_token_ids, None
        return out

    def _sample_and_draft(
        self,
        states: list[Any],
        q_lens: list[int],
        computed: list[int],
        num_drafts: list[int],
        spec: dict[str, list[int]],
        qsl: list[int],
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        hidden: torch.Tensor,
        meta: MLAMetadata,
    ) -> dict[str, list[int]]:
        """After the target's forward: each row's new tokens, its ``num_computed_tokens``
        and, with a drafter, the drafts for its next step."""
        device = hidden.device
        # Sample only where every known token is now computed; a row with drafts is
        # verified at each of its last d + 1 positions (the target's logits there).
        sampled: dict[str, list[int]] = {}
        rows, logit_rows = [], []
        for i, (s, n, c, d) in enumerate(zip(states, q_lens, computed, num_drafts)):
            if c + n - d >= s.num_tokens:
                rows.append(i)
                logit_rows.extend(range(qsl[i + 1] - d - 1, qsl[i + 1]))
        logits = None
        if logit_rows:
            logits = self.model.compute_logits(hidden[torch.tensor(logit_rows, device=device)])
        at, draft_rows = 0, []
        for i, (s, n, c, d) in enumerate(zip(states, q_lens, computed, num_drafts)):
            rejected, next_token = 0, None
            if rows and i == rows[0]:
                rows.pop(0)
                assert logits is not None
                toks = self._sample_row(s, c, spec.get(s.req_id, []), logits[at : at + d + 1])
                conn = self.connector_worker
                if conn is not None and conn.wants_hidden_state(s.req_id):
                    conn.save_hidden_state(s.req_id, hidden[qsl[i + 1] - d - 1])
                at += d + 1
                sampled[s.req_id], rejected, next_token = toks, d + 1 - len(toks), toks[-1]
            elif c + n < s.num_tokens:
                next_token = s.all_token_ids[c + n]  # a prompt chunk: the next prompt token
            # V2's post_update: computed += query_len - num_rejected (the scheduler rolls
            # its own count back the same way).
            s.num_computed_tokens = c + n - rejected
            if next_token is not None:
                draft_rows.append(
                    DraftRow(s.req_id, qsl[i], n, rejected, next_token, s.req_id in sampled,
                             s.block_ids)
                )  # fmt: skip
        if self.drafter is not None and draft_rows:
            drafts = self.drafter.propose(draft_rows, input_ids, positions, hidden, self._ctx, meta)
            for r in draft_rows:
                self.requests[r.req_id].draft_token_ids = drafts.get(r.req_id, [])
                if r.req_id in drafts:
                    self._emit_draft(r, drafts[r.req_id], int(positions[r.last_token_index]))
            self._drafts.update(drafts)
        return sampled

    def _sample_row(self, s: Any, c: int, drafts: list[int], logits: torch.Tensor) -> list[int]:
        """The row's new tokens: one sample without drafts; greedy verification with."""
        if drafts:
            verified = gather_draft_sampled(drafts, c, s.prefill_len)
            target = [int(t) for t in logits.argmax(-1)]
            toks = rejection_sample_greedy(target, verified)
            if self.emit is not None:
                self.emit(
                    "verify",
                    req_id=s.req_id,
                    draft_token_ids=verified,
                    num_placeholders=verified.count(-1),
                    target_token_ids=target,
                    sampled_token_ids=toks,
                    num_accepted=len(toks) - 1,
                    num_rejected=len(drafts) + 1 - len(toks),
                )
        else:
            toks = [self._sample(s, logits[0])]
        for j, tok in enumerate(toks):
            row = logits[j]
            if self.keep_logits:
                self.logits.setdefault(s.req_id, []).append(row.detach().clone())
            s.output_token_ids.append(tok)
            if self.emit is not None:
                self.emit(
                    "sample",
                    req_id=s.req_id,
                    token=tok,
                    position=s.num_tokens - 1,
                    logit=float(row[tok]),
                )
        return toks

    def _emit_draft(self, r: DraftRow, drafts: list[int], position: int) -> None:
        if self.emit is not None:
            self.emit(
                "draft",
                req_id=r.req_id,
                method=self.drafter.method if self.drafter else "",
                hidden_position=position if isinstance(self.drafter, MTPProposer) else -1,
                next_token=r.next_token,
                draft_token_ids=list(drafts),
            )

    @staticmethod
    def _sample(s: Any, logits: torch.Tensor) -> int:
        t = float(getattr(s.sampling_params, "temperature", 0.0) or 0.0)
        if t == 0.0:
            return int(torch.argmax(logits))
        # Sample on the CPU, where the request's seeded generator lives.
        probs = torch.softmax(logits.float().cpu() / t, dim=-1)
        return int(torch.multinomial(probs, 1, generator=s.generator))
