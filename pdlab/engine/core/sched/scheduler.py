"""The scheduler: which requests run this step, and how many tokens each computes.

Mirrors ``vllm/v1/core/sched/scheduler.py`` (vLLM 0.33.0): one class, ``Scheduler``, its
methods in upstream's order and under upstream's names where upstream has them;
``_handle_failed_recvs`` condenses upstream's ``_handle_failed_recving`` and
``_handle_invalid_blocks``. ``check_stop`` is in ``utils.py`` and what the scheduler hands
out and takes in is in ``output.py``, as upstream.

There is no prefill phase and no decode phase: each step gives a request
``num_tokens - num_computed_tokens`` new tokens, cut to the step's token budget
(``max_num_batched_tokens``) and to ``long_prefill_token_threshold`` (only when more than
one request is running or waiting: a lone request starves nobody). A long prompt is thus
prefilled in chunks, a decoding request gets one token (``1 + K`` with K drafts to
verify), and D's first step after a KV transfer gets one prompt token. Running requests go
first, then waiting ones in arrival order (the waiting loop is inline in upstream's
``schedule``; here it is ``_schedule_waiting``). A waiting request is admitted only if its
whole sequence fits in the free blocks (``scheduler_reserve_full_isl``, vLLM's default).
When the pool runs out of blocks, the most recently admitted running request is
preempted and recomputed later, as vLLM does.

Remote KV (P/D): waiting requests that already hold blocks (D side: K/V still arriving,
or arrived and not yet scheduled) wait in ``skipped_waiting`` (upstream's
``kv_holding_waiting``), served before ``waiting``: letting newer or preempted requests
overtake them could starve everyone, as a request that needs their blocks would preempt
itself forever. A failed load follows ``KVTransferConfig.kv_load_failure_policy``.

Speculative decoding is inline upstream (the "Speculative decode related" block of
``schedule``'s running loop, the ``pad_spec_decode`` block of its waiting loop, the
rejection count in ``update_from_output``, and ``update_draft_token_ids``); here it is a
section of its own.

Deliberate differences from vLLM 0.33.0, which has many features pdlab does not teach:
no structured output, encoders, LoRA, priority policy, async scheduling or pipeline
parallelism (so no output placeholders and no deferred frees), no dynamic speculative
decoding (``num_speculative_tokens_per_batch_size``), no grammar check of drafts and no
watermark (vLLM's default watermark is 0).
``finish_requests`` returns the ids it finished rather than the requests, and a request
admitted with nothing to compute gets a ``RuntimeError`` naming the cause where vLLM
asserts. Refused in one line when the scheduler is built: a
``long_prefill_token_threshold`` below ``1 + K`` (upstream accepts it, then fails an
assertion on the first padded row it cuts) and a ``max_num_batched_tokens`` below ``1 + K``
(upstream refuses K or less for MTP, and for n-gram accepts a budget that can never
schedule a padded row, so its waiting loop stops there every step). Drafts longer than K
are refused too. ``add_request`` also refuses a request whose last verifying step (K
drafts, and MTP's K lookahead slots) or, on D, whose receive beside one verifying step's
blocks could never fit the pool (upstream waits for ever).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from pdlab.engine.config import (
    CacheConfig,
    KVTransferConfig,
    SchedulerConfig,
    SpeculativeConfig,
    num_hash_lookahead_tokens,
)
from pdlab.engine.core.block_pool import KVCacheBlock
from pdlab.engine.core.kv_cache_manager import KVCacheManager
from pdlab.engine.core.sched.output import (
    CachedRequestData,
    DraftTokenIds,
    EngineCoreOutput,
    KVConnectorOutput,
    ModelRunnerOutput,
    NewRequestData,
    SchedulerOutput,
)
from pdlab.engine.core.sched.utils import check_stop
from pdlab.engine.distributed.kv_transfer.base import KVConnectorBase, validate_kv_transfer_params
from pdlab.engine.math_utils import cdiv
from pdlab.engine.request import Request, RequestStatus
from pdlab.engine.trace import EventSink
from pdlab.errors import PdlabError, PdlabValueError, Phrase, invalid, none_or, one_line

PLACEHOLDER_TOKEN_ID = -1  # a padded draft: never accepted


class Scheduler:
    # ---- construction: the state the sections below read and change --------------------
    def __init__(
        self, scheduler_config: SchedulerConfig, cache_config: CacheConfig, max_model_len: int,
        connector: KVConnectorBase | None = None, *, emit: EventSink | None = None,
        kv_transfer_config: KVTransferConfig | None = None,
        speculative_config: SpeculativeConfig | None = None, vocab_size: int | None = None,
    ) -> None:  # fmt: skip
        none_or("connector", connector, KVConnectorBase)
        none_or("kv_transfer_config", kv_transfer_config, KVTransferConfig)
        kv_transfer_config = kv_transfer_config or KVTransferConfig()
        self.kv_transfer_config = kv_transfer_config
        self.recompute_kv_load_failures = kv_transfer_config.kv_load_failure_policy == "recompute"
        self.scheduler_config = scheduler_config
        self.cache_config = cache_config
        self.max_num_running_reqs = scheduler_config.max_num_seqs
        self.max_num_scheduled_tokens = scheduler_config.max_num_batched_tokens
        self.max_model_len = max_model_len
        # Sampled ids are checked against it (None: only that they are ids, >= 0).
        self.vocab_size = vocab_size
        # One sampled token per step keeps one position free below max_model_len.
        self.num_sampled_tokens_per_step = 1
        self.block_size = cache_config.block_size
        self._init_spec_decode(speculative_config)
        # Under MTP: drop a hit's trailing block with a connector, else hash ahead
        # (pdlab/engine/core/kv_cache_manager.py tells why).
        self.num_hash_lookahead_tokens = num_hash_lookahead_tokens(
            speculative_config, cache_config.enable_prefix_caching, connector is not None
        )
        self.use_eagle_block_drop = (
            speculative_config is not None
            and speculative_config.use_eagle_block_drop()
            and not self.num_hash_lookahead_tokens
        )
        self.kv_cache_manager = KVCacheManager(
            cache_config, max_model_len, use_eagle=self.use_eagle_block_drop,
            num_hash_lookahead_tokens=self.num_hash_lookahead_tokens,
            num_prefill_lookahead=self.num_prefill_lookahead,
        )  # fmt: skip
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

    def _init_spec_decode(self, speculative_config: SpeculativeConfig | None) -> None:
        spec = speculative_config
        none_or("speculative_config", spec, SpeculativeConfig)
        self.speculative_config = spec
        # K, and the KV slots past the scheduled tokens that the drafter writes (MTP).
        self.num_spec_tokens = self.num_lookahead_tokens = self.num_prefill_lookahead = 0
        # What one verifying step may add to a request: kept free beside an async load.
        self._spec_decode_step_blocks = 0
        if spec is None:
            return
        k = self.num_spec_tokens = spec.num_speculative_tokens
        self.num_lookahead_tokens = spec.num_lookahead_tokens
        self.num_prefill_lookahead = spec.num_prefill_lookahead_tokens
        self._spec_decode_step_blocks = cdiv(1 + k + self.num_lookahead_tokens, self.block_size)
        # 1 + K whatever the method (the module docstring tells upstream's rule).
        budget = self.scheduler_config.max_num_batched_tokens
        if budget < 1 + k:
            raise PdlabValueError(
                "err_spec_budget", budget=budget, method=spec.method, k=k, need=1 + k
            )
        threshold = self.scheduler_config.long_prefill_token_threshold
        if 0 < threshold < 1 + k:
            raise PdlabValueError("err_spec_threshold", threshold=threshold, k=k, need=1 + k)

    # ---- one step: schedule ------------------------------------------------------------
    def _cap_new_tokens(self, num_new_tokens: int, token_budget: int) -> int:
        threshold = self._long_prefill_token_threshold
        if 0 < threshold < num_new_tokens:
            num_new_tokens = threshold
        return min(num_new_tokens, token_budget)

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
            num_new_tokens = self._reserve_prefill_lookahead(
                request, request.num_computed_tokens, num_new_tokens
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

    # ---- the waiting loop: schedule's second loop, inline upstream ---------------------
    def _schedule_waiting(
        self, token_budget: int, scheduled_new_reqs: list[Request],
        num_scheduled_tokens: dict[str, int], scheduled_spec_decode_tokens: dict[str, list[int]], *,
        prefill_scheduled: bool, running_scheduled: bool,
    ) -> None:  # fmt: skip
        """The second loop of upstream's ``schedule()``: admit waiting requests in arrival
        order while the budget, the running slots and the blocks last (the two flags, what
        the running loop scheduled, are for ``_pad_spec_decode``)."""
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
                hit = self.kv_cache_manager.get_computed_blocks(request)
                new_computed_blocks, num_local_tokens = hit
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
                    num_new_tokens, num_computed_tokens, token_budget, prefill_scheduled,
                    running_scheduled,
                )  # fmt: skip
                if padded is None:
                    break  # the padded row does not fit: it waits, and so does the rest
                pad_spec_decode = padded != num_new_tokens
                num_new_tokens = self._cap_new_tokens(padded, token_budget)
                if num_new_tokens > 0:
                    num_new_tokens = self._reserve_prefill_lookahead(
                        request, num_computed_tokens, num_new_tokens
                    )
                    if num_new_tokens == 0:
                        skipped.append(queue.popleft())  # its chunk would end too near
                        continue
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
                    "prefix_hit", req_id=rid, num_hit_tokens=num_local_tokens,
                    num_tokens=request.num_tokens,
                    block_ids=[b.block_id for b in new_computed_blocks],
                )  # fmt: skip
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
                "admit", req_id=rid, num_computed_tokens=num_computed_tokens,
                num_cached_tokens=request.num_cached_tokens, num_new_tokens=num_new_tokens,
                spec_token_ids=list(spec_token_ids), resumed=resumed,
                num_prompt_tokens=request.num_prompt_tokens, num_tokens=request.num_tokens,
                block_ids=self.kv_cache_manager.get_block_ids(rid),
            )  # fmt: skip
        for request in reversed(skipped):
            queue = self.skipped_waiting if self._holds_kv_blocks(request) else self.waiting
            queue.appendleft(request)

    # ---- preemption, and the step's output ---------------------------------------------
    def _preempt_request(self, request: Request) -> None:
        """Free a running request's blocks and put it back at the head of the queue. Its
        output tokens are kept: it will be recomputed (prompt and outputs) when it
        resumes, reusing whatever of its blocks is still in the prefix cache."""
        assert request.status == RequestStatus.RUNNING
        self._emit(
            "preempt", req_id=request.request_id, num_computed_tokens=request.num_computed_tokens,
            num_output_tokens=request.num_output_tokens,
            num_preemptions=request.num_preemptions + 1,
        )  # fmt: skip
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
        self, running_reqs: list[Request], num_scheduled_tokens: dict[str, int],
        spec_decode_tokens: dict[str, list[int]], req_to_new_blocks: dict[str, list[KVCacheBlock]],
    ) -> CachedRequestData:  # fmt: skip
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

    # ---- one step: results -------------------------------------------------------------
    def update_from_output(
        self, scheduler_output: SchedulerOutput, model_runner_output: ModelRunnerOutput
    ) -> list[EngineCoreOutput]:
        """Append sampled tokens, stop finished requests, and apply the KV connector's
        report. Returns one ``EngineCoreOutput`` per request with news."""
        active, refused = self._check_runner_output(scheduler_output, model_runner_output)
        # A row the runner answered wrongly cannot go on (schedule() already counted its
        # tokens computed): it ends with an error and gives its blocks back.
        outputs = self._finish_refused(refused)
        kv_out = model_runner_output.kv_connector_output
        failed_kv_load_req_ids = set() if kv_out is None else self._handle_failed_recvs(kv_out)

        stopped: set[Request] = set()
        for request, new_token_ids in active:
            if request.request_id in failed_kv_load_req_ids:
                continue
            # Speculative decoding: computed counted every draft; take back the rejected.
            self._roll_back_rejected(request, scheduler_output, new_token_ids)
            stop = False
            if new_token_ids:
                was_running = request.status == RequestStatus.RUNNING
                new_token_ids, stop = self._update_request_with_output(request, new_token_ids)
                if was_running and self.num_spec_tokens > 0:
                    # The accepted tokens' full blocks join the prefix cache now (before
                    # a stop frees them); allocate_slots cached only up to the known
                    # tokens, drafts excluded.
                    self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)
            kv_transfer_params = finish_reason = None
            if stop:
                finish_reason = request.get_finished_reason()
                kv_transfer_params = self._free_request(request)
                stopped.add(request)
            if new_token_ids or stop:
                outputs.append(EngineCoreOutput(
                    request.request_id, new_token_ids, finish_reason=finish_reason,
                    kv_transfer_params=kv_transfer_params,
                    num_cached_tokens=request.num_cached_tokens))  # fmt: skip
        if stopped:
            self.running = [r for r in self.running if r not in stopped]
        if failed_kv_load_req_ids and not self.recompute_kv_load_failures:
            outputs.extend(self._finish_failed_kv_loads(failed_kv_load_req_ids))
        if kv_out is not None:
            outputs.extend(self._check_landed_kv(kv_out))
            self._update_from_kv_xfer_finished(kv_out)
        return outputs

    def _check_runner_output(
        self, scheduler_output: SchedulerOutput, model_runner_output: ModelRunnerOutput
    ) -> tuple[list[tuple[Request, list[int]]], dict[str, PdlabError]]:
        """Pair each scheduled, still-running request with its sampled tokens, checking the
        runner's answer before anything changes; the rows it refuses, each with why."""
        index = model_runner_output.req_id_to_index
        sampled = model_runner_output.sampled_token_ids
        active, refused = [], {}
        for rid in scheduler_output.num_scheduled_tokens:
            request = self.requests.get(rid)
            if request is None or request.is_finished():
                continue  # aborted while the step ran
            try:
                if rid not in index:
                    raise PdlabValueError("err_runner_no_entry", req=rid)
                tokens = self._check_sampled_ids(rid, sampled[index[rid]])
                self._check_num_sampled(request, scheduler_output, tokens)
            except PdlabError as e:
                refused[rid] = e
                continue
            active.append((request, tokens))
        return active, refused

    def _check_sampled_ids(self, rid: str, tokens: Any) -> list[int]:
        """A row's sampled tokens as a list of ids inside the vocabulary."""
        ok = isinstance(tokens, (list, tuple)) and all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in tokens
        )
        if ok and (self.vocab_size is None or all(t < self.vocab_size for t in tokens)):
            return list(tokens)
        if self.vocab_size is None:
            raise PdlabValueError("err_sampled_ids", req=rid, tokens=tokens)
        raise PdlabValueError(
            "err_sampled_ids_vocab", req=rid, tokens=tokens, top=self.vocab_size - 1,
            vocab_size=self.vocab_size,
        )  # fmt: skip

    def _finish_refused(self, refused: dict[str, PdlabError]) -> list[EngineCoreOutput]:
        """End each refused row with ``FINISHED_ERROR``, its blocks freed, and say why."""
        outputs = []
        for rid in self.finish_requests(list(refused), RequestStatus.FINISHED_ERROR):
            why = one_line(refused[rid])
            self._emit("request_error", req_id=rid, error=why)
            outputs.append(EngineCoreOutput(rid, [], "error", error=why))
        return outputs

    def _update_request_with_output(
        self, request: Request, new_token_ids: list[int]
    ) -> tuple[list[int], bool]:
        """Append the sampled tokens (several after a verification), checking for a stop
        after each; tokens after a stop are dropped, and so is their computed count, so
        that ``num_computed_tokens`` still covers every token but the last."""
        for n, token_id in enumerate(new_token_ids, 1):
            request.append_output_token_ids(token_id)
            if check_stop(request, self.max_model_len):
                request.num_computed_tokens -= len(new_token_ids) - n
                return new_token_ids[:n], True
        return new_token_ids, False

    # ---- speculative decoding: drafts, the -1 padding, the rollback --------------------
    def _reserve_prefill_lookahead(
        self, request: Request, num_computed_tokens: int, num_new_tokens: int
    ) -> int:
        """Multi-module MTP: a prefill chunk either ends the prompt or leaves at least
        ``num_prefill_lookahead`` (K) tokens after it, since at a chunk's end the drafter
        reads the next K known tokens; closer to the end it would read sampled ones and
        leave them in its modules' K/V (upstream's docstring). One module: no change."""
        remaining = request.num_tokens - num_computed_tokens - num_new_tokens
        if 0 < remaining < self.num_prefill_lookahead:
            num_new_tokens -= self.num_prefill_lookahead - remaining
        return max(num_new_tokens, 0)

    def _pad_spec_decode(
        self,
        num_new_tokens: int,
        num_computed_tokens: int,
        token_budget: int,
        prefill_scheduled: bool,
        any_scheduled: bool,
    ) -> int | None:
        """How many tokens a newly admitted row gets once padded: ``num_new_tokens``
        unchanged when no padding applies, ``1 + K`` when it does, None when the padded
        row does not fit the budget (the waiting loop stops)."""
        if not (
            self.num_spec_tokens > 0
            and self.num_sampled_tokens_per_step > 0
            and num_new_tokens == 1
            and not prefill_scheduled
            and (any_scheduled or num_computed_tokens > 0)
        ):
            return num_new_tokens
        padded = 1 + self.num_spec_tokens
        # Only when the sampled token still has a position below max_model_len.
        if num_computed_tokens + padded + self.num_sampled_tokens_per_step > self.max_model_len:
            return num_new_tokens
        if padded > token_budget:
            return None  # rather not schedule than schedule unpadded
        return padded

    def _take_spec_tokens(self, request: Request, num_new_tokens: int) -> list[int] | None:
        """The drafts of a running row that fit in its ``num_new_tokens``; its
        ``spec_token_ids`` are cleared either way (new ones come after the step)."""
        if not request.spec_token_ids:
            return None
        num_spec = num_new_tokens + request.num_computed_tokens - request.num_tokens
        drafts = request.spec_token_ids[: max(num_spec, 0)]
        request.spec_token_ids = []
        return drafts or None

    def _roll_back_rejected(
        self, request: Request, scheduler_output: SchedulerOutput, new_token_ids: list[int]
    ) -> None:
        """After a verifying step: ``num_computed_tokens`` counted every scheduled draft;
        take back the ones the runner rejected."""
        drafts = scheduler_output.scheduled_spec_decode_tokens.get(request.request_id)
        if not drafts or not new_token_ids:
            return
        num_accepted = max(len(new_token_ids) - self.num_sampled_tokens_per_step, 0)
        num_rejected = len(drafts) - num_accepted
        if request.num_computed_tokens > 0:
            request.num_computed_tokens -= num_rejected
        self._emit(
            "spec_decode", req_id=request.request_id, draft_token_ids=list(drafts),
            num_draft_tokens=len(drafts), num_accepted_tokens=num_accepted,
            num_rejected_tokens=num_rejected, num_computed_tokens=request.num_computed_tokens,
        )  # fmt: skip

    def _check_num_sampled(
        self, request: Request, scheduler_output: SchedulerOutput, tokens: list[int]
    ) -> None:
        """The runner must return, per row, ``[]`` while the prompt is still being
        prefilled, else one token plus at most one per scheduled draft."""
        rid = request.request_id
        drafts = scheduler_output.scheduled_spec_decode_tokens.get(rid, ())
        complete = request.num_computed_tokens >= request.num_tokens
        if not complete and not tokens:
            return
        if complete and 1 <= len(tokens) <= 1 + len(drafts):
            return
        if not complete:
            want = Phrase("err_x_empty_prompt_incomplete")
        elif drafts:
            want = Phrase("err_x_accepted_plus_one", n=1 + len(drafts))
        else:
            want = Phrase("err_x_one_sampled")
        raise PdlabValueError(
            "err_sampled_count", req=rid, tokens=tokens, want=want,
            done=request.num_computed_tokens, total=request.num_tokens,
        )  # fmt: skip

    def update_draft_token_ids(self, draft_token_ids: DraftTokenIds) -> None:
        """Drafts the runner proposed after a step, for the next step to verify.
        Finished or unknown requests are skipped; a request that is still prefilling
        drops its drafts."""
        if not isinstance(draft_token_ids, DraftTokenIds):
            raise invalid("draft_token_ids", draft_token_ids, Phrase("err_x_a", t="DraftTokenIds"))
        k = self.num_spec_tokens
        pairs = [
            (rid, list(spec))
            for rid, spec in zip(draft_token_ids.req_ids, draft_token_ids.draft_token_ids)
        ]
        for rid, spec in pairs:  # all checked before any is taken
            if len(spec) > k or not all(
                isinstance(t, int) and not isinstance(t, bool) and t >= PLACEHOLDER_TOKEN_ID
                for t in spec
            ):
                raise PdlabValueError("err_drafts_invalid", req=rid, spec=spec, k=k)
        for rid, spec in pairs:
            request = self.requests.get(rid)
            if request is not None and not request.is_finished():
                request.spec_token_ids = [] if request.is_prefill_chunk else spec

    # ---- requests in and out -----------------------------------------------------------
    def get_request(self, request_id: str) -> Request | None:
        return self.requests.get(request_id)

    def add_request(self, request: Request) -> None:
        """Queue a new request. Raises ``ValueError`` (and queues nothing) when the request
        can never run here."""
        if not isinstance(request, Request):
            raise invalid("request", request, Phrase("err_x_a", t="Request"))
        rid = request.request_id
        if rid in self.requests:
            where = Phrase("err_n_in_scheduler")
            raise PdlabValueError("err_duplicate_id", req=rid, where=where)
        if (
            request.status != RequestStatus.WAITING
            or request.num_computed_tokens
            or request.num_output_tokens
        ):
            raise invalid("request", request, Phrase("err_x_fresh_request"))
        params = request.kv_transfer_params
        validate_kv_transfer_params(params)
        remote = params and (params.get("do_remote_prefill") or params.get("do_remote_decode"))
        if remote and self.connector is None:
            raise PdlabValueError("err_kv_params_here", params=params)
        self.check_request_fits(request)
        self.waiting.append(request)
        self.requests[rid] = request
        if self.connector is not None:
            self.connector.on_new_request(request)  # P may cut its prompt (pd_connector.py)

    def check_request_fits(self, request: Request) -> None:
        """Raise ``ValueError`` when ``request`` could never run here: its prompt leaves no
        room below ``max_model_len``, or this pool cannot hold it whole. A P/D pair asks D
        this before P computes anything (``pdlab/disagg/pair.py``)."""
        rid = request.request_id
        if request.num_prompt_tokens >= self.max_model_len:
            # As vLLM's input processor: the prompt plus at least one output token must fit.
            raise PdlabValueError(
                "err_prompt_ids_too_long", n=request.num_prompt_tokens, limit=self.max_model_len
            )
        # The longest sequence whose K/V the request will hold (the last sampled token is
        # never fed back), plus its last verifying step's drafts and lookahead slots.
        max_len = min(request.num_prompt_tokens + request.max_tokens - 1, self.max_model_len)
        extra = self.num_spec_tokens + self.num_lookahead_tokens
        need = cdiv(min(max_len + extra, self.max_model_len), self.block_size)
        if need > self.kv_cache_manager.num_blocks:
            raise PdlabValueError(
                "err_cache_too_small_spec" if extra else "err_cache_too_small", req=rid, n=max_len,
                prompt=request.num_prompt_tokens, max_tokens=request.max_tokens, extra=extra,
                need=need, block_size=self.block_size, num_blocks=self.kv_cache_manager.num_blocks,
            )  # fmt: skip
        params = request.kv_transfer_params
        if params and params.get("do_remote_prefill") and self._spec_decode_step_blocks:
            # An async load is admitted only beside one verifying step's blocks.
            need = cdiv(request.num_prompt_tokens, self.block_size)
            if need + self._spec_decode_step_blocks > self.kv_cache_manager.num_blocks:
                raise PdlabValueError(
                    "err_cache_too_small_receiving", req=rid, n=request.num_prompt_tokens,
                    need=need, kept=self._spec_decode_step_blocks,
                    num_blocks=self.kv_cache_manager.num_blocks,
                )  # fmt: skip

    def finish_requests(
        self, request_ids: str | Iterable[str], finished_status: RequestStatus
    ) -> list[str]:
        """Finish requests from outside (an abort). Unknown or finished ids are skipped;
        returns the ids that were finished."""
        if not RequestStatus.is_finished(finished_status):
            allowed = Phrase("err_x_finished_status")
            raise invalid("finished_status", finished_status, allowed)
        if isinstance(request_ids, str):
            request_ids = (request_ids,)
        finished = []
        for rid in dict.fromkeys(request_ids):
            request = self.requests.get(rid)
            if request is None or request.is_finished():
                continue
            if request.status == RequestStatus.RUNNING:
                self.running.remove(request)
            elif request in self.skipped_waiting:
                self.skipped_waiting.remove(request)
            elif request in self.waiting:
                self.waiting.remove(request)
            delay_free = False
            if request.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                # The worker may still be writing into the blocks: free them once it
                # reports the receive finished, unless it already has.
                delay_free = rid not in self.finished_recving_kv_req_ids
                self.finished_recving_kv_req_ids.discard(rid)
                self.failed_recving_kv_req_ids.discard(rid)
            request.status = finished_status
            self._free_request(request, delay_free_blocks=delay_free)
            finished.append(rid)
        return finished

    # ---- a request's end ---------------------------------------------------------------
    def _free_request(
        self, request: Request, delay_free_blocks: bool = False
    ) -> dict[str, Any] | None:
        """A request finished: tell the connector, then free its blocks unless the
        connector (a P-side send) or an in-flight receive needs them a while longer."""
        assert request.is_finished()
        self._inflight_prefills.discard(request)
        delay_by_connector, kv_transfer_params = self._connector_finished(request)
        self.finished_req_ids.add(request.request_id)
        delay = delay_free_blocks or delay_by_connector
        self._emit(
            "finish", req_id=request.request_id, status=request.status.name,
            finish_reason=request.get_finished_reason(), delay_free=delay,
            num_output_tokens=request.num_output_tokens, kv_transfer_params=kv_transfer_params,
        )  # fmt: skip
        if not delay:
            self._free_blocks(request)
        return kv_transfer_params

    def _free_blocks(self, request: Request) -> None:
        assert request.is_finished()
        self._free_kv(request)
        del self.requests[request.request_id]

    def _free_kv(self, request: Request) -> None:
        block_ids = self.kv_cache_manager.get_block_ids(request.request_id)
        self.kv_cache_manager.free(request)
        if block_ids:
            self._emit("free", req_id=request.request_id, block_ids=block_ids)

    # ---- counts ------------------------------------------------------------------------
    def get_num_unfinished_requests(self) -> int:
        return len(self.waiting) + len(self.skipped_waiting) + len(self.running)

    def has_unfinished_requests(self) -> bool:
        return self.get_num_unfinished_requests() > 0

    def has_finished_requests(self) -> bool:
        return len(self.finished_req_ids) > 0

    def has_requests(self) -> bool:
        """Anything left to step for: unfinished requests, finished ones the runner has not
        been told about, or finished ones whose blocks wait for a KV send (P side)."""
        return bool(self.requests) or self.has_finished_requests()

    # ---- remote KV (the KV connector's scheduler side) ---------------------------------
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
        self, request: Request, num_computed_tokens: int, num_external_tokens: int,
        num_local_tokens: int,
    ) -> None:  # fmt: skip
        """The request was given its blocks and now waits for its K/V to arrive (what it
        counts as computed meanwhile: ``_update_waiting_for_remote_kv``)."""
        rid = request.request_id
        request.status = RequestStatus.WAITING_FOR_REMOTE_KVS
        request.num_computed_tokens = num_computed_tokens
        request.num_external_computed_tokens = num_external_tokens
        self._inflight_prefills.add(request)
        self._emit(
            "waiting_for_remote_kvs", req_id=rid, num_external_tokens=num_external_tokens,
            num_local_tokens=num_local_tokens, num_computed_tokens=num_computed_tokens,
            block_ids=self.kv_cache_manager.get_block_ids(rid),
        )  # fmt: skip

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

    def _handle_failed_recvs(self, kv_out: KVConnectorOutput) -> set[str]:
        """Apply failed asynchronous receives (vLLM's ``_handle_failed_recving`` and the
        async half of ``_handle_invalid_blocks``): a whole failed receive keeps no token
        under "recompute" (under "fail" its count is left, as upstream leaves it); a
        partly failed one keeps the tokens before its first failed block. "recompute"
        marks them for local recompute and returns none; "fail" returns their ids, to be
        finished with an error. pdlab's connectors fail asynchronous loads only."""
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
            EngineCoreOutput(rid, [], "error", num_cached_tokens=failed[rid].num_cached_tokens)
            for rid in self.finish_requests(failed, RequestStatus.FINISHED_ERROR)
        ]

    def _check_landed_kv(self, kv_out: KVConnectorOutput) -> list[EngineCoreOutput]:
        """D side, for each receive that landed whole: the tokens counted as loaded
        (``num_external_computed_tokens``) must be the tokens the worker wrote (LMCache and
        vLLM have shipped the N-1 against N mismatch); a mismatch ends the request with an
        error. A first output token that came with the K/V (``pdlab/disagg/designs.py``)
        becomes the request's first output: ``N + 1`` tokens with ``N`` computed, so
        nothing is subtracted and its first step decodes that token."""
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
                    "kv_load_mismatch", req_id=rid, num_counted_tokens=counted,
                    num_written_tokens=written, num_local_tokens=local, error=why,
                )  # fmt: skip
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

    # ---- trace events ------------------------------------------------------------------
    def _emit(self, kind: str, **fields: Any) -> None:
        if self.emit is not None:
            self.emit(kind, **fields)
