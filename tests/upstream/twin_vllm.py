"""vLLM 0.33.0's own scheduler behind the small interface ``tests/upstream/lockstep.py``
drives (``schedule``, ``update``, ``add``, ``abort``, ``state``); ``twin_pdlab.py`` puts
pdlab's behind the same one.

vLLM's side is ``vllm.v1.core.sched.scheduler.Scheduler`` with its ``KVCacheManager`` (one
full-attention group, no tensors) and, on the decode side, the scheduler half of
``NixlConnector`` (``KVTransferConfig(kv_connector="NixlConnector", kv_role="kv_consumer")``;
it needs no nixl library). The model config is ``tiny_model/config.json`` alone: no
weights, no tokenizer (``skip_tokenizer_init=True``). ``conftest.py`` selects vLLM's CPU
platform before vLLM is imported. A workload with speculative decoding adds vLLM's
``SpeculativeConfig``: ``ngram`` as built, and ``mtp`` as an ngram config whose method is
then set to ``"mtp"`` (vLLM builds an MTP config only from a checkpoint with an MTP
module; its scheduler reads only the method, K and the flags). MTP runs with
``disable_eagle_block_drop=True``: pdlab's prefix cache keeps the trailing block of a hit
that vLLM drops for MTP on D, a difference ``test_sched_spec.py`` keeps (docs/upstream.md).

Everything this twin reports is in pdlab's numbering: vLLM keeps block 0 as its null
block, so vLLM's block ``b`` is pdlab's ``b - 1``, and vLLM gets one block more for the
same capacity. Reports are plain tuples and dicts, so two compare with ``==`` and print
readably.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from vllm.config import (
    CacheConfig,
    KVTransferConfig,
    ModelConfig,
    SchedulerConfig,
    SpeculativeConfig,
    VllmConfig,
)
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import DraftTokenIds, KVConnectorOutput, ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus
from vllm.v1.structured_output import StructuredOutputManager
from workload import Config, KVReport, Scheduled, Spec

TINY_MODEL = Path(__file__).parent / "tiny_model"
init_none_hash(sha256)

# ---- vLLM ------------------------------------------------------------------------------
_BASE: dict[int, VllmConfig] = {}
_SPEC: dict[tuple, SpeculativeConfig] = {}


def _speculative_config(base: VllmConfig, method: str, k: int, block_drop: bool):
    """vLLM's SpeculativeConfig for ``method`` and K (see the module docstring)."""
    key = (base.model_config.max_model_len, method, k, block_drop)
    spec = _SPEC.get(key)
    if spec is None:
        spec = SpeculativeConfig(
            method="ngram",
            num_speculative_tokens=k,
            target_model_config=base.model_config,
            target_parallel_config=base.parallel_config,
            disable_eagle_block_drop=not block_drop,
        )
        if method == "mtp":
            spec.method = "mtp"
        _SPEC[key] = spec
    return spec


def _vllm_config(cfg: Config, block_drop: bool = False) -> VllmConfig:
    """A VllmConfig for ``cfg``. Building one takes a tenth of a second, so one is built per
    ``max_model_len`` and copied with this workload's numbers (the scheduler reads them)."""
    base = _BASE.get(cfg.max_model_len)
    if base is None:
        n = cfg.max_model_len
        base = VllmConfig(
            model_config=ModelConfig(
                model=str(TINY_MODEL), skip_tokenizer_init=True, max_model_len=n, dtype="float32"
            ),
            scheduler_config=SchedulerConfig(
                max_num_seqs=1,
                max_num_batched_tokens=n,
                max_model_len=n,
                enable_chunked_prefill=True,
                is_encoder_decoder=False,
            ),
            cache_config=CacheConfig(block_size=16, enable_prefix_caching=True),
        )
        _BASE[cfg.max_model_len] = base
    vc = copy.copy(base)
    sc = vc.scheduler_config = copy.copy(base.scheduler_config)
    sc.max_num_batched_tokens = cfg.budget
    sc.max_num_seqs = cfg.max_seqs
    sc.long_prefill_token_threshold = cfg.threshold
    sc.scheduler_reserve_full_isl = cfg.reserve_full_isl
    cc = vc.cache_config = copy.copy(base.cache_config)
    cc.block_size = cfg.block_size
    cc.enable_prefix_caching = cfg.caching
    cc.num_gpu_blocks = cfg.num_blocks + 1
    vc.kv_transfer_config = None
    if cfg.decode:
        vc.kv_transfer_config = KVTransferConfig(
            kv_connector="NixlConnector",
            kv_role="kv_consumer",
            kv_load_failure_policy=cfg.policy,
        )
    vc.speculative_config = None
    if cfg.spec_method is not None:
        vc.speculative_config = _speculative_config(
            base, cfg.spec_method, cfg.num_spec_tokens, block_drop
        )
    return vc


