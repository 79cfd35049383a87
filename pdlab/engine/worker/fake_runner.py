"""A model runner with no model, for scheduler tests and the scheduler benchmark.

It reads a ``SchedulerOutput`` as the real runner does (``gpu/model_runner.py``, after
``vllm/v1/worker/gpu_model_runner.py``), samples only for requests whose known tokens are all
computed after the step, and drives the worker side of a KV connector. The "sampled" token
comes from ``sample(req_id, position)`` instead of a forward pass.

With ``num_speculative_tokens=K`` it also plays the drafter (K drafts per scheduled request
from ``draft(req_id, position)``, taken with ``take_draft_token_ids``) and the greedy
rejection sampler. Because the target is a function of the position, the tokens are the
ones the same runner gives without speculative decoding. :func:`seeded_drafter` makes a
drafter that agrees with the target at a given rate.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from pdlab.engine.core.sched.output import (
    DraftTokenIds,
    KVConnectorOutput,
    ModelRunnerOutput,
    SchedulerOutput,
)
from pdlab.engine.distributed.kv_transfer.base import KVConnectorWorkerBase
from pdlab.errors import Phrase, invalid

TokenAt = Callable[[str, int], int]


def seeded_drafter(target: TokenAt, acceptance_rate: float, seed: int = 0) -> TokenAt:
    """A drafter that proposes the target's token at ``position`` with probability
    ``acceptance_rate`` (seeded by ``seed``, the request and the position) and otherwise
    a token the target would not pick there."""
    if isinstance(acceptance_rate, bool) or not 0 <= acceptance_rate <= 1:
        raise invalid("acceptance_rate", acceptance_rate, Phrase("err_x_num_range", a=0, b=1))

    def draft(req_id: str, position: int) -> int:
        want = target(req_id, position)
        if random.Random(f"{seed}/{req_id}/{position}").random() < acceptance_rate:
            return want
        return want + 1

    return draft


class FakeModelRunner:
    def __init__(
        self, connector_worker: KVConnectorWorkerBase | None = None, sample: TokenAt | None = None,
        *, num_speculative_tokens: int = 0, draft: TokenAt | None = None,
    ) -> None:  # fmt: skip
        k = num_speculative_tokens
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise invalid("num_speculative_tokens", k, Phrase("err_x_int_ge", n=0))
        self.connector_worker = connector_worker
        self.sample = sample if sample is not None else (lambda req_id, position: 1)
        self.num_speculative_tokens = num_speculative_tokens
        self.draft = draft if draft is not None else seeded_drafter(self.sample, 0.5)
        self.num_tokens: dict[str, int] = {}
        self._draft_token_ids: DraftTokenIds | None = None

    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput:
        so = scheduler_output
        for rid in so.finished_req_ids | so.preempted_req_ids:
            self.num_tokens.pop(rid, None)
        computed: dict[str, int] = {}
        for new in so.scheduled_new_reqs:
            self.num_tokens[new.req_id] = len(new.all_token_ids)
            computed[new.req_id] = new.num_computed_tokens
        cached = so.scheduled_cached_reqs
        computed.update(zip(cached.req_ids, cached.num_computed_tokens))

        conn = self.connector_worker
        if conn is not None and so.kv_connector_metadata is not None:
            conn.start_load_kv(so.kv_connector_metadata)
        req_ids = list(so.num_scheduled_tokens)
        sampled: list[list[int]] = []
        for rid in req_ids:
            n = self.num_tokens[rid]
            drafts = so.scheduled_spec_decode_tokens.get(rid, [])
            tokens = []
            if computed[rid] + so.num_scheduled_tokens[rid] - len(drafts) >= n:
                tokens = self._verify(rid, n, drafts)
                self.num_tokens[rid] = n + len(tokens)
            sampled.append(tokens)
        self._draft_token_ids = None
        k = self.num_speculative_tokens
        if k and req_ids:
            proposed = [[self.draft(r, self.num_tokens[r] + j) for j in range(k)] for r in req_ids]
            self._draft_token_ids = DraftTokenIds(req_ids=req_ids, draft_token_ids=proposed)
        kv_out = None
        if conn is not None:
            conn.wait_for_save()
            sending, recving = conn.get_finished(so.finished_req_ids)
            kv_out = KVConnectorOutput(
                finished_sending=sending, finished_recving=recving,
                failed_recving=conn.get_failed_recving(),
                invalid_block_ids=conn.get_block_ids_with_load_errors(),
            )  # fmt: skip
        return ModelRunnerOutput(
            req_ids=req_ids, sampled_token_ids=sampled, kv_connector_output=kv_out
        )

    def _verify(self, rid: str, n: int, drafts: list[int]) -> list[int]:
        """Greedy verification, sampling no further than the first mismatch."""
        tokens = []
        for j, d in enumerate(drafts):
            tokens.append(self.sample(rid, n + j))
            if tokens[-1] != d:
                return tokens
        tokens.append(self.sample(rid, n + len(drafts)))
        return tokens

    def take_draft_token_ids(self) -> DraftTokenIds | None:
        """The drafts proposed after the last step (None when nothing was drafted)."""
        drafts, self._draft_token_ids = self._draft_token_ids, None
        return drafts
