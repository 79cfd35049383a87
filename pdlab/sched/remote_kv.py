"""The scheduler's side of KV transfer (P/D): K/V arriving from another instance, failed
receives, finished sends and receives, and the blocks in-flight prefills keep back.

These are methods of :class:`pdlab.sched.scheduler.Scheduler`, kept in their own file.
Upstream they are part of ``vllm/v1/core/sched/scheduler.py`` under the same names
(``_handle_blocked_waiting_request``, ``_update_waiting_for_remote_kv``,
``_update_from_kv_xfer_finished``, ``_connector_finished``,
``_inflight_prefill_reserved_blocks``, ``_holds_kv_blocks``); ``_handle_failed_recvs``
condenses ``_handle_failed_recving`` and ``_handle_invalid_blocks``.

Waiting requests that already hold blocks (D side: K/V still arriving, or arrived and
not yet scheduled) wait in ``skipped_waiting`` (upstream's ``kv_holding_waiting``), which
is served before ``waiting``. Letting newer or preempted requests overtake them could
starve everyone: a request that needs the blocks they hold would preempt itself forever.
An asynchronous KV load is admitted only if its blocks fit beside what the prefills in
flight still need (``_inflight_prefill_reserved_blocks``). A failed load follows
``KVTransferConfig.kv_load_failure_policy``: ``"fail"`` (the default) ends the request
with ``FINISHED_ERROR``, ``"recompute"`` computes the missing tokens locally.
"""

from __future__ import annotations

from typing import Any

from pdlab.math_utils import cdiv
from pdlab.request import Request, RequestStatus
from pdlab.sched.output import EngineCoreOutput, KVConnectorOutput


