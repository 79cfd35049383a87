"""pdlab's scheduler behind the interface ``twin_vllm.py`` gives vLLM's: the same
``add``, ``abort``, ``schedule``, ``update`` and ``state``, reporting the same plain data.

pdlab's side is ``pdlab.engine.core.sched.scheduler.Scheduler`` with its ``pdlab.engine.core``
manager and, on the decode side, the scheduler half of ``PDConnector(role="decode")``. The
connector's transport is a recorder: the scheduler half only ever asks it to tell P to
let go of a request's blocks (``release``); the lockstep driver plays the worker half.
A workload with speculative decoding gives the scheduler a ``SpeculativeConfig``; the
driver plays the drafter (``drafts``, as ``update_draft_token_ids``).
"""

from __future__ import annotations

import torch
from workload import Config, KVReport, Scheduled, Spec

import pdlab.engine.attention.mla_builder as pdlab_builder
import pdlab.engine.config.vllm as pdlab_vllm_config
import pdlab.engine.worker.gpu.batch as pdlab_batch
from pdlab.engine.attention.backend import CommonAttentionMetadata
from pdlab.engine.config import (
    AttentionConfig,
    CacheConfig,
    KVTransferConfig,
    ParallelConfig,
    SchedulerConfig,
    SpeculativeConfig,
)
from pdlab.engine.core.sched.output import DraftTokenIds, KVConnectorOutput, ModelRunnerOutput
from pdlab.engine.core.sched.scheduler import Scheduler
from pdlab.engine.distributed.kv_transfer.pd_connector import PDConnector
from pdlab.engine.request import Request, RequestStatus, SamplingParams


class ReleaseRecorder:
    """The one transport call the scheduler half of ``PDConnector`` makes."""

    def __init__(self) -> None:
        self.released: list[str] = []  # D's request ids, in call order

    def release(self, remote_engine_id, remote_request_id, transfer_id) -> None:
        self.released.append(remote_request_id.removeprefix("p-"))


class PdlabTwin:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.transport = None
        connector = None
        spec = None
        if cfg.spec_method is not None:
            spec = SpeculativeConfig(
                cfg.spec_method, cfg.num_spec_tokens, num_nextn_predict_layers=cfg.mtp_modules
            )
        lookahead = spec.num_prefill_lookahead_tokens if spec is not None else 0
        if cfg.decode or cfg.prefill:
            self.transport = ReleaseRecorder()
            role, engine = ("decode", "decode-engine") if cfg.decode else ("prefill", "p")
            connector = PDConnector(
                role,
                engine,
                self.transport,
                cfg.block_size,
                num_prefill_lookahead_tokens=lookahead,
            )
        self.sched = Scheduler(
            SchedulerConfig(
                max_num_batched_tokens=cfg.budget,
                max_num_seqs=cfg.max_seqs,
                long_prefill_token_threshold=cfg.threshold,
                scheduler_reserve_full_isl=cfg.reserve_full_isl,
            ),
            CacheConfig(
                block_size=cfg.block_size,
                num_blocks=cfg.num_blocks,
                enable_prefix_caching=cfg.caching,
            ),
            cfg.max_model_len,
            connector=connector,
            kv_transfer_config=KVTransferConfig(kv_load_failure_policy=cfg.policy),
            speculative_config=spec,
        )
        self.finished_calls: list[tuple[str, str, tuple[int, ...]]] = []
        if connector is not None:
            self._wrap_request_finished(connector)
        self.mgr = self.sched.kv_cache_manager

    def _wrap_request_finished(self, connector) -> None:
        inner = connector.request_finished

        def request_finished(request, block_ids):
            self.finished_calls.append((request.request_id, request.status.name, tuple(block_ids)))
            return inner(request, block_ids)

        connector.request_finished = request_finished

    def add(self, s: Spec) -> None:
        sp = SamplingParams(max_tokens=s.max_tokens, stop_token_ids=s.stop_token_ids)
        self.sched.add_request(
            Request(s.req_id, list(s.prompt), sp, kv_transfer_params=s.kv_transfer_params())
        )

    def abort(self, req_id: str) -> list[str]:
        return self.sched.finish_requests(req_id, RequestStatus.FINISHED_ABORTED)

    def request(self, req_id: str) -> Request:
        return self.sched.requests[req_id]

    def schedule(self):
        so = self.sched.schedule()
        new = {r.req_id: r for r in so.scheduled_new_reqs}
        cached = so.scheduled_cached_reqs
        cached_rows = dict(
            zip(cached.req_ids, zip(cached.num_computed_tokens, cached.new_block_ids))
        )
        rows = []
        for rid, n in so.num_scheduled_tokens.items():
            if rid in new:
                rows.append(
                    (rid, n, "new", new[rid].num_computed_tokens, tuple(new[rid].block_ids))
                )
            else:
                c, ids = cached_rows[rid]
                rows.append((rid, n, "running", c, tuple(ids)))
        loads: dict = {}
        if self.transport is not None:
            # vLLM's NIXL scheduler half tells P to let go of blocks through the next
            # step's metadata (an entry with no blocks); pdlab's calls its transport at
            # once. Both are reported with the step that carries vLLM's.
            loads = dict.fromkeys(self.transport.released)
            self.transport.released.clear()
            for rid, recv in so.kv_connector_metadata.reqs_to_recv.items():
                loads[rid] = tuple(recv.local_block_ids)
        spec = tuple(sorted((r, tuple(d)) for r, d in so.scheduled_spec_decode_tokens.items()))
        return so, Scheduled(tuple(rows), tuple(sorted(so.preempted_req_ids)), loads, spec)

    def update(self, so, sampled: dict[str, list[int]], kv: KVReport | None):
        req_ids = list(so.num_scheduled_tokens)
        out = ModelRunnerOutput(
            req_ids=req_ids,
            sampled_token_ids=[list(sampled.get(r, ())) for r in req_ids],
        )
        if kv is not None:
            out.kv_connector_output = KVConnectorOutput(
                finished_recving=set(kv.finished_recving) or None,
                failed_recving=set(kv.failed_recving),
                invalid_block_ids=set(kv.invalid_block_ids),
            )
        result = self.sched.update_from_output(so, out)
        return tuple(sorted((o.req_id, tuple(o.new_token_ids), o.finish_reason) for o in result))

    def drafts(self, drafts: dict[str, list[int]]) -> None:
        self.sched.update_draft_token_ids(DraftTokenIds(list(drafts), list(drafts.values())))

    def state(self) -> dict:
        s, mgr = self.sched, self.mgr
        reqs = {}
        for rid, r in s.requests.items():
            reqs[rid] = (
                r.status.name,
                r.num_computed_tokens,
                r.num_tokens,
                r.num_preemptions,
                tuple(mgr.get_block_ids(rid)),
                tuple(r.spec_token_ids),
            )
        blocks = mgr.block_pool.blocks
        st = mgr.prefix_cache_stats
        return {
            "requests": reqs,
            "running": tuple(r.request_id for r in s.running),
            "waiting": tuple(r.request_id for r in s.waiting),
            "kv_holding_waiting": tuple(r.request_id for r in s.skipped_waiting),
            "num_free_blocks": mgr.num_free_blocks,
            "free_queue": tuple(b.block_id for b in mgr.block_pool.free_block_queue),
            "cached_blocks": tuple(b.block_id for b in blocks if b.block_hash is not None),
            "ref_cnt": tuple(b.ref_cnt for b in blocks),
            "prefix_cache_stats": (
                st.requests,
                st.queries,
                st.hits,
                st.preempted_requests,
                st.preempted_queries,
                st.preempted_hits,
            ),
            "connector_request_finished": tuple(self.finished_calls),
        }


