"""The second loop of ``schedule()``: waiting requests admitted in arrival order.

A method of :class:`pdlab.sched.scheduler.Scheduler`, kept in its own file; upstream it is
inline in ``schedule`` (``vllm/v1/core/sched/scheduler.py``, "Next, schedule the WAITING
requests"). A request is admitted when the budget, a running slot and its blocks allow:
its local prefix-cache hit and the KV connector's external tokens count as computed, an
asynchronous KV load only holds blocks (the request waits for its K/V), and under
speculative decoding a row with one new token over computed context is padded to ``1 + K``
with ``-1`` placeholder drafts (``pdlab/sched/spec_decode.py``).
"""

from __future__ import annotations

from pdlab.request import Request, RequestStatus
from pdlab.sched.spec_decode import PLACEHOLDER_TOKEN_ID


class WaitingLoopMixin:
    """The waiting loop of ``Scheduler.schedule``; it uses the scheduler's state, set in
    its ``__init__``."""

    def _schedule_waiting(
        self,
        token_budget: int,
        scheduled_new_reqs: list[Request],
        num_scheduled_tokens: dict[str, int],
        scheduled_spec_decode_tokens: dict[str, list[int]],
        *,
        prefill_scheduled: bool,
        running_scheduled: bool,
    ) -> None:
        """The second loop of upstream's ``schedule()``: admit waiting requests in arrival
        order while the budget, the running slots and the blocks last. Under speculative
        decoding a row with one new token is padded to ``1 + K`` (``_pad_spec_decode``):
        ``prefill_scheduled`` and ``running_scheduled`` say what the running loop
        scheduled."""
        # Requests passed over this step keep their place at the head of their queue.
        skipped: list[Request] = []
        while token_budget > 0 and len(self.running) < self.max_num_running_reqs:
            queue = self.skipped_waiting or self.waiting
            if not queue:
                break
            request = queue[0]
            rid = request.request_id

            # P/D: a request whose K/V are still arriving is passed over.
            if not self._handle_blocked_waiting_request(request):
                skipped.append(queue.popleft())
                continue

            num_external_tokens, load_kv_async = 0, False
            did_prefix_cache_lookup = request.num_computed_tokens == 0
            if did_prefix_cache_lookup:
                new_computed_blocks, num_local_tokens = self.kv_cache_manager.get_computed_blocks(
                    request
                )
                if self.connector is not None:
                    ext, load_kv_async = self.connector.get_num_new_matched_tokens(
                        request, num_local_tokens
                    )
                    if ext is None:
                        skipped.append(queue.popleft())
                        continue
                    num_external_tokens = ext
                    load_kv_async = load_kv_async and ext > 0
                num_computed_tokens = num_local_tokens + num_external_tokens
            else:
                # The K/V arrived (D side): the request resumes from there.
                new_computed_blocks, num_local_tokens = [], 0
                num_computed_tokens = request.num_computed_tokens

            reserved_blocks = 0
            pad_spec_decode = False
            if load_kv_async:
                num_new_tokens = 0
                # The load holds its blocks for the whole transfer and cannot be
                # preempted meanwhile: admit it only if it fits beside what the prefills
                # already in flight still need (and one verifying step of its own), or
                # they could deadlock on each other.
                reserved_blocks = (
                    self._inflight_prefill_reserved_blocks() + self._spec_decode_step_blocks
                )
            else:
                num_new_tokens = request.num_tokens - num_computed_tokens
                padded = self._pad_spec_decode(
                    num_new_tokens,
                    num_computed_tokens,
                    token_budget,
                    prefill_scheduled,
                    running_scheduled,
                )
                if padded is None:
                    break  # the padded row does not fit: it waits, and so does the rest
                pad_spec_decode = padded != num_new_tokens
                num_new_tokens = self._cap_new_tokens(padded, token_budget)
                if num_new_tokens <= 0 and not did_prefix_cache_lookup:
                    raise RuntimeError(
                        f"request {rid!r} resumed after its KV transfer with "
                        f"num_computed_tokens={num_computed_tokens} = num_tokens: nothing is "
                        "left to run, yet the first output token needs the hidden state of "
                        "the last prompt position, which KV transfer does not carry; "
                        "_update_waiting_for_remote_kv must leave num_tokens - 1 computed"
                    )
                if num_new_tokens <= 0:
                    raise RuntimeError(
                        f"connector returned num_external_tokens={num_external_tokens} for "
                        f"request {rid!r} with {request.num_tokens} tokens and "
                        f"{num_local_tokens} cached locally: a synchronous load must leave "
                        "the last token to compute"
                    )

            new_blocks = self.kv_cache_manager.allocate_slots(
                request,
                num_new_tokens,
                num_new_computed_tokens=num_local_tokens,
                new_computed_blocks=new_computed_blocks,
                # An async load runs no forward yet: its lookahead slots come later.
                num_lookahead_tokens=0 if load_kv_async else self.num_lookahead_tokens,
                num_external_computed_tokens=num_external_tokens,
                delay_cache_blocks=load_kv_async,
                full_sequence_must_fit=self.scheduler_config.scheduler_reserve_full_isl,
                reserved_blocks=reserved_blocks,
            )
            if new_blocks is None:
                break  # not enough blocks: it waits, and so does everything behind it

            if self.connector is not None:
                self.connector.update_state_after_alloc(
                    request, self.kv_cache_manager.get_blocks(rid), num_external_tokens
                )
            queue.popleft()
            if num_local_tokens:
                self._emit(
                    "prefix_hit",
                    req_id=rid,
                    num_hit_tokens=num_local_tokens,
                    num_tokens=request.num_tokens,
                    block_ids=[b.block_id for b in new_computed_blocks],
                )
            if did_prefix_cache_lookup:
                self.kv_cache_manager.record_prefix_cache_stats(request, num_local_tokens)

            if load_kv_async:
                self._start_async_kv_load(
                    request, num_computed_tokens, num_external_tokens, num_local_tokens
                )
                skipped.append(request)
                continue

            resumed = request.status == RequestStatus.PREEMPTED
            self.running.append(request)
            scheduled_new_reqs.append(request)
            num_scheduled_tokens[rid] = num_new_tokens
            token_budget -= num_new_tokens
            spec_token_ids: list[int] = []
            if pad_spec_decode:
                spec_token_ids = [PLACEHOLDER_TOKEN_ID] * self.num_spec_tokens
                scheduled_spec_decode_tokens[rid] = spec_token_ids
            request.status = RequestStatus.RUNNING
            request.num_computed_tokens = num_computed_tokens
            if num_external_tokens:
                request.num_external_computed_tokens = num_external_tokens
            if request.num_cached_tokens < 0:
                request.num_cached_tokens = num_computed_tokens
            if num_computed_tokens + num_new_tokens < request.num_tokens:
                self._inflight_prefills.add(request)  # more chunks to come
            self._emit(
                "admit",
                req_id=rid,
                num_computed_tokens=num_computed_tokens,
                num_cached_tokens=request.num_cached_tokens,
                num_new_tokens=num_new_tokens,
                spec_token_ids=list(spec_token_ids),
                resumed=resumed,
                num_prompt_tokens=request.num_prompt_tokens,
                num_tokens=request.num_tokens,
                block_ids=self.kv_cache_manager.get_block_ids(rid),
            )
        for request in reversed(skipped):
            queue = self.skipped_waiting if self._holds_kv_blocks(request) else self.waiting
            queue.appendleft(request)
