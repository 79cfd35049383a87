"""A model runner with no model, for scheduler tests and the scheduler benchmark.

It reads a ``SchedulerOutput`` as the real runner does (``pdlab/model/runner.py``, after
``vllm/v1/worker/gpu_model_runner.py``): it keeps each request's token count from the
scheduler's deltas, samples only for requests whose known tokens are all computed after
the step, and drives the worker side of a KV connector. The "sampled" token comes from
``sample(req_id, position)`` instead of a forward pass.
"""

from __future__ import annotations

from collections.abc import Callable

from pdlab.kv_transfer.base import KVConnectorWorkerBase
from pdlab.sched.output import KVConnectorOutput, ModelRunnerOutput, SchedulerOutput


class FakeModelRunner:
    def __init__(
        self,
        connector_worker: KVConnectorWorkerBase | None = None,
        sample: Callable[[str, int], int] | None = None,
    ) -> None:
        self.connector_worker = connector_worker
        self.sample = sample if sample is not None else (lambda req_id, position: 1)
        self.num_tokens: dict[str, int] = {}

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
            if computed[rid] + so.num_scheduled_tokens[rid] >= n:
                sampled.append([self.sample(rid, n)])
                self.num_tokens[rid] = n + 1
            else:
                sampled.append([])
        kv_out = None
        if conn is not None:
            conn.wait_for_save()
            sending, recving = conn.get_finished(so.finished_req_ids)
            kv_out = KVConnectorOutput(
                finished_sending=sending,
                finished_recving=recving,
                failed_recving=conn.get_failed_recving(),
                invalid_block_ids=conn.get_block_ids_with_load_errors(),
            )
        return ModelRunnerOutput(
            req_ids=req_ids, sampled_token_ids=sampled, kv_connector_output=kv_out
        )
