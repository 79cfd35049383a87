"""ModelRunner: turns a ``SchedulerOutput`` into one batched forward and sampled tokens.

Mirrors Model Runner V2, vLLM 0.33.0's default (``vllm/v1/worker/gpu/model_runner.py``:
``add_requests``, ``update_requests``, ``gather_batch_req_state``, ``prepare_inputs``,
``execute_model``), with V1 (``vllm/v1/worker/gpu_model_runner.py``) as the other setting
of the same switch (``model_runner``, upstream's ``VLLM_USE_V2_MODEL_RUNNER``). The runner
keeps its own copy of each request's tokens and block ids, updated from the scheduler's
deltas, and owns the paged latent caches, one tensor per layer.

Per step it orders the batch and computes each row's ``is_prefilling`` the way the chosen
runner does (``pdlab/model/batch.py``: V2's ``sort_batch_req_ids``, ``prefill_len``,
``prefill_runs_as_decode`` and ``decode_graph_eligible``; V1's four-region reorder and
``num_computed_tokens < num_prompt_tokens``); builds the flattened token ids, positions,
``slot_mapping``, ``query_start_loc``, ``seq_lens`` and ``block_table``; lets the MLA
metadata builder split the batch (``pdlab/attention/builder.py``); runs the model; and
samples only for requests whose known tokens are all computed after this step. pdlab
captures no CUDA graphs: ``decode_graph_eligible`` is recorded, not acted on.

With a ``SpeculativeConfig`` (``pdlab/spec_decode/``): a row with scheduled drafts feeds its
known tokens and then the drafts this runner proposed for it (token 0 where it proposed
none, as V2's zeroed draft buffer), is verified greedily at each of its last ``1 + d``
positions, and rolls ``num_computed_tokens`` back over the rejected ones (V2's
``post_update``); then the drafter (the MTP layer, on its own cache entry after the
target's layers, or prompt lookup) proposes the next step's drafts, which
``take_draft_token_ids`` hands to the engine.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from pdlab.attention.builder import MLAMetadata, MLAMetadataBuilder
from pdlab.attention.metadata import CommonAttentionMetadata
from pdlab.attention.mla import ForwardContext, MLAAttention
from pdlab.config import AttentionConfig, CacheConfig, ParallelConfig, SchedulerConfig
from pdlab.errors import one_line
from pdlab.kv_transfer.base import KVConnectorWorkerBase
from pdlab.kv_transfer.first_token import tokens_from_hidden_states
from pdlab.model.batch import gather_batch_req_state
from pdlab.model.deepseek import DeepseekV2ForCausalLM
from pdlab.model.faults import RunnerFaultsMixin
from pdlab.model.route_events import RouteEventsMixin
from pdlab.sched.output import (
    DraftTokenIds,
    KVConnectorOutput,
    ModelRunnerOutput,
    SchedulerOutput,
)
from pdlab.spec_decode.mtp import MTPProposer
from pdlab.spec_decode.ngram import NgramProposer
from pdlab.spec_decode.runner_mixin import SpecDecodeMixin
from pdlab.trace import EventSink


@dataclass
class CachedRequestState:
    req_id: str
    prompt_token_ids: list[int]
    sampling_params: Any
    block_ids: list[int]
    num_computed_tokens: int
    output_token_ids: list[int] = field(default_factory=list)
    generator: torch.Generator | None = None
    # V2's prefill_len: every token id the runner was given with the request (the prompt,
    # plus the outputs so far for a request resumed after preemption).
    prefill_len: int = 0
    # The drafts this runner proposed for the next step (V2's req_states.draft_tokens,
    # zeroed when a request is added): what a verifying row feeds.
    draft_token_ids: list[int] = field(default_factory=list)

    @property
    def all_token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)


class ModelRunner(SpecDecodeMixin, RouteEventsMixin, RunnerFaultsMixin):
    def __init__(
        self,
        model: DeepseekV2ForCausalLM,
        cache_config: CacheConfig,
        scheduler_config: SchedulerConfig,
        backend: str | None = None,
        seed: int = 0,
        emit: EventSink | None = None,
        num_kv_splits: int | None = None,
        workspace_tokens: int = 2048,
        connector_worker: KVConnectorWorkerBase | None = None,
        attention_config: AttentionConfig | None = None,
        parallel_config: ParallelConfig | None = None,
        model_runner: str = "v2",
        speculative_config: Any = None,
    ) -> None:
        self.model = model
        self.model_runner = model_runner
        self.attention_config = attention_config or AttentionConfig()
        self.speculative_config = speculative_config
        k = speculative_config.num_speculative_tokens if speculative_config else 0
        self.num_speculative_tokens = k
        if self.attention_config.num_speculative_tokens != k:
            # The builder's threshold follows the drafts (_init_reorder_batch_threshold).
            self.attention_config = dataclasses.replace(
                self.attention_config, num_speculative_tokens=k
            )
        self.parallel_config = parallel_config or ParallelConfig()
        self.cfg = model.config
        self.cache_config = cache_config
        self.scheduler_config = scheduler_config
        self.backend = backend
        self.seed = seed
        self.emit = emit
        self.num_kv_splits = num_kv_splits
        self.workspace_tokens = workspace_tokens
        self.connector_worker = connector_worker
        self.attention = MLAAttention()
        self.attn_metadata_builder = MLAMetadataBuilder(
            cache_config.block_size,
            self.attention_config,
            self.parallel_config,
            workspace_tokens,
        )
        self.drafter: MTPProposer | NgramProposer | None = None
        if speculative_config is not None and speculative_config.method == "mtp":
            self.drafter = MTPProposer(
                model,
                k,
                self.attn_metadata_builder,
                cache_config.block_size,
                scheduler_config.max_model_len or self.cfg.max_position_embeddings,
            )
        elif speculative_config is not None:
            self.drafter = NgramProposer(
                k,
                speculative_config.prompt_lookup_min,
                speculative_config.prompt_lookup_max,
                lambda rid: self.requests[rid].all_token_ids,
            )
        # One latent cache per layer; the MTP layer's entry follows the target's
        # (num_hidden_layers + num_nextn_predict_layers), and the connector moves them all.
        num_caches = self.cfg.num_hidden_layers + (
            self.cfg.num_nextn_predict_layers if isinstance(self.drafter, MTPProposer) else 0
        )
        p = next(model.parameters())
        # Unused slots hold NaN: a kernel that reads outside a sequence poisons the output.
        shape = (cache_config.num_blocks, cache_config.block_size, self.cfg.kv_cache_dim)
        try:
            self.kv_caches = [
                torch.full(shape, float("nan"), dtype=p.dtype, device=p.device)
                for _ in range(num_caches)
            ]
        except (RuntimeError, MemoryError) as e:  # torch.OutOfMemoryError is a RuntimeError
            gib = math.prod(shape) * p.element_size() * num_caches / 2**30
            raise ValueError(
                f"CacheConfig(num_blocks={cache_config.num_blocks}, "
                f"block_size={cache_config.block_size}) is too large: the latent cache needs "
                f"{gib:.1f} GiB on {p.device} and allocating it failed ({one_line(e)}); "
                "expected fewer blocks or a smaller block_size"
            ) from None
        self.requests: dict[str, CachedRequestState] = {}
        # Requests whose step raised, with the reason; the engine finishes them.
        self.req_errors: dict[str, str] = {}
        self._num_generators = 0
        # Set keep_logits to keep every sampled row's logits (tests compare them).
        self.keep_logits = False
        self.logits: dict[str, list[torch.Tensor]] = {}
        self._drafts: dict[str, list[int]] = {}
        self._draft_token_ids: DraftTokenIds | None = None
        if connector_worker is not None:
            connector_worker.register_kv_caches(self.kv_caches)

    # ---- persistent state ------------------------------------------------------------
    def _update_states(self, so: SchedulerOutput) -> None:
        for rid in so.finished_req_ids:
            self.requests.pop(rid, None)
        for rid in getattr(so, "preempted_req_ids", None) or ():
            self.requests.pop(rid, None)
        for new in so.scheduled_new_reqs:
            sp = new.sampling_params
            gen = None
            if getattr(sp, "temperature", 0.0) > 0:
                seed = (
                    sp.seed
                    if getattr(sp, "seed", None) is not None
                    else (self.seed * 1_000_003 + self._num_generators)
                )
                self._num_generators += 1
                gen = torch.Generator().manual_seed(int(seed))
            prompt = list(new.prompt_token_ids)
            outputs: list[int] = []
            all_ids = getattr(new, "all_token_ids", None)
            if all_ids is not None and len(all_ids) > len(prompt):
                outputs = list(all_ids[len(prompt) :])
            self.requests[new.req_id] = CachedRequestState(
                new.req_id,
                prompt,
                sp,
                list(new.block_ids),
                new.num_computed_tokens,
                outputs,
                gen,
                prefill_len=getattr(new, "prefill_len", 0) or len(prompt) + len(outputs),
            )
        c = so.scheduled_cached_reqs
        for i, rid in enumerate(c.req_ids):
            st = self.requests[rid]
            st.num_computed_tokens = c.num_computed_tokens[i]
            new_blocks = c.new_block_ids[i]
            if c.resumed_from_preemption[i]:
                st.block_ids = list(new_blocks or [])
            elif new_blocks:
                st.block_ids.extend(new_blocks)

    # ---- one step --------------------------------------------------------------------
    @torch.no_grad()
    def execute_model(self, so: SchedulerOutput, step: int = 0) -> ModelRunnerOutput:
        self._update_states(so)
        conn = self.connector_worker
        if conn is not None:
            conn.start_load_kv(so.kv_connector_metadata)
        sampled: dict[str, list[int]] = {}
        self.req_errors = {}
        self._drafts = {}
        if so.total_num_scheduled_tokens > 0:
            sampled = self._run_guarded(so)
        self._draft_token_ids = None
        if self._drafts:
            rids = [r for r in so.num_scheduled_tokens if r in self._drafts]
            self._draft_token_ids = DraftTokenIds(rids, [self._drafts[r] for r in rids])
        kv_out = None
        if conn is not None:
            conn.wait_for_save()
            sending, recving = conn.get_finished(so.finished_req_ids)
            kv_out = KVConnectorOutput(
                finished_sending=set(sending or ()),
                finished_recving=set(recving or ()),
                failed_recving=set(conn.get_failed_recving() or ()),
                invalid_block_ids=set(conn.get_block_ids_with_load_errors() or ()),
                num_loaded_tokens=dict(conn.take_loaded_tokens()),
                first_token_ids={
                    **conn.take_first_tokens(),
                    **tokens_from_hidden_states(self.model, conn.take_hidden_states(), self.emit),
                },
            )
        req_ids = list(so.num_scheduled_tokens)
        return ModelRunnerOutput(
            req_ids=req_ids,
            sampled_token_ids=[sampled.get(r, []) for r in req_ids],
            kv_connector_output=kv_out,
        )

    def _run_batch(self, so: SchedulerOutput, rids: list[str]) -> dict[str, list[int]]:
        bs = self.cache_config.block_size
        builder = self.attn_metadata_builder
        threshold = builder.reorder_batch_threshold
        spec = dict(getattr(so, "scheduled_spec_decode_tokens", None) or {})
        spec = {r: list(spec[r]) for r in rids if spec.get(r)}
        batch = gather_batch_req_state(
            {r: so.num_scheduled_tokens[r] for r in rids},
            {r: self.requests[r].num_computed_tokens for r in rids},
            {r: len(self.requests[r].prompt_token_ids) for r in rids},
            {r: self.requests[r].prefill_len for r in rids},
            model_runner=self.model_runner,
            use_pcp=self.parallel_config.use_pcp,
            reorder_batch_threshold=threshold,
            draft_tokens=spec or None,
            decode_query_len=1 + self.num_speculative_tokens,
        )
        rids = batch.req_ids
        states = [self.requests[r] for r in rids]
        q_lens, computed = batch.num_scheduled_tokens, batch.num_computed_tokens
        prompts = batch.num_prompt_tokens
        num_drafts = [len(spec.get(r, ())) for r in rids]

        ids, pos, slots = [], [], []
        for s, n, c, d in zip(states, q_lens, computed, num_drafts):
            toks = s.all_token_ids[c : c + n - d]
            if len(toks) != n - d:
                raise RuntimeError(
                    f"request {s.req_id}: scheduled {n - d} known tokens from {c} but only "
                    f"{s.num_tokens} are known"
                )
            # A verifying row feeds the runner's own drafts; a placeholder (-1) slot feeds
            # token 0, as V2's zeroed draft buffer does for a request it has not drafted for.
            fed = (s.draft_token_ids + [0] * d)[:d]
            ids.extend(toks + fed)
            for p in range(c, c + n):
                pos.append(p)
                slots.append(s.block_ids[p // bs] * bs + p % bs)
        max_blocks = max(len(s.block_ids) for s in states)
        block_table = torch.zeros(len(states), max_blocks, dtype=torch.int32)
        for i, s in enumerate(states):
            block_table[i, : len(s.block_ids)] = torch.tensor(s.block_ids, dtype=torch.int32)
        device = self.kv_caches[0].device
        common = CommonAttentionMetadata.from_batch(
            q_lens,
            computed,
            prompts,
            block_table.to(device),
            torch.tensor(slots, dtype=torch.int64),
            rids,
            batch.is_prefilling,
        )
        # The learner's expression, computed for every request as the runner in force does.
        is_prefilling = common.is_prefilling
        qsl = common.query_start_loc_cpu.tolist()
        meta = builder.build(common)
        if self.emit is not None:
            self._emit_routes(batch, meta, [bool(x) for x in is_prefilling], num_drafts, spec)
        input_ids = torch.tensor(ids, dtype=torch.long, device=device)
        positions = torch.tensor(pos, dtype=torch.long, device=device)
        hidden = self.model(input_ids, positions, self._ctx(meta))

        return self._sample_and_draft(
            states, q_lens, computed, num_drafts, spec, qsl, input_ids, positions, hidden, meta
        )

    def _ctx(self, meta: MLAMetadata) -> ForwardContext:
        return ForwardContext(
            meta,
            self.kv_caches,
            self.attention,
            self.backend,
            self.num_kv_splits,
            self.workspace_tokens,
            self.emit,
        )