class VllmTwin:
    def __init__(self, cfg: Config, block_drop: bool = False) -> None:
        self.cfg = cfg
        vc = _vllm_config(cfg, block_drop)
        spec = FullAttentionSpec(
            block_size=cfg.block_size, num_kv_heads=1, head_size=1, dtype=torch.float32
        )
        kv_cache_config = KVCacheConfig(
            num_blocks=cfg.num_blocks + 1,
            kv_cache_tensors=[],
            kv_cache_groups=[KVCacheGroupSpec(["layer.0"], spec)],
        )
        self.sched = Scheduler(
            vc, kv_cache_config, StructuredOutputManager(vc), cfg.block_size, log_stats=True
        )
        self.hasher = get_request_block_hasher(cfg.block_size, sha256)
        self.finished_calls: list[tuple[str, str, tuple[int, ...]]] = []
        if self.sched.connector is not None:
            self._wrap_request_finished(self.sched.connector)
        mgr = self.sched.kv_cache_manager
        self.pool = mgr.block_pool
        self.req_to_blocks = mgr.coordinator.single_type_managers[0].req_to_blocks
        self.prefix_hits = (0, 0, 0, 0, 0, 0)

    def _wrap_request_finished(self, connector) -> None:
        inner = connector.request_finished_all_groups

        def request_finished_all_groups(request, block_ids):
            ids = tuple(b - 1 for b in block_ids[0])
            self.finished_calls.append((request.request_id, request.status.name, ids))
            return inner(request, block_ids)

        connector.request_finished_all_groups = request_finished_all_groups

    def add(self, s: Spec) -> None:
        extra = None
        params = s.kv_transfer_params()
        if params is not None:
            extra = {"kv_transfer_params": params}
        sp = SamplingParams(
            max_tokens=s.max_tokens, stop_token_ids=list(s.stop_token_ids), extra_args=extra
        )
        self.sched.add_request(
            Request(s.req_id, list(s.prompt), sp, None, block_hasher=self.hasher)
        )

    def abort(self, req_id: str) -> list[str]:
        done = self.sched.finish_requests(req_id, RequestStatus.FINISHED_ABORTED)
        return [r.request_id for r in done]

    def schedule(self):
        so = self.sched.schedule()
        rows = []
        cached = so.scheduled_cached_reqs
        by_id = {r.req_id: r for r in so.scheduled_new_reqs}
        cached_rows = dict(
            zip(cached.req_ids, zip(cached.num_computed_tokens, cached.new_block_ids))
        )
        for rid, n in so.num_scheduled_tokens.items():
            if rid in by_id:
                new = by_id[rid]
                rows.append((rid, n, "new", new.num_computed_tokens, _ids(new.block_ids)))
            else:
                c, new_ids = cached_rows[rid]
                # The V1 runner sends a resumed request among the cached rows, with all
                # its blocks; pdlab (like the V2 runner) sends it as a new request.
                kind = "new" if rid in cached.resumed_req_ids else "running"
                rows.append((rid, n, kind, c, _ids(new_ids)))
        loads = {}
        meta = so.kv_connector_metadata
        if meta is not None:
            for rid, m in meta.reqs_to_recv.items():
                loads[rid] = _ids(m.local_block_ids) if m.awaiting_kvs else None
        spec = tuple(sorted((r, tuple(d)) for r, d in so.scheduled_spec_decode_tokens.items()))
        return so, Scheduled(tuple(rows), tuple(sorted(so.preempted_req_ids)), loads, spec)

    def update(self, so, sampled: dict[str, list[int]], kv: KVReport | None):
        req_ids = list(so.num_scheduled_tokens)
        out = ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={r: i for i, r in enumerate(req_ids)},
            sampled_token_ids=[list(sampled.get(r, ())) for r in req_ids],
        )
        if kv is not None:
            out.kv_connector_output = KVConnectorOutput(
                finished_recving=set(kv.finished_recving) or None,
                failed_recving=set(kv.failed_recving),
                invalid_block_ids={b + 1 for b in kv.invalid_block_ids},
            )
        result = self.sched.update_from_output(so, out)
        outputs = []
        for eco in result.values():
            for o in eco.outputs:
                reason = None if o.finish_reason is None else str(o.finish_reason)
                outputs.append((o.request_id, tuple(o.new_token_ids), reason))
            stats = eco.scheduler_stats
            if stats is not None and stats.prefix_cache_stats is not None:
                p = stats.prefix_cache_stats
                self.prefix_hits = tuple(
                    a + b
                    for a, b in zip(
                        self.prefix_hits,
                        (
                            p.requests,
                            p.queries,
                            p.hits,
                            p.preempted_requests,
                            p.preempted_queries,
                            p.preempted_hits,
                        ),
                    )
                )
        return tuple(sorted(outputs))

    def drafts(self, drafts: dict[str, list[int]]) -> None:
        self.sched.update_draft_token_ids(DraftTokenIds(list(drafts), list(drafts.values())))

    def state(self) -> dict:
        s = self.sched
        reqs = {}
        for rid, r in s.requests.items():
            blocks = tuple(b.block_id - 1 for b in self.req_to_blocks.get(rid, ()))
            reqs[rid] = (
                r.status.name,
                r.num_computed_tokens,
                r.num_tokens,
                r.num_preemptions,
                blocks,
                tuple(r.spec_token_ids),
            )
        blocks = self.pool.blocks[1:]
        return {
            "requests": reqs,
            "running": tuple(r.request_id for r in s.running),
            "waiting": tuple(r.request_id for r in s.waiting),
            "kv_holding_waiting": tuple(r.request_id for r in s.kv_holding_waiting),
            "num_free_blocks": self.pool.get_num_free_blocks(),
            "free_queue": tuple(
                b.block_id - 1 for b in self.pool.free_block_queue.get_all_free_blocks()
            ),
            "cached_blocks": tuple(b.block_id - 1 for b in blocks if b.block_hash is not None),
            "ref_cnt": tuple(b.ref_cnt for b in blocks),
            "prefix_cache_stats": self.prefix_hits,
            "connector_request_finished": tuple(self.finished_calls),
        }


def _ids(groups) -> tuple[int, ...]:
    """vLLM's block ids of one group (a tuple of lists per group, or None) in pdlab's
    numbering."""
    if not groups:
        return ()
    (ids,) = groups
    return tuple(b - 1 for b in ids)