# ---- routing: pdlab's rules on one batch (test_batch_routing.py's grid) -----------------
def pdlab_routing(rc, batch) -> dict:
    """What pdlab decides for ``batch`` under ``rc``, through the engine's own homes of
    each rule, looked up on their modules at call time (so a planted bug is seen): the
    config's ``adjust_dcp_kv_cache_interleave_size`` (as ``LLMEngine`` calls it, with a
    connector on a NIXL instance), ``MLAMetadataBuilder``'s threshold and split,
    ``gather_batch_req_state``'s order, ``is_prefilling`` and graph decision. Reported as
    ``twin_vllm.vllm_routing`` reports vLLM's."""
    k = rc.num_spec_tokens
    parallel = pdlab_vllm_config.adjust_dcp_kv_cache_interleave_size(
        ParallelConfig(prefill_context_parallel_size=rc.pcp, decode_context_parallel_size=rc.dcp),
        rc.block_size,
        rc.nixl,
    )
    builder = pdlab_builder.MLAMetadataBuilder(
        rc.block_size, AttentionConfig(rc.backend, num_speculative_tokens=k), parallel
    )
    rows = batch.rows
    state = pdlab_batch.gather_batch_req_state(
        {r: v[0] for r, v in rows.items()},
        {r: v[1] for r, v in rows.items()},
        {r: v[2] for r, v in rows.items()},
        {r: v[3] for r, v in rows.items()},
        model_runner=rc.model_runner,
        use_pcp=parallel.use_pcp,
        reorder_batch_threshold=builder.reorder_batch_threshold,
        draft_tokens=batch.drafts,
        decode_query_len=1 + k,
    )
    pad = batch.num_padding_rows
    q = list(state.num_scheduled_tokens) + [0] * pad
    c = list(state.num_computed_tokens) + [1] * pad
    cm = CommonAttentionMetadata.from_batch(
        q,
        c,
        [1] * len(q),
        torch.zeros(len(q), 1, dtype=torch.int32),
        torch.zeros(sum(q), dtype=torch.int64),
        list(state.req_ids) + [f"pad{i}" for i in range(pad)],
        is_prefilling=list(state.is_prefilling) + [False] * pad,
    )
    m = builder.build(cm)
    split = (m.num_decodes, m.num_prefills, m.num_decode_tokens, m.num_prefill_tokens)
    runs = state.prefill_runs_as_decode
    report = {
        "cp_kv_cache_interleave_size": parallel.cp_kv_cache_interleave_size,
        "reorder_batch_threshold": builder.reorder_batch_threshold,
        "prefill_runs_as_decode": None if runs is None else tuple(runs),
        "uniform_decode_token_count": state.uniform_decode_token_count,
        "uniform_decode": state.uniform_decode,
        "order": tuple(state.req_ids),
        "is_prefilling": tuple(state.is_prefilling),
        "split": split,
        "forward": tuple("mqa" if i < m.num_decodes else "mha" for i in range(len(rows))),
    }
    if rc.model_runner == "v2":  # V1 has no such flag upstream
        report["decode_graph_eligible"] = state.decode_graph_eligible
    return report
