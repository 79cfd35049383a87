"""Speculative decoding in the scheduler: which drafts a step verifies, the placeholder
drafts that pad D's first step, and what a verification leaves behind.

These are methods of :class:`pdlab.sched.scheduler.Scheduler`, kept in their own file.
Upstream they are inline in ``vllm/v1/core/sched/scheduler.py`` (vLLM 0.33.0): the
"Speculative decode related" block of ``schedule``'s running loop, the "Pad new decode
requests to uniform spec decoding size to preserve full cudagraph for this step" block of
its waiting loop (``pad_spec_decode``), the rejection count in ``update_from_output``, and
``update_draft_token_ids``.

A running request carries the drafts proposed after its last step (``spec_token_ids``);
the running loop asks for ``num_tokens_with_spec - num_computed_tokens`` tokens, cut as any
row is (``long_prefill_token_threshold``, the budget, ``max_model_len``), and the drafts
that survive the cut become ``scheduled_spec_decode_tokens``. A request admitted with one
new token over computed context (D's row after the ``- 1``, or a fully prefix-cached
prompt) is padded to ``1 + K`` tokens with ``[-1] * K`` placeholders, so the step keeps
the ``1 + K`` shape of every verifying row, when: K > 0, no running row scheduled this
step is mid-prefill, some row is already scheduled or the request has computed context,
and ``1 + K`` positions plus the sampled token fit ``max_model_len``. If the padded row
does not fit the budget, the waiting loop stops there: upstream would rather not schedule
it than schedule it unpadded. After the step ``num_computed_tokens`` is rolled back over
the rejected drafts: ``len(drafts) - (len(sampled) - 1)``.

Differences from upstream: no dynamic K (``num_speculative_tokens_per_batch_size``), no
grammar check of drafts, no async scheduling (so no output placeholders). Refused in one
line when the scheduler is built: a ``long_prefill_token_threshold`` below ``1 + K``
(upstream accepts it, then fails an assertion on the first padded row it cuts) and a
``max_num_batched_tokens`` below ``1 + K`` (upstream refuses K or less for MTP, and for
n-gram accepts a budget that can never schedule a padded row, so its waiting loop stops
there every step). Drafts longer than K are refused too. ``add_request`` also refuses a
request whose last verifying step (K drafts, and MTP's K lookahead slots) or, on D, whose
receive beside one verifying step's blocks could never fit the pool (upstream waits for
ever).
"""

from __future__ import annotations

from pdlab.config import SpeculativeConfig
from pdlab.math_utils import cdiv
from pdlab.request import Request
from pdlab.sched.output import DraftTokenIds, SchedulerOutput

PLACEHOLDER_TOKEN_ID = -1  # a padded draft: never accepted


class SpecDecodeMixin:
    """The speculative-decoding methods of ``Scheduler``; they use its state, set in its
    ``__init__``."""

    def _init_spec_decode(self, speculative_config: SpeculativeConfig | None) -> None:
        spec = speculative_config
        if spec is not None and not isinstance(spec, SpeculativeConfig):
            raise ValueError(
                f"speculative_config={spec!r} is invalid: expected None or a SpeculativeConfig"
            )
        self.speculative_config = spec
        # K, and the KV slots past the scheduled tokens that the drafter writes (MTP).
        self.num_spec_tokens = spec.num_speculative_tokens if spec is not None else 0
        self.num_lookahead_tokens = spec.num_lookahead_tokens if spec is not None else 0
        # What one verifying step may add to a request: kept free beside an async load.
        step_tokens = 1 + self.num_spec_tokens + self.num_lookahead_tokens
        self._spec_decode_step_blocks = (
            cdiv(step_tokens, self.block_size) if self.num_spec_tokens else 0
        )
        if spec is None:
            return
        # Upstream refuses a budget of num_lookahead_tokens or less (K, for MTP); pdlab
        # asks for 1 + K whatever the method, since a smaller budget could never schedule
        # a padded row, and the waiting loop would stop at it every step.
        budget = self.scheduler_config.max_num_batched_tokens
        if budget < 1 + self.num_spec_tokens:
            raise ValueError(
                f"SchedulerConfig.max_num_batched_tokens={budget} is invalid with "
                f"SpeculativeConfig(method={spec.method!r}, num_speculative_tokens="
                f"{self.num_spec_tokens}): expected at least 1 + num_speculative_tokens = "
                f"{1 + self.num_spec_tokens}"
            )
        threshold = self.scheduler_config.long_prefill_token_threshold
        if 0 < threshold < 1 + self.num_spec_tokens:
            raise ValueError(
                f"SchedulerConfig.long_prefill_token_threshold={threshold} is invalid with "
                f"num_speculative_tokens={self.num_spec_tokens}: expected 0 or at least "
                f"{1 + self.num_spec_tokens} (a padded row of 1 + K tokens cannot be cut)"
            )

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
        num_scheduled_spec_tokens = (
            num_new_tokens + request.num_computed_tokens - request.num_tokens
        )
        drafts = request.spec_token_ids[: max(num_scheduled_spec_tokens, 0)]
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
            "spec_decode",
            req_id=request.request_id,
            draft_token_ids=list(drafts),
            num_draft_tokens=len(drafts),
            num_accepted_tokens=num_accepted,
            num_rejected_tokens=num_rejected,
            num_computed_tokens=request.num_computed_tokens,
        )

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
            want = "[] (its prompt is not complete)"
        elif drafts:
            want = f"1 to {1 + len(drafts)} tokens (one per accepted draft, then one)"
        else:
            want = "one token"
        raise ValueError(
            f"model_runner_output.sampled_token_ids for {rid!r} is {tokens}: expected "
            f"{want} after {request.num_computed_tokens} of {request.num_tokens} tokens "
            "computed"
        )

    def update_draft_token_ids(self, draft_token_ids: DraftTokenIds) -> None:
        """Drafts the runner proposed after a step, for the next step to verify.
        Finished or unknown requests are skipped; a request that is still prefilling
        drops its drafts."""
        if not isinstance(draft_token_ids, DraftTokenIds):
            raise ValueError(
                f"draft_token_ids={draft_token_ids!r} is invalid: expected a DraftTokenIds"
            )
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
                raise ValueError(
                    f"draft_token_ids for {rid!r} is {spec}: expected at most "
                    f"num_speculative_tokens={k} token ids (integers >= 0, or -1)"
                )
        for rid, spec in pairs:
            request = self.requests.get(rid)
            if request is None or request.is_finished():
                continue
            if request.is_prefill_chunk:
                request.spec_token_ids = []
                continue
            request.spec_token_ids = spec
