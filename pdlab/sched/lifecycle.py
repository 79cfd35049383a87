"""A request's way through the scheduler around ``schedule()``: it is added, its sampled
tokens come back (``update_from_output``, ``check_stop``), it finishes or is aborted
(``finish_requests``), and its blocks are freed.

These are methods of :class:`pdlab.sched.scheduler.Scheduler`, kept in their own file.
Upstream they are part of ``vllm/v1/core/sched/scheduler.py`` under the same names
(``add_request``, ``finish_requests``, ``update_from_output``,
``_update_request_with_output``, ``_free_request``, ``_free_blocks``), with
``check_stop`` in ``vllm/v1/core/sched/utils.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pdlab.kv_transfer.base import validate_kv_transfer_params
from pdlab.math_utils import cdiv
from pdlab.request import Request, RequestStatus
from pdlab.sched.output import EngineCoreOutput, ModelRunnerOutput, SchedulerOutput
from pdlab.sched.utils import check_stop


class RequestLifecycleMixin:
    """Requests in, results in, requests out: the methods of ``Scheduler`` outside
    ``schedule()``; they use its state, set in its ``__init__``."""

    # ---- requests in and out -----------------------------------------------------------
    def add_request(self, request: Request) -> None:
        """Queue a new request. Raises ``ValueError`` (and queues nothing) when the request
        can never run here."""
        if not isinstance(request, Request):
            raise ValueError(f"request={request!r} is invalid: expected a Request")
        rid = request.request_id
        if rid in self.requests:
            raise ValueError(
                f"request_id={rid!r} is invalid: a request with this id is "
                "already in the scheduler; expected a unique id"
            )
        if (
            request.status != RequestStatus.WAITING
            or request.num_computed_tokens
            or request.num_output_tokens
        ):
            raise ValueError(
                f"request={request!r} is invalid: expected a fresh Request "
                "that no scheduler has run"
            )
        if request.num_prompt_tokens >= self.max_model_len:
            # As vLLM's input processor: the prompt plus at least one output token must fit.
            raise ValueError(
                f"prompt_token_ids has {request.num_prompt_tokens} tokens: expected fewer "
                f"than max_model_len={self.max_model_len} (one position is left for the "
                "first output token)"
            )
        # The longest sequence whose K/V the request will hold (the last sampled token is
        # never fed back), which must fit the whole pool or the request could never finish.
        # Under speculative decoding its last step also holds K drafts and the drafter's
        # lookahead slots past them: a pool short of that would stall it for ever.
        max_len = min(request.num_prompt_tokens + request.max_tokens - 1, self.max_model_len)
        extra = self.num_spec_tokens + self.num_lookahead_tokens
        need = cdiv(min(max_len + extra, self.max_model_len), self.block_size)
        if need > self.kv_cache_manager.num_blocks:
            spec = f" + {extra} for speculative decoding" if extra else ""
            raise ValueError(
                f"the KV cache is too small for request {rid!r}: {max_len} tokens "
                f"(prompt {request.num_prompt_tokens} + max_tokens {request.max_tokens} - 1, "
                f"at most max_model_len){spec} need {need} blocks of {self.block_size}; "
                f"expected at most num_blocks={self.kv_cache_manager.num_blocks}"
            )
        params = request.kv_transfer_params
        validate_kv_transfer_params(params)
        if params and (params.get("do_remote_prefill") or params.get("do_remote_decode")):
            if self.connector is None:
                raise ValueError(
                    f"kv_transfer_params={params!r} is invalid here: expected "
                    "a scheduler with a KV connector for P/D requests"
                )
        if params and params.get("do_remote_prefill") and self._spec_decode_step_blocks:
            # An async load is admitted only beside one verifying step's blocks.
            need = cdiv(request.num_prompt_tokens, self.block_size)
            if need + self._spec_decode_step_blocks > self.kv_cache_manager.num_blocks:
                raise ValueError(
                    f"the KV cache is too small for request {rid!r}: receiving its "
                    f"{request.num_prompt_tokens} prompt tokens takes {need} blocks, and "
                    f"{self._spec_decode_step_blocks} more are kept for a verifying step "
                    f"of 1 + K tokens; expected at most num_blocks="
                    f"{self.kv_cache_manager.num_blocks}"
                )
        self.waiting.append(request)
        self.requests[rid] = request

    def finish_requests(
        self, request_ids: str | Iterable[str], finished_status: RequestStatus
    ) -> list[str]:
        """Finish requests from outside (an abort). Unknown or finished ids are skipped;
        returns the ids that were finished."""
        if not RequestStatus.is_finished(finished_status):
            raise ValueError(
                f"finished_status={finished_status!r} is invalid: expected a FINISHED_* status"
            )
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

    def get_request(self, request_id: str) -> Request | None:
        return self.requests.get(request_id)

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

    # ---- one step: results -------------------------------------------------------------
    def update_from_output(
        self, scheduler_output: SchedulerOutput, model_runner_output: ModelRunnerOutput
    ) -> list[EngineCoreOutput]:
        """Append sampled tokens, stop finished requests, and apply the KV connector's
        report. Returns one ``EngineCoreOutput`` per request with news."""
        active = self._check_runner_output(scheduler_output, model_runner_output)
        kv_out = model_runner_output.kv_connector_output
        failed_kv_load_req_ids: set[str] = set()
        if kv_out is not None:
            failed_kv_load_req_ids = self._handle_failed_recvs(kv_out)

        outputs: list[EngineCoreOutput] = []
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
            kv_transfer_params = None
            finish_reason = None
            if stop:
                finish_reason = request.get_finished_reason()
                kv_transfer_params = self._free_request(request)
                stopped.add(request)
            if new_token_ids or stop:
                outputs.append(
                    EngineCoreOutput(
                        req_id=request.request_id,
                        new_token_ids=new_token_ids,
                        finish_reason=finish_reason,
                        kv_transfer_params=kv_transfer_params,
                        num_cached_tokens=request.num_cached_tokens,
                    )
                )
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
    ) -> list[tuple[Request, list[int]]]:
        """Pair each scheduled, still-running request with its sampled tokens, checking the
        runner's answer before anything changes."""
        index = model_runner_output.req_id_to_index
        sampled = model_runner_output.sampled_token_ids
        active = []
        for rid in scheduler_output.num_scheduled_tokens:
            request = self.requests.get(rid)
            if request is None or request.is_finished():
                continue  # aborted while the step ran
            if rid not in index:
                raise ValueError(
                    f"model_runner_output has no entry for scheduled request "
                    f"{rid!r}: expected one per scheduled request"
                )
            tokens = list(sampled[index[rid]])
            self._check_num_sampled(request, scheduler_output, tokens)
            active.append((request, tokens))
        return active

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
            "finish",
            req_id=request.request_id,
            status=request.status.name,
            finish_reason=request.get_finished_reason(),
            delay_free=delay,
            num_output_tokens=request.num_output_tokens,
            kv_transfer_params=kv_transfer_params,
        )
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
