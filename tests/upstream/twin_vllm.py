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
module; its scheduler reads only the method, K, the flags and the draft model's
``num_nextn_predict_layers``, given here as a stand-in ``draft_model_config``). vLLM runs
as configured: under MTP its KV cache group holds the drafter's layers
(``is_eagle_group``, as ``kv_cache_planning.py`` flags it), and the block hasher looks
``VllmConfig.num_hash_lookahead_tokens`` past each block, as ``EngineCore`` builds it.

Everything this twin reports is in pdlab's numbering: vLLM keeps block 0 as its null
block, so vLLM's block ``b`` is pdlab's ``b - 1``, and vLLM gets one block more for the
same capacity. Reports are plain tuples and dicts, so two compare with ``==`` and print
readably.
"""

from __future__ import annotations

import ast
import copy
import importlib
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import vllm
from vllm.config import (
    CacheConfig,
    KVTransferConfig,
    ModelConfig,
    SchedulerConfig,
    SpeculativeConfig,
    VllmConfig,
)
from vllm.model_executor.layers.attention import mla_attention as upstream_mla
from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.attention import backend as upstream_backend
from vllm.v1.attention.backends import utils as upstream_utils
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import DraftTokenIds, KVConnectorOutput, ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus
from vllm.v1.structured_output import StructuredOutputManager
from vllm.v1.worker import cp_utils as upstream_cp_utils
from vllm.v1.worker import gpu_model_runner as upstream_v1
from vllm.v1.worker.gpu import model_runner as upstream_v2
from workload import Config, KVReport, Scheduled, Spec

from pdlab.engine.config import MLA_BACKENDS

TINY_MODEL = Path(__file__).parent / "tiny_model"
init_none_hash(sha256)

# ---- vLLM ------------------------------------------------------------------------------
_BASE: dict[int, VllmConfig] = {}
_SPEC: dict[tuple, SpeculativeConfig] = {}


def _speculative_config(base: VllmConfig, method: str, k: int, modules: int):
    """vLLM's SpeculativeConfig for ``method``, K and the MTP modules (the module
    docstring)."""
    key = (base.model_config.max_model_len, method, k, modules)
    spec = _SPEC.get(key)
    if spec is None:
        spec = SpeculativeConfig(
            method="ngram",
            num_speculative_tokens=k,
            target_model_config=base.model_config,
            target_parallel_config=base.parallel_config,
        )
        if method == "mtp":
            spec.method = "mtp"
            hf_config = SimpleNamespace(num_nextn_predict_layers=modules)
            spec.draft_model_config = SimpleNamespace(hf_config=hf_config)
        _SPEC[key] = spec
    return spec


def _vllm_config(cfg: Config) -> VllmConfig:
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
    if cfg.prefill:
        vc.kv_transfer_config = KVTransferConfig(
            kv_connector="NixlConnector", kv_role="kv_producer"
        )
    if cfg.decode:
        vc.kv_transfer_config = KVTransferConfig(
            kv_connector="NixlConnector",
            kv_role="kv_consumer",
            kv_load_failure_policy=cfg.policy,
        )
    vc.speculative_config = None
    if cfg.spec_method is not None:
        vc.speculative_config = _speculative_config(
            base, cfg.spec_method, cfg.num_spec_tokens, cfg.mtp_modules
        )
    return vc


class VllmTwin:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        vc = _vllm_config(cfg)
        spec = FullAttentionSpec(
            block_size=cfg.block_size, num_kv_heads=1, head_size=1, dtype=torch.float32
        )
        group = KVCacheGroupSpec(["layer.0"], spec)
        group.is_eagle_group = cfg.spec_method == "mtp"
        kv_cache_config = KVCacheConfig(
            num_blocks=cfg.num_blocks + 1, kv_cache_tensors=[], kv_cache_groups=[group]
        )
        self.sched = Scheduler(
            vc, kv_cache_config, StructuredOutputManager(vc), cfg.block_size, log_stats=True
        )
        self.hasher = get_request_block_hasher(cfg.block_size, sha256, vc.num_hash_lookahead_tokens)
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


# ---- routing: vLLM's own rules on one batch (test_batch_routing.py's grid) ----------------
VLLM_ROOT = Path(vllm.__file__).parent.parent
MLA_BUILDER_SOURCE = Path(upstream_mla.__file__).read_text()
V1_RUNNER_SOURCE = Path(upstream_v1.__file__).read_text()


class StandInBatch:
    """What upstream's V1 reorder reads of the runner's ``InputBatch``, and its swap."""

    def __init__(self, rows):
        self.req_ids = [f"r{i}" for i in range(len(rows))]
        self.num_computed_tokens_cpu = np.array([c for _, c, _ in rows])
        self.num_prompt_tokens = np.array([p for _, _, p in rows])

    def swap_states(self, i: int, j: int) -> None:
        ids = self.req_ids
        ids[i], ids[j] = ids[j], ids[i]
        for a in (self.num_computed_tokens_cpu, self.num_prompt_tokens):
            a[[i, j]] = a[[j, i]]


class StandInOutput:
    def __init__(self, rows):
        self.num_scheduled_tokens = {f"r{i}": q for i, (q, _, _) in enumerate(rows)}


def upstream_state(rows, use_pcp: bool, drafts=None, decode_query_len: int = 1):
    """Upstream's V2 ``GPUModelRunner.gather_batch_req_state`` on a stand-in runner: one
    slot per request in ``req_states``, no pipeline parallelism. ``rows``: request id ->
    ``(num_scheduled_tokens, num_computed_tokens, num_prompt_tokens, prefill_len)``."""
    rids = list(rows)
    req_states = SimpleNamespace(
        req_id_to_index={r: i for i, r in enumerate(rids)},
        prefill_len=SimpleNamespace(np=np.array([rows[r][3] for r in rids])),
        num_computed_prefill_tokens=np.array([min(rows[r][1], rows[r][3]) for r in rids]),
    )
    runner = SimpleNamespace(
        req_states=req_states,
        decode_query_len=decode_query_len,
        use_pp=False,
        adaptive_verification=None,
        pcp_manager=object() if use_pcp else None,
    )
    so = SimpleNamespace(
        num_scheduled_tokens={r: rows[r][0] for r in rids},
        total_num_scheduled_tokens=sum(rows[r][0] for r in rids),
        scheduled_spec_decode_tokens=drafts or {},
    )
    return upstream_v2.GPUModelRunner.gather_batch_req_state(runner, so, dummy_run=False)


def _returns(fn: ast.FunctionDef) -> str | None:
    for stmt in fn.body:
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            return ast.unparse(stmt.value).strip("'\"")
    return None


@dataclass(frozen=True)
class BuilderSwitches:
    """An upstream MLA builder's class attributes, and the expression its ``__init__``
    passes as ``supports_dcp_with_varlen`` (``"False"`` where it passes none)."""

    builder: str
    reorder_batch_threshold: int
    query_len_support: str
    supports_dcp_with_varlen: str


def upstream_switches(name: str, path: str) -> BuilderSwitches:
    """The builder of the upstream backend whose ``get_name()`` is ``name`` in ``path``
    (relative to the vllm package's parent): its ``get_builder_cls()``, or the common
    builder it inherits. Imported where the module imports on a CPU; else (FlashAttention
    MLA, CUTLASS MLA) read with ``ast``."""
    tree = ast.parse((VLLM_ROOT / path).read_text())
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    backends = [
        cls
        for cls in classes.values()
        for fn in cls.body
        if isinstance(fn, ast.FunctionDef) and fn.name == "get_name" and _returns(fn) == name
    ]
    assert backends, f"{path} has no backend whose get_name() is {name!r}"
    getters = [f for f in backends[0].body if getattr(f, "name", "") == "get_builder_cls"]
    builder_name = _returns(getters[0]) if getters else "MLACommonMetadataBuilder"
    common = upstream_mla.MLACommonMetadataBuilder
    if builder_name not in classes:
        assert builder_name == common.__name__, f"{path}: builder {builder_name} not found"
        return BuilderSwitches(
            builder_name, common.reorder_batch_threshold, common.query_len_support.value, "False"
        )
    dcp_varlen = "False"
    for fn in classes[builder_name].body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
            for call in ast.walk(fn):
                for kw in getattr(call, "keywords", ()):
                    if isinstance(call, ast.Call) and kw.arg == "supports_dcp_with_varlen":
                        dcp_varlen = ast.unparse(kw.value)
    module = path.removesuffix(".py").replace("/", ".")
    try:
        builder = getattr(importlib.import_module(module), builder_name)
        threshold, support = builder.reorder_batch_threshold, builder.query_len_support.value
    except Exception:  # CUDA-only imports: read the class
        threshold, support = common.reorder_batch_threshold, common.query_len_support.value
        for stmt in classes[builder_name].body:
            if isinstance(stmt, ast.AnnAssign | ast.Assign) and stmt.value is not None:
                target = stmt.target if isinstance(stmt, ast.AnnAssign) else stmt.targets[0]
                attr, value = ast.unparse(target), ast.unparse(stmt.value)
                if attr == "reorder_batch_threshold":
                    threshold = int(value)
                elif attr == "query_len_support":
                    support = upstream_mla.QueryLenSupport[value.split(".")[-1]].value
    return BuilderSwitches(builder_name, threshold, support, dcp_varlen)


def routing_vllm_config(rc) -> VllmConfig:
    """A real ``VllmConfig`` for a routing grid point: the tiny model's, with K drafts
    (``_speculative_config``), the PCP and DCP sizes, a NIXL consumer's
    ``KVTransferConfig`` where ``rc.nixl``, then ``adjust_dcp_kv_cache_interleave_size``
    run on one full-attention group of ``rc.block_size`` (as ``EngineCore`` runs it)."""
    base = _vllm_config(
        Config(rc.block_size, 64, 2048, 8, 0, 4096, True, False, False, "fail", None, 0)
    )
    vc = copy.copy(base)
    pc = vc.parallel_config = copy.copy(base.parallel_config)
    pc.prefill_context_parallel_size = rc.pcp
    pc.decode_context_parallel_size = rc.dcp
    vc.kv_transfer_config = None
    if rc.nixl:
        vc.kv_transfer_config = KVTransferConfig(
            kv_connector="NixlConnector", kv_role="kv_consumer"
        )
    vc.speculative_config = None
    if rc.num_spec_tokens:
        vc.speculative_config = _speculative_config(base, "mtp", rc.num_spec_tokens, 1)
    spec = FullAttentionSpec(
        block_size=rc.block_size, num_kv_heads=1, head_size=1, dtype=torch.float32
    )
    vc.adjust_dcp_kv_cache_interleave_size([KVCacheGroupSpec(["layer.0"], spec)])
    return vc


def vllm_threshold(vc: VllmConfig, switches: BuilderSwitches) -> int:
    """The builder's threshold after upstream's own ``_init_reorder_batch_threshold``
    (``vllm/v1/attention/backend.py``), called as ``MLACommonMetadataBuilder.__init__``
    calls it, with ``supports_dcp_with_varlen`` evaluated as the builder's ``__init__``
    computes it from the config."""
    call = (
        "supports_spec_decode = self.query_len_support != QueryLenSupport.SINGLE_ONLY\n"
        "        self._init_reorder_batch_threshold(\n"
        "            self.reorder_batch_threshold, supports_spec_decode, supports_dcp_with_varlen"
    )
    assert call in MLA_BUILDER_SOURCE, "MLACommonMetadataBuilder.__init__ no longer calls it so"
    pc = vc.parallel_config
    names = {
        "interleave_size": pc.cp_kv_cache_interleave_size,
        "parallel_config": pc,
        "vllm_config": vc,
    }
    dcp_varlen = bool(eval(switches.supports_dcp_with_varlen, {}, names))
    builder = SimpleNamespace(vllm_config=vc)
    upstream_backend.AttentionMetadataBuilder._init_reorder_batch_threshold(
        builder,
        switches.reorder_batch_threshold,
        switches.query_len_support != upstream_mla.QueryLenSupport.SINGLE_ONLY.value,
        dcp_varlen,
    )
    return builder.reorder_batch_threshold


def vllm_routing(rc, switches: BuilderSwitches, batch) -> dict:
    """What vLLM 0.33.0 decides for ``batch`` under ``rc``: the interleave and threshold,
    the runner's order, ``is_prefilling`` and its graph decision (V2's
    ``gather_batch_req_state`` and ``uniform_tok_count == decode_query_len``; V1's
    four-region reorder and ``_is_uniform_decode`` with ``uniform_decode_query_len``), and
    the split as ``MLACommonMetadataBuilder.build`` calls ``split_decodes_and_prefills``,
    with the forward each row takes (``forward_mqa`` for the decodes, ``forward_mha`` for
    the rest)."""
    assert "self.uniform_decode_query_len = 1 + self.num_spec_tokens" in V1_RUNNER_SOURCE
    vc = routing_vllm_config(rc)
    threshold = vllm_threshold(vc, switches)
    spec = vc.speculative_config
    k = 0 if spec is None else spec.num_speculative_tokens
    rows, rids = batch.rows, list(batch.rows)
    report: dict = {
        "cp_kv_cache_interleave_size": vc.parallel_config.cp_kv_cache_interleave_size,
        "reorder_batch_threshold": threshold,
    }
    use_pcp = vc.parallel_config.prefill_context_parallel_size > 1
    if rc.model_runner == "v2":
        state, uniform = upstream_state(rows, use_pcp, batch.drafts, 1 + k)
        order = list(state.req_ids)
        is_prefilling = state.is_prefilling_np.tolist()
        if use_pcp:
            # Each PCP rank puts its decodes first (PCPManager._reorder_segments).
            perm = sorted(range(len(order)), key=lambda i: is_prefilling[i])
            order, is_prefilling = [order[i] for i in perm], [is_prefilling[i] for i in perm]
        runs = state.prefill_runs_as_decode_np
        report |= {
            "prefill_runs_as_decode": None if runs is None else tuple(runs.tolist()),
            "decode_graph_eligible": state.decode_graph_eligible,
            "uniform_decode_token_count": uniform,
            "uniform_decode": uniform == 1 + k,
        }
    else:
        flat = [rows[r][:3] for r in rids]
        ib = StandInBatch(flat)
        upstream_utils.reorder_batch_to_split_decodes_and_prefills(
            ib, StandInOutput(flat), decode_threshold=threshold
        )
        order = [rids[int(r[1:])] for r in ib.req_ids]
        is_prefilling = [rows[r][1] < rows[r][2] for r in order]
        q = [rows[r][0] for r in order]
        uniform_decode = upstream_v1.GPUModelRunner._is_uniform_decode(
            max(q), 1 + k, sum(q), len(q)
        )
        report |= {
            "prefill_runs_as_decode": None,
            "uniform_decode_token_count": max(q) if uniform_decode else None,
            "uniform_decode": uniform_decode,
        }
    q = [rows[r][0] for r in order] + [0] * batch.num_padding_rows
    qsl = torch.zeros(len(q) + 1, dtype=torch.int32)
    qsl[1:] = torch.cumsum(torch.tensor(q, dtype=torch.int32), 0)
    seq = [rows[r][1] + rows[r][0] for r in order] + [1] * batch.num_padding_rows
    m = upstream_backend.CommonAttentionMetadata(
        query_start_loc=qsl,
        query_start_loc_cpu=qsl,
        seq_lens=torch.tensor(seq, dtype=torch.int32),
        num_reqs=len(q),
        num_actual_tokens=int(qsl[-1]),
        max_query_len=max(q),
        max_seq_len=max(seq),
        block_table_tensor=torch.zeros(len(q), 1, dtype=torch.int32),
        slot_mapping=torch.zeros(int(qsl[-1]), dtype=torch.int64),
        is_prefilling=torch.tensor(is_prefilling + [False] * batch.num_padding_rows),
    )
    split = tuple(
        int(x)
        for x in upstream_utils.split_decodes_and_prefills(
            m,
            decode_threshold=threshold,
            require_uniform=switches.query_len_support != upstream_mla.QueryLenSupport.VARLEN.value,
            treat_short_extends_as_decodes=not use_pcp,
        )
    )
    report |= {
        "order": tuple(order),
        "is_prefilling": tuple(is_prefilling),
        "split": split,
        "forward": tuple("mqa" if i < split[0] else "mha" for i in range(len(order))),
    }
    return report


def upstream_impl_flag(name: str, path: str, attr: str):
    """A class attribute of the attention impl of the upstream backend whose ``get_name()``
    is ``name`` (its ``get_impl_cls()``), read with ``ast`` along the impl's bases in the
    same file, then from the first base the file does not define (imported: upstream's
    ``MLACommonImpl`` and the classes above it)."""
    tree = ast.parse((VLLM_ROOT / path).read_text())
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    backend = next(
        cls
        for cls in classes.values()
        for fn in cls.body
        if isinstance(fn, ast.FunctionDef) and fn.name == "get_name" and _returns(fn) == name
    )
    getter = next(f for f in backend.body if getattr(f, "name", "") == "get_impl_cls")
    cls = classes[_returns(getter)]
    while True:
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign | ast.Assign) and stmt.value is not None:
                target = stmt.target if isinstance(stmt, ast.AnnAssign) else stmt.targets[0]
                if ast.unparse(target) == attr:
                    return ast.literal_eval(stmt.value)
        base = ast.unparse(cls.bases[0]).split("[")[0]
        if base not in classes:
            return getattr(getattr(upstream_mla, base), attr)
        cls = classes[base]


class _StandInLayer(AttentionLayerBase):
    """An attention layer as ``check_attention_cp_compatibility`` reads one: its impl."""

    get_attn_backend = None
    get_kv_cache_spec = None

    def __init__(self, impl) -> None:
        self.impl = impl


def vllm_refuses_cp(rc, vc: VllmConfig | None = None) -> str | None:
    """Upstream's ``check_attention_cp_compatibility`` (``vllm/v1/worker/cp_utils.py``,
    which both runners call at start-up) on ``rc``'s adjusted config with one layer whose
    impl carries the backend's ``supports_mtp_with_cp_non_trivial_interleave_size``; its
    assertion's message, or None. (The layer reports it returns the LSE for decode, so
    only the speculative-decoding check speaks.)"""
    profile = MLA_BACKENDS[rc.backend]
    vc = vc or routing_vllm_config(rc)
    vc.compilation_config = copy.copy(vc.compilation_config)
    impl = SimpleNamespace(
        supports_mtp_with_cp_non_trivial_interleave_size=upstream_impl_flag(
            profile.name, profile.upstream, "supports_mtp_with_cp_non_trivial_interleave_size"
        ),
        dcp_world_size=rc.dcp,
        need_to_return_lse_for_decode=True,
    )
    vc.compilation_config.static_forward_context = {"layer.0": _StandInLayer(impl)}
    try:
        upstream_cp_utils.check_attention_cp_compatibility(vc)
    except AssertionError as e:
        return str(e)
    return None
