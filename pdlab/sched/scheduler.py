"""The scheduler: which requests run this step, and how many tokens each computes.

Mirrors ``vllm/v1/core/sched/scheduler.py``. ``schedule()`` is here, its waiting loop in
``waiting.py``; the rest of the class is in ``lifecycle.py`` (``add_request``,
``update_from_output``, ``finish_requests``; ``check_stop`` is in ``utils.py``, as
upstream), ``remote_kv.py`` (the KV connector's side: ``_update_waiting_for_remote_kv``,
finished transfers, failed loads) and
``spec_decode.py`` (speculative decoding: draft tokens, the ``-1`` placeholders that pad
D's first step, the rollback over rejected drafts, ``update_draft_token_ids``).

There is no prefill phase and no decode phase. A request has ``num_computed_tokens`` and
``num_tokens``; each step gives it ``num_tokens - num_computed_tokens`` new tokens, cut to
the step's token budget (``max_num_batched_tokens``) and to
``long_prefill_token_threshold`` (only when more than one request is running or waiting:
a lone request starves nobody). A long prompt is thus prefilled in chunks, a decoding
request gets one token (``1 + K`` with K drafts to verify), and D's first step after a KV
transfer gets one prompt token (padded to ``1 + K`` under speculative decoding).
Running requests go first, then waiting ones in arrival order. A waiting request is
admitted only if its whole sequence fits in the free blocks
(``scheduler_reserve_full_isl``, vLLM's default), not just its first chunk. When the pool
runs out of blocks, the most recently admitted running request is preempted: its blocks
are freed and it is recomputed later (prompt and outputs), as vLLM does.

Deliberate differences from vLLM 0.33.0, which has many features pdlab does not teach:
no structured output, encoders, LoRA, priority policy, async scheduling or pipeline
parallelism (so no output placeholders and no deferred frees), no dynamic speculative
decoding and no watermark (vLLM's default watermark is 0). Under MTP the prefix cache
keeps the trailing block of a hit, which upstream drops when a KV connector is configured
(``use_eagle_block_drop``: the drafter's KV at a block's last position depends on the next
token; without a connector upstream hashes each block with the token after it instead).
``finish_requests`` returns the ids it finished rather than the requests, and a request
admitted with nothing to compute gets a ``RuntimeError`` naming the cause where vLLM
asserts.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from pdlab.config import CacheConfig, KVTransferConfig, SchedulerConfig, SpeculativeConfig
from pdlab.kv_cache.block_pool import KVCacheBlock
from pdlab.kv_cache.manager import KVCacheManager
from pdlab.kv_transfer.base import KVConnectorBase
from pdlab.request import Request, RequestStatus
from pdlab.sched.lifecycle import RequestLifecycleMixin
from pdlab.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
from pdlab.sched.remote_kv import RemoteKVMixin
from pdlab.sched.spec_decode import SpecDecodeMixin
from pdlab.sched.waiting import WaitingLoopMixin
from pdlab.trace import EventSink


class Scheduler(RequestLifecycleMixin, RemoteKVMixin, SpecDecodeMixin, WaitingLoopMixin):
    def __init__(
        self,
        scheduler_config: SchedulerConfig,
        cache_config: CacheConfig,
        max_model_len: int,
        connector: KVConnectorBase | None = None,
        *,
        emit: EventSink | None = None,
        kv_transfer_config: KVTransferConfig | None = None,
        speculative_config: SpeculativeConfig | None = None,
    ) -> None:
        if connector is not None and not isinstance(connector, KVConnectorBase):
            raise ValueError(
                f"connector={connector!r} is invalid: expected None or a KVConnectorBase"
            )
        if kv_transfer_config is None:
            kv_transfer_config = KVTransferConfig()
        if not isinstance(kv_transfer_config, KVTransferConfig):
            raise ValueError(
                f"kv_transfer_config={kv_transfer_config!r} is invalid: "
                "expected None or a KVTransferConfig"
            )
        self.kv_transfer_config = kv_transfer_config
        self.recompute_kv_load_failures = kv_transfer_config.kv_load_failure_policy == "recompute"
        self.scheduler_config = scheduler_config
        self.cache_config = cache_config
        self.max_num_running_reqs = scheduler_config.max_num_seqs
        self.max_num_scheduled_tokens = scheduler_config.max_num_batched_tokens
        self.max_model_len = max_model_len
        # One sampled token per step keeps one position free below max_model_len.
        self.num_sampled_tokens_per_step = 1
        self.block_size = cache_config.block_size
        self.kv_cache_manager = KVCacheManager(cache_config, max_model_len)
        self._init_spec_decode(speculative_config)
        self.connector = connector
        self.emit = emit

        self.requests: dict[str, Request] = {}
        self.waiting: deque[Request] = deque()
        self.skipped_waiting: deque[Request] = deque()
        self.running: list[Request] = []
        # Finished since the last schedule(): sent to the runner so it drops their state.
        self.finished_req_ids: set[str] = set()
        # KV connector: receives reported done (or failed) by the worker.
        self.finished_recving_kv_req_ids: set[str] = set()
        self.failed_recving_kv_req_ids: set[str] = set()
        # Requests still prefilling (a chunked prefill in progress, or an asynchronous KV
        # load): what they still need is kept back when a new async load is admitted.
        self._inflight_prefills: set[Request] = set()
        self._long_prefill_token_threshold = 0  # this step's cap, set by schedule()

    # ---- one step: schedule ------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        scheduled_new_reqs: list[Request] = []
        scheduled_running_reqs: list[Request] = []
        preempted_reqs: list[Request] = []
        req_to_new_blocks: dict[str, list[KVCacheBlock]] = {}
        num_scheduled_tokens: dict[str, int] = {}
        scheduled_spec_decode_tokens: dict[str, list[int]] = {}
        # Whether a running row scheduled this step is mid-prefill (no padding then).
        prefill_scheduled = False
        token_budget = self.max_num_scheduled_tokens
        # The long-prefill cap keeps one long prompt from starving the others; with a
        # single request there is nobody to starve, so it may use the whole budget.
        num_eligible_reqs = self.get_num_unfinished_requests()
        threshold = self.scheduler_config.long_prefill_token_threshold
        self._long_prefill_token_threshold = threshold if num_eligible_reqs > 1 else 0

        # First the RUNNING requests.
        req_index = 0
        while req_index < len(self.running) and token_budget > 0:
            request = self.running[req_index]
            # Its drafts count too: they are verified by computing them.
            num_new_tokens = self._cap_new_tokens(
                request.num_tokens_with_spec - request.num_computed_tokens, token_budget
            )
            # Positions stay below max_model_len, with room for the token sampled (this
            # is what trims drafts near the end of the context).
            num_new_tokens = min(
                num_new_tokens,
                self.max_model_len - request.num_computed_tokens - self.num_sampled_tokens_per_step,
            )
            if num_new_tokens <= 0:
                # Nothing to compute this step; the requests behind it may still go on.
                req_index += 1
                continue
            while True:
                new_blocks = self.kv_cache_manager.allocate_slots(
                    request, num_new_tokens, num_lookahead_tokens=self.num_lookahead_tokens
                )
                if new_blocks is not None:
                    break
                # Out of blocks: preempt the most recently admitted running request.
                preempted_req = self.running.pop()
                self._preempt_request(preempted_req)
                preempted_reqs.append(preempted_req)
                if preempted_req is request:
                    break
            if new_blocks is None:
                break
            scheduled_running_reqs.append(request)
            prefill_scheduled |= request.is_prefill_chunk
            req_to_new_blocks[request.request_id] = new_blocks
            num_scheduled_tokens[request.request_id] = num_new_tokens
            token_budget -= num_new_tokens
            req_index += 1
            drafts = self._take_spec_tokens(request, num_new_tokens)
            if drafts:
                scheduled_spec_decode_tokens[request.request_id] = drafts

        # Then the WAITING requests, unless this step had to preempt.
        if not preempted_reqs:
            self._schedule_waiting(
                token_budget,
                scheduled_new_reqs,
                num_scheduled_tokens,
                scheduled_spec_decode_tokens,
                prefill_scheduled=prefill_scheduled,
                running_scheduled=bool(scheduled_running_reqs),
            )

        total = sum(num_scheduled_tokens.values())
        assert total <= self.max_num_scheduled_tokens
        assert len(self.running) <= self.max_num_running_reqs

        new_reqs_data = [
            NewRequestData.from_request(r, self.kv_cache_manager.get_block_ids(r.request_id))
            for r in scheduled_new_reqs
        ]
        cached_reqs_data = self._make_cached_request_data(
            scheduled_running_reqs,
            num_scheduled_tokens,
            scheduled_spec_decode_tokens,
            req_to_new_blocks,
        )
        scheduler_output = SchedulerOutput(
            scheduled_new_reqs=new_reqs_data,
            scheduled_cached_reqs=cached_reqs_data,
            num_scheduled_tokens=num_scheduled_tokens,
            total_num_scheduled_tokens=total,
            finished_req_ids=self.finished_req_ids,
            preempted_req_ids={r.request_id for r in preempted_reqs},
            scheduled_spec_decode_tokens=scheduled_spec_decode_tokens,
        )
        if self.connector is not None:
            scheduler_output.kv_connector_metadata = self.connector.build_connector_meta(
                scheduler_output
            )
        self._update_after_schedule(scheduler_output)
        return scheduler_output

    def _cap_new_tokens(self, num_new_tokens: int, token_budget: int) -> int:
        threshold = self._long_prefill_token_threshold
        if 0 < threshold < num_new_tokens:
            num_new_tokens = threshold
        return min(num_new_tokens, token_budget)

    def _preempt_request(self, request: Request) -> None:
        """Free a running request's blocks and put it back at the head of the queue. Its
        output tokens are kept: it will be recomputed (prompt and outputs) when it
        resumes, reusing whatever of its blocks is still in the prefix cache."""
        assert request.status == RequestStatus.RUNNING
        self._emit(
            "preempt",
            req_id=request.request_id,
            num_computed_tokens=request.num_computed_tokens,
            num_output_tokens=request.num_output_tokens,
            num_preemptions=request.num_preemptions + 1,
        )
        self._free_kv(request)
        self._inflight_prefills.discard(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.spec_token_ids = []  # proposed for a step that will not come
        request.num_preemptions += 1
        self.waiting.appendleft(request)

    def _update_after_schedule(self, scheduler_output: SchedulerOutput) -> None:
        # Advance num_computed_tokens now, so a chunked prefill can be scheduled again next
        # step; the output above still carries the values from before this step.
        # Scheduled drafts are counted as computed too; update_from_output takes back the
        # rejected ones.
        for rid, n in scheduler_output.num_scheduled_tokens.items():
            request = self.requests[rid]
            request.num_computed_tokens += n
            request.is_prefill_chunk = request.num_computed_tokens < request.num_tokens
            if not request.is_prefill_chunk:
                self._inflight_prefills.discard(request)  # its prefill is complete
        self.finished_req_ids = set()

    def _make_cached_request_data(
        self,
        running_reqs: list[Request],
        num_scheduled_tokens: dict[str, int],
        spec_decode_tokens: dict[str, list[int]],
        req_to_new_blocks: dict[str, list[KVCacheBlock]],
    ) -> CachedRequestData:
        """The running requests as deltas: the tokens (drafts excluded) and blocks added
        this step."""
        cached = CachedRequestData()
        for r in running_reqs:
            rid, c = r.request_id, r.num_computed_tokens
            n = num_scheduled_tokens[rid] - len(spec_decode_tokens.get(rid, ()))
            cached.req_ids.append(rid)
            cached.resumed_from_preemption.append(False)
            cached.new_token_ids.append(r.all_token_ids[c : c + n])
            cached.new_block_ids.append([b.block_id for b in req_to_new_blocks[rid]])
            cached.num_computed_tokens.append(c)
        return cached

    def _emit(self, kind: str, **fields: Any) -> None:
        if self.emit is not None:
            self.emit(kind, **fields)