class RemoteKVMixin:
    """The KV-transfer methods of ``Scheduler``; they use its state, set in its
    ``__init__``."""

    # ---- admission ---------------------------------------------------------------------
    @staticmethod
    def _holds_kv_blocks(request: Request) -> bool:
        """Whether a waiting request holds blocks (vLLM's ``_holds_kv_blocks``): K/V
        arriving, or arrived and not yet scheduled."""
        return (
            request.num_computed_tokens > 0
            or request.status == RequestStatus.WAITING_FOR_REMOTE_KVS
        )

    def _request_remaining_blocks(self, request: Request) -> int:
        """Blocks ``request`` still lacks to hold its whole sequence (and, under
        speculative decoding, one verifying step past it, as upstream counts)."""
        num_tokens = min(request.num_tokens, self.max_model_len)
        if self.num_spec_tokens:
            num_tokens += 1 + self.num_spec_tokens + self.num_lookahead_tokens
        return self.kv_cache_manager.get_num_blocks_to_allocate(request.request_id, num_tokens)

    def _inflight_prefill_reserved_blocks(self) -> int:
        """Blocks the prefills in flight still need to finish (their reservation)."""
        return sum(self._request_remaining_blocks(r) for r in self._inflight_prefills)

    def _handle_blocked_waiting_request(self, request: Request) -> bool:
        """Whether the waiting ``request`` may be scheduled now. One whose K/V are still
        arriving is passed over; one whose K/V arrived goes back to ``WAITING`` (or
        ``PREEMPTED``, if it was preempted before)."""
        if request.status != RequestStatus.WAITING_FOR_REMOTE_KVS:
            return True
        if not self._update_waiting_for_remote_kv(request):
            return False
        request.status = (
            RequestStatus.PREEMPTED if request.num_preemptions else RequestStatus.WAITING
        )
        return True

    def _start_async_kv_load(
        self,
        request: Request,
        num_computed_tokens: int,
        num_external_tokens: int,
        num_local_tokens: int,
    ) -> None:
        """The request was given its blocks and now waits for its K/V to arrive."""
        # As vLLM 0.33.0: while the K/V arrive the request already counts them as
        # computed (local hit + external tokens); a failed load resets the count,
        # and _update_waiting_for_remote_kv caches the blocks once they hold data.
        rid = request.request_id
        request.status = RequestStatus.WAITING_FOR_REMOTE_KVS
        request.num_computed_tokens = num_computed_tokens
        request.num_external_computed_tokens = num_external_tokens
        self._inflight_prefills.add(request)
        self._emit(
            "waiting_for_remote_kvs",
            req_id=rid,
            num_external_tokens=num_external_tokens,
            num_local_tokens=num_local_tokens,
            num_computed_tokens=num_computed_tokens,
            block_ids=self.kv_cache_manager.get_block_ids(rid),
        )

    def _update_waiting_for_remote_kv(self, request: Request) -> bool:
        """D side: if the worker reported the request's K/V received, make it schedulable.
        Returns whether it is ready.

        While the K/V arrive, ``num_computed_tokens`` already counts them (local hit plus
        external tokens, ``N`` for a whole prompt), as in vLLM 0.33.0. Once they have
        arrived the blocks are cached (hashed), only now that they hold data, and then,
        when the count equals ``num_tokens``, one is subtracted. The transfer brought each
        layer's keys and values for every prompt token, but not the final hidden state of
        the last one, and the logits for the first output token are computed from that
        hidden state. So the last prompt token is scheduled again: a one-token step over
        ``N - 1`` cached tokens, which rewrites that token's K/V (equal up to rounding) and yields
        the logits.

        After a failed load (``kv_load_failure_policy="recompute"``) the count was already
        cut to the tokens before the first failed block: those blocks are cached, or, if
        none is left, all blocks are freed, and the rest is computed locally.
        """
        rid = request.request_id
        if rid not in self.finished_recving_kv_req_ids:
            return False
        self.finished_recving_kv_req_ids.remove(rid)
        block_ids = self.kv_cache_manager.get_block_ids(rid)
        if rid in self.failed_recving_kv_req_ids:
            self.failed_recving_kv_req_ids.remove(rid)
            if request.num_computed_tokens:
                self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)
            else:
                self._free_kv(request)
            self._emit(
                "remote_kv_failed",
                req_id=rid,
                num_computed_tokens=request.num_computed_tokens,
                num_tokens=request.num_tokens,
                block_ids=block_ids,
            )
        else:
            before_adjust = request.num_computed_tokens
            self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)
            self._emit(
                "remote_kv_ready",
                req_id=rid,
                num_computed_tokens_before_adjust=before_adjust,
                num_computed_tokens=before_adjust - (before_adjust == request.num_tokens),
                num_tokens=request.num_tokens,
                num_prompt_tokens=request.num_prompt_tokens,
                block_ids=block_ids,
            )
        if request.num_computed_tokens == request.num_tokens:
            request.num_computed_tokens = request.num_tokens - 1
        return True

    # ---- a step's results --------------------------------------------------------------
    def _handle_failed_recvs(self, kv_out: KVConnectorOutput) -> set[str]:
        """Apply failed asynchronous receives (vLLM's ``_handle_failed_recving`` and the
        async half of ``_handle_invalid_blocks``): a request whose whole receive failed
        keeps no token under "recompute" (under "fail" its count is left as it was, as
        upstream leaves it); one whose blocks partly failed keeps the tokens before the
        first failed block, under either policy. Under the "recompute" policy they are
        marked for local recompute and none is returned; under "fail" nothing is marked
        and the affected ids are returned, to be finished with an error. pdlab's
        connectors report failures of asynchronous loads only."""
        affected: set[str] = set()
        for rid in kv_out.failed_recving:
            request = self.requests.get(rid)
            if request is not None and request.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                affected.add(rid)
                if self.recompute_kv_load_failures:
                    request.num_computed_tokens = 0
                    self.failed_recving_kv_req_ids.add(rid)
        if kv_out.invalid_block_ids:
            for request in self.skipped_waiting:
                if request.status != RequestStatus.WAITING_FOR_REMOTE_KVS:
                    continue
                rid = request.request_id
                block_ids = self.kv_cache_manager.get_block_ids(rid)
                num_blocks = cdiv(request.num_computed_tokens, self.block_size)
                for i, block_id in enumerate(block_ids[:num_blocks]):
                    if block_id in kv_out.invalid_block_ids:
                        affected.add(rid)
                        # Trimmed to the valid prefix under either policy, as vLLM's
                        # _update_requests_with_invalid_blocks does before "fail" ends it.
                        request.num_computed_tokens = i * self.block_size
                        if self.recompute_kv_load_failures:
                            self.failed_recving_kv_req_ids.add(rid)
                        break
        return set() if self.recompute_kv_load_failures else affected

    def _finish_failed_kv_loads(self, req_ids: set[str]) -> list[EngineCoreOutput]:
        """``kv_load_failure_policy="fail"``: the requests whose load failed end with an
        error. Their blocks are freed later, once the worker has reported the receive
        over (``_update_from_kv_xfer_finished``)."""
        failed = {rid: self.requests[rid] for rid in req_ids}
        return [
            EngineCoreOutput(
                req_id=rid,
                new_token_ids=[],
                finish_reason=failed[rid].get_finished_reason(),
                num_cached_tokens=failed[rid].num_cached_tokens,
            )
            for rid in self.finish_requests(failed, RequestStatus.FINISHED_ERROR)
        ]

    def _update_from_kv_xfer_finished(self, kv_out: KVConnectorOutput) -> None:
        """Receives done: the request becomes schedulable (or, if it was aborted meanwhile,
        its blocks are freed). Sends done: P frees the blocks it held for D."""
        for rid in set(kv_out.finished_recving or ()) | kv_out.failed_recving:
            request = self.requests.get(rid)
            if request is None:
                continue
            if request.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                self.finished_recving_kv_req_ids.add(rid)
            elif request.is_finished():
                self._free_blocks(request)
        for rid in kv_out.finished_sending or ():
            request = self.requests.get(rid)
            if request is not None and request.is_finished():
                self._free_blocks(request)

    def _check_landed_kv(self, kv_out: KVConnectorOutput) -> list[EngineCoreOutput]:
        """D side, for each receive that landed whole: the invariant, then the first token.

        The tokens the scheduler counts as loaded (``num_external_computed_tokens``, set
        when the load was admitted) must be the tokens the worker wrote: LMCache and vLLM
        have shipped the N-1 against N mismatch, whose first token then differed from a
        colocated run's. A mismatch is named in one line and ends the request with an
        error; its blocks are freed once the receive is reported over.

        Then, when a first output token came with the K/V (P's, or the logits of P's
        hidden state, ``pdlab/disagg/designs.py``), it becomes the request's first output:
        the request now has ``N + 1`` tokens with ``N`` computed, so nothing is subtracted
        and its first step decodes that token."""
        outputs: list[EngineCoreOutput] = []
        landed = set(kv_out.finished_recving or ()) - kv_out.failed_recving
        for rid in sorted(landed):
            request = self.requests.get(rid)
            if request is None or request.status != RequestStatus.WAITING_FOR_REMOTE_KVS:
                continue
            counted = request.num_external_computed_tokens
            written = kv_out.num_loaded_tokens.get(rid, counted)
            if written != counted:
                local = request.num_computed_tokens - counted
                why = (
                    f"request {rid!r}: the scheduler counts {counted} tokens loaded but the "
                    f"worker wrote {written} (after {local} cached locally); expected equal, "
                    "or D's first token would not follow from the right context"
                )
                self._emit(
                    "kv_load_mismatch",
                    req_id=rid,
                    num_counted_tokens=counted,
                    num_written_tokens=written,
                    num_local_tokens=local,
                    error=why,
                )
                self.finish_requests(rid, RequestStatus.FINISHED_ERROR)
                outputs.append(EngineCoreOutput(rid, [], "error", error=why))
                continue
            tokens = kv_out.first_token_ids.get(rid)
            if not tokens:
                continue
            new, stop = self._update_request_with_output(request, list(tokens))
            reason = None
            if stop:
                status, request.status = request.status, RequestStatus.WAITING_FOR_REMOTE_KVS
                self.finish_requests(rid, status)
                reason = request.get_finished_reason()
            outputs.append(EngineCoreOutput(rid, new, reason, None, request.num_cached_tokens))
        return outputs

    # ---- a request's end ---------------------------------------------------------------
    def _connector_finished(self, request: Request) -> tuple[bool, dict[str, Any] | None]:
        """Tell the connector the request finished, handing it the blocks that hold
        computed tokens. Returns ``(delay_free, kv_transfer_params)``: P keeps the blocks
        until D has pulled them, and its params tell D where they are."""
        if self.connector is None:
            return False, None
        # vLLM's get_block_ids_for_computed_tokens.
        num_blocks = cdiv(request.num_computed_tokens, self.block_size)
        block_ids = self.kv_cache_manager.get_block_ids(request.request_id)[:num_blocks]
        return self.connector.request_finished(request, block_ids)
