"""ModelRunner: turns a ``SchedulerOutput`` into one batched forward and sampled tokens.

Mirrors Model Runner V2, vLLM 0.33.0's default (``vllm/v1/worker/gpu/model_runner.py``:
``add_requests``, ``update_requests``, ``gather_batch_req_state``, ``prepare_inputs``,
``sample``, ``postprocess_sampled`` with ``post_update``, ``execute_model``,
``sample_tokens`` with the speculator's ``propose``, ``take_draft_token_ids``;
``input_batch.py``: ``combine_sampled_and_draft_tokens`` picks the logits rows, the last
``1 + len(drafts)`` positions of each sampling row), with V1
(``vllm/v1/worker/gpu_model_runner.py``) as the other setting of the same switch
(``model_runner``, upstream's ``VLLM_USE_V2_MODEL_RUNNER``). Its methods follow upstream's
order, each group under a section comment naming the upstream methods it stands for. The
runner keeps its own copy of each request's tokens and block ids, updated from the
scheduler's deltas, and owns the paged latent caches, one tensor per layer.

Per step: the batch order and each row's ``is_prefilling`` as the chosen runner computes
them (``batch.py``), the flattened inputs and ``CommonAttentionMetadata``, the MLA
builder's split (``pdlab/engine/attention/mla_builder.py``), the model, then sampling for
the requests whose known tokens are all computed after this step. Every row gets one
``route`` event (``pdlab/engine/events.py``). pdlab captures no CUDA graphs:
``decode_graph_eligible`` is recorded, not acted on.

With a ``SpeculativeConfig`` (``spec_decode/``), a row with scheduled drafts feeds the
drafts this runner proposed for it (token 0 where it proposed none, as V2's zeroed draft
buffer), is verified greedily at its last ``1 + d`` positions and rolls
``num_computed_tokens`` back over the rejected ones (V2's ``post_update``); then the
drafter proposes the next step's drafts, which ``take_draft_token_ids`` hands over.

One bad request cannot take the batch down: a pdlab addition (``_run_guarded``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from pdlab.engine.attention.backend import CommonAttentionMetadata, batch_region
from pdlab.engine.attention.mla_attention import ForwardContext, MLAAttention
from pdlab.engine.attention.mla_builder import MLAMetadata, MLAMetadataBuilder
from pdlab.engine.config import AttentionConfig, CacheConfig, ParallelConfig, SchedulerConfig
from pdlab.engine.core.sched.output import (
    DraftTokenIds,
    KVConnectorOutput,
    ModelRunnerOutput,
    SchedulerOutput,
)
from pdlab.engine.distributed.kv_transfer.base import KVConnectorWorkerBase
from pdlab.engine.distributed.kv_transfer.first_token import tokens_from_hidden_states
from pdlab.engine.math_utils import cdiv
from pdlab.engine.model_executor.models.deepseek_v2 import DeepseekV2ForCausalLM
from pdlab.engine.trace import EventSink
from pdlab.engine.worker.gpu.batch import BatchReqState, gather_batch_req_state
from pdlab.engine.worker.gpu.spec_decode.mtp import DraftRow, MTPProposer
from pdlab.engine.worker.gpu.spec_decode.ngram import NgramProposer
from pdlab.engine.worker.gpu.spec_decode.rejection_sampler import (
    PLACEHOLDER_TOKEN_ID,
    gather_draft_sampled,
    rejection_sample_greedy,
    sampling_params_error,
)
from pdlab.errors import Phrase, one_line


@dataclass
class CachedRequestState:
    req_id: str
    prompt_token_ids: list[int]
    sampling_params: Any
    block_ids: list[int]
    num_computed_tokens: int
    output_token_ids: list[int] = field(default_factory=list)
    generator: torch.Generator | None = None
    # V2's prefill_len: every token id the runner was given with the request (batch.py).
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


class ModelRunner:
    """One instance's model runner (upstream's ``GPUModelRunner``); see the module docstring."""

    def __init__(
        self, model: DeepseekV2ForCausalLM,
        cache_config: CacheConfig, scheduler_config: SchedulerConfig,
        backend: str | None = None, seed: int = 0, emit: EventSink | None = None,
        num_kv_splits: int | None = None, workspace_tokens: int = 2048,
        connector_worker: KVConnectorWorkerBase | None = None,
        attention_config: AttentionConfig | None = None,
        parallel_config: ParallelConfig | None = None,
        model_runner: str = "v2", speculative_config: Any = None,
    ) -> None:  # fmt: skip
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
        self.cfg, self.cache_config = model.config, cache_config
        self.scheduler_config = scheduler_config
        self.backend, self.seed, self.emit = backend, seed, emit
        self.num_kv_splits, self.workspace_tokens = num_kv_splits, workspace_tokens
        self.connector_worker = connector_worker
        self.attention = MLAAttention()
        self.attn_metadata_builder = MLAMetadataBuilder(
            cache_config.block_size, self.attention_config, self.parallel_config, workspace_tokens
        )
        self.drafter: MTPProposer | NgramProposer | None = None
        if speculative_config is not None and speculative_config.method == "mtp":
            max_model_len = scheduler_config.max_model_len or self.cfg.max_position_embeddings
            builder, block_size = self.attn_metadata_builder, cache_config.block_size
            self.drafter = MTPProposer(model, k, builder, block_size, max_model_len)
        elif speculative_config is not None:
            self.drafter = NgramProposer(
                k, speculative_config.prompt_lookup_min, speculative_config.prompt_lookup_max,
                lambda rid: self.requests[rid].all_token_ids,
            )  # fmt: skip
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

    # ---- request state (finish_requests, add_requests, update_requests) ------------------
    def _update_states(self, so: SchedulerOutput) -> None:
        for rid in (*so.finished_req_ids, *(getattr(so, "preempted_req_ids", None) or ())):
            self.requests.pop(rid, None)
        for new in so.scheduled_new_reqs:
            sp = new.sampling_params
            gen = None
            if getattr(sp, "temperature", 0.0) > 0:
                seed = getattr(sp, "seed", None)
                if seed is None:
                    seed = self.seed * 1_000_003 + self._num_generators
                self._num_generators += 1
                gen = torch.Generator().manual_seed(int(seed))
            prompt = list(new.prompt_token_ids)
            outputs = list((getattr(new, "all_token_ids", None) or prompt)[len(prompt) :])
            self.requests[new.req_id] = CachedRequestState(
                new.req_id, prompt, sp, list(new.block_ids), new.num_computed_tokens, outputs, gen,
                prefill_len=getattr(new, "prefill_len", 0) or len(prompt) + len(outputs),
            )  # fmt: skip
        c = so.scheduled_cached_reqs
        for i, rid in enumerate(c.req_ids):
            st = self.requests[rid]
            st.num_computed_tokens = c.num_computed_tokens[i]
            new_blocks = c.new_block_ids[i]
            if c.resumed_from_preemption[i]:
                st.block_ids = list(new_blocks or [])
            elif new_blocks:
                st.block_ids.extend(new_blocks)

    # ---- the batch (gather_batch_req_state, prepare_inputs, prepare_attn) ----------------
    def _run_batch(self, so: SchedulerOutput, rids: list[str]) -> dict[str, list[int]]:
        """One batched forward over ``rids``: the batch order, the inputs, the builder's
        split, the model, then sampling and drafting (``_sample_and_draft``)."""
        builder = self.attn_metadata_builder
        spec = dict(getattr(so, "scheduled_spec_decode_tokens", None) or {})
        spec = {r: list(spec[r]) for r in rids if spec.get(r)}
        batch = gather_batch_req_state(
            {r: so.num_scheduled_tokens[r] for r in rids},
            {r: self.requests[r].num_computed_tokens for r in rids},
            {r: len(self.requests[r].prompt_token_ids) for r in rids},
            {r: self.requests[r].prefill_len for r in rids}, model_runner=self.model_runner,
            use_pcp=self.parallel_config.use_pcp,
            reorder_batch_threshold=builder.reorder_batch_threshold, draft_tokens=spec or None,
            decode_query_len=1 + self.num_speculative_tokens,
        )  # fmt: skip
        num_drafts = [len(spec.get(r, ())) for r in batch.req_ids]
        fed = {r: self._fed_drafts(self.requests[r], d) for r, d in spec.items()}
        input_ids, positions, common = self.prepare_inputs(batch, num_drafts, fed)
        qsl = common.query_start_loc_cpu.tolist()
        meta = builder.build(common)
        if self.emit is not None:
            prefilling = [bool(x) for x in common.is_prefilling]
            self._emit_routes(batch, meta, prefilling, num_drafts, spec)
        hidden = self.model(input_ids, positions, self._ctx(meta))
        states = [self.requests[r] for r in batch.req_ids]
        q_lens, computed = batch.num_scheduled_tokens, batch.num_computed_tokens
        return self._sample_and_draft(
            states, q_lens, computed, num_drafts, fed, qsl, input_ids, positions, hidden, meta
        )

    @staticmethod
    def _fed_drafts(s: CachedRequestState, scheduled: list[int]) -> list[int]:
        """The drafts a verifying row feeds, and so the ones it verifies: this runner's own
        proposals (V2 reads its draft buffer; the scheduler's list gives only their count),
        ``-1`` where it proposed none or the scheduler sent a placeholder. Verifying any
        other list would accept a bonus token computed on a context the model never saw."""
        own = s.draft_token_ids
        return [
            own[j] if j < len(own) and t != PLACEHOLDER_TOKEN_ID else PLACEHOLDER_TOKEN_ID
            for j, t in enumerate(scheduled)
        ]

    def prepare_inputs(
        self, batch: BatchReqState, num_drafts: list[int], fed: dict[str, list[int]] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, CommonAttentionMetadata]:
        """The flattened token ids and positions of a batch in its order, and its
        ``CommonAttentionMetadata`` (``slot_mapping``, ``block_table``, ``query_start_loc``,
        ``seq_lens``, ``is_prefilling``). V2 builds ids and positions in ``prepare_inputs``
        and the block tables and slot mappings in ``prepare_attn``; V1's ``_prepare_inputs``
        builds them all, and so does pdlab, in one loop over the rows."""
        bs = self.cache_config.block_size
        rids = batch.req_ids
        states = [self.requests[r] for r in rids]
        q_lens, computed = batch.num_scheduled_tokens, batch.num_computed_tokens
        ids, pos, slots = [], [], []
        for s, n, c, d in zip(states, q_lens, computed, num_drafts):
            toks = s.all_token_ids[c : c + n - d]
            if len(toks) != n - d:
                raise RuntimeError(
                    f"request {s.req_id}: scheduled {n - d} known tokens from {c} but only "
                    f"{s.num_tokens} are known"
                )
            # A verifying row feeds its drafts (_fed_drafts); a placeholder (-1) slot feeds
            # token 0, as V2's zeroed draft buffer does for a request it has not drafted for.
            drafts = (fed or {}).get(s.req_id) or [PLACEHOLDER_TOKEN_ID] * d
            ids.extend(toks + [max(t, 0) for t in drafts])
            for p in range(c, c + n):
                pos.append(p)
                slots.append(s.block_ids[p // bs] * bs + p % bs)
        max_blocks = max(len(s.block_ids) for s in states)
        block_table = torch.zeros(len(states), max_blocks, dtype=torch.int32)
        for i, s in enumerate(states):
            block_table[i, : len(s.block_ids)] = torch.tensor(s.block_ids, dtype=torch.int32)
        device = self.kv_caches[0].device
        slot_mapping = torch.tensor(slots, dtype=torch.int64)
        common = CommonAttentionMetadata.from_batch(
            q_lens, computed, batch.num_prompt_tokens, block_table.to(device), slot_mapping, rids,
            batch.is_prefilling,
        )  # fmt: skip
        input_ids = torch.tensor(ids, dtype=torch.long, device=device)
        positions = torch.tensor(pos, dtype=torch.long, device=device)
        return input_ids, positions, common

    def _ctx(self, meta: MLAMetadata) -> ForwardContext:
        return ForwardContext(
            meta, self.kv_caches, self.attention, self.backend,
            self.num_kv_splits, self.workspace_tokens, self.emit,
        )  # fmt: skip

    def _emit_routes(
        self, batch: BatchReqState, meta: MLAMetadata,
        prefilling: list[bool], num_drafts: list[int], spec: dict[str, list[int]],
    ) -> None:  # fmt: skip
        """One ``route`` event per row: what the runner and the builder decided."""
        b, rad = self.attn_metadata_builder, batch.prefill_runs_as_decode
        for i, r in enumerate(batch.req_ids):
            q, c = batch.num_scheduled_tokens[i], batch.num_computed_tokens[i]
            p = batch.num_prompt_tokens[i]
            decode = i < meta.num_decodes
            self.emit(
                "route", req_id=r, query_len=q, num_computed_tokens=c, num_prompt_tokens=p,
                is_prefilling=prefilling[i],
                region=batch_region(q, c, p, b.reorder_batch_threshold),
                decode_threshold=b.reorder_batch_threshold, require_uniform=b.require_uniform,
                treat_short_extends_as_decodes=b.treat_short_extends_as_decodes,
                prefill_context_parallel_size=self.parallel_config.prefill_context_parallel_size,
                mla_backend=self.attention_config.backend, model_runner=self.model_runner,
                prefill_len=batch.prefill_len[i],
                prefill_runs_as_decode=None if rad is None else bool(rad[i]),
                decode_graph_eligible=batch.decode_graph_eligible,
                path="decode" if decode else "prefill",
                forward="forward_mqa" if decode else "forward_mha",
                num_draft_tokens=num_drafts[i], draft_token_ids=list(spec.get(r, [])),
                uniform_decode_token_count=batch.uniform_decode_token_count,
            )  # fmt: skip

    # ---- sampling (sample) ---------------------------------------------------------------
    def _sample_row(
        self, s: CachedRequestState, c: int, drafts: list[int], logits: torch.Tensor
    ) -> list[int]:
        """The row's new tokens: one sample without drafts; greedy verification with."""
        if drafts:
            verified = gather_draft_sampled(drafts, c, s.prefill_len)
            target = [int(t) for t in logits.argmax(-1)]
            toks = rejection_sample_greedy(target, verified)
            if self.emit is not None:
                self.emit(
                    "verify", req_id=s.req_id, draft_token_ids=verified,
                    num_placeholders=verified.count(-1), target_token_ids=target,
                    sampled_token_ids=toks,
                    num_accepted=len(toks) - 1, num_rejected=len(drafts) + 1 - len(toks),
                )  # fmt: skip
        else:
            toks = [self._sample(s, logits[0])]
        for j, tok in enumerate(toks):
            row = logits[j]
            if self.keep_logits:
                self.logits.setdefault(s.req_id, []).append(row.detach().clone())
            s.output_token_ids.append(tok)
            if self.emit is not None:
                self.emit(
                    "sample", req_id=s.req_id, token=tok,
                    position=s.num_tokens - 1, logit=float(row[tok]),
                )  # fmt: skip
        return toks

    @staticmethod
    def _sample(s: CachedRequestState, logits: torch.Tensor) -> int:
        t = float(getattr(s.sampling_params, "temperature", 0.0) or 0.0)
        if t == 0.0:
            return int(torch.argmax(logits))
        # Sample on the CPU, where the request's seeded generator lives.
        probs = torch.softmax(logits.float().cpu() / t, dim=-1)
        return int(torch.multinomial(probs, 1, generator=s.generator))

    # ---- one step (execute_model) --------------------------------------------------------
    @torch.no_grad()
    def execute_model(self, so: SchedulerOutput, step: int = 0) -> ModelRunnerOutput:
        self._update_states(so)
        conn = self.connector_worker
        if conn is not None:
            conn.start_load_kv(so.kv_connector_metadata)
        self.req_errors, self._drafts = {}, {}
        sampled = self._run_guarded(so) if so.total_num_scheduled_tokens > 0 else {}
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

    # ---- after the forward (sample_tokens: post_update, the speculator's propose) --------
    def _sample_and_draft(
        self, states: list[CachedRequestState], q_lens: list[int], computed: list[int],
        num_drafts: list[int], spec: dict[str, list[int]], qsl: list[int],
        input_ids: torch.Tensor, positions: torch.Tensor, hidden: torch.Tensor, meta: MLAMetadata,
    ) -> dict[str, list[int]]:  # fmt: skip
        """After the target's forward: each row's new tokens, its ``num_computed_tokens``
        and, with a drafter, the drafts for its next step."""
        device = hidden.device
        # Sample only where every known token is now computed; a row with drafts is
        # verified at each of its last d + 1 positions (the target's logits there).
        sampled: dict[str, list[int]] = {}
        rows, logit_rows = [], []
        for i, (s, n, c, d) in enumerate(zip(states, q_lens, computed, num_drafts)):
            if c + n - d >= s.num_tokens:
                rows.append(i)
                logit_rows.extend(range(qsl[i + 1] - d - 1, qsl[i + 1]))
        logits = None
        if logit_rows:
            logits = self.model.compute_logits(hidden[torch.tensor(logit_rows, device=device)])
        at, draft_rows = 0, []
        for i, (s, n, c, d) in enumerate(zip(states, q_lens, computed, num_drafts)):
            rejected, next_token, lookahead = 0, None, ()
            if rows and i == rows[0]:
                rows.pop(0)
                assert logits is not None
                toks = self._sample_row(s, c, spec.get(s.req_id, []), logits[at : at + d + 1])
                conn = self.connector_worker
                if conn is not None and conn.wants_hidden_state(s.req_id):
                    conn.save_hidden_state(s.req_id, hidden[qsl[i + 1] - d - 1])
                at += d + 1
                sampled[s.req_id], rejected, next_token = toks, d + 1 - len(toks), toks[-1]
            elif c + n < s.num_tokens:
                next_token = s.all_token_ids[c + n]  # a prompt chunk: the next prompt token
                ahead = getattr(self.drafter, "num_speculative_tokens", 1) - 1
                lookahead = tuple(s.all_token_ids[c + n + 1 : c + n + 1 + ahead])
            # V2's post_update: computed += query_len - num_rejected (the scheduler rolls
            # its own count back the same way).
            s.num_computed_tokens = c + n - rejected
            if next_token is not None:
                draft_rows.append(
                    DraftRow(s.req_id, qsl[i], n, rejected, next_token, s.req_id in sampled,
                             s.block_ids, lookahead)
                )  # fmt: skip
        if self.drafter is not None and draft_rows:
            drafts = self.drafter.propose(draft_rows, input_ids, positions, hidden, self._ctx, meta)
            for r in draft_rows:
                self.requests[r.req_id].draft_token_ids = drafts.get(r.req_id, [])
                if r.req_id in drafts:
                    self._emit_draft(r, drafts[r.req_id], int(positions[r.last_token_index]))
            self._drafts.update(drafts)
        return sampled

    def _emit_draft(self, r: DraftRow, drafts: list[int], position: int) -> None:
        if self.emit is not None:
            self.emit(
                "draft", req_id=r.req_id,
                method=self.drafter.method if self.drafter else "",
                hidden_position=position if isinstance(self.drafter, MTPProposer) else -1,
                next_token=r.next_token, draft_token_ids=list(drafts),
            )  # fmt: skip

    # ---- drafts for the scheduler (take_draft_token_ids) ---------------------------------
    def take_draft_token_ids(self) -> DraftTokenIds | None:
        """The drafts proposed in the last step, for the scheduler's
        ``update_draft_token_ids`` (None when nothing was drafted)."""
        out, self._draft_token_ids = self._draft_token_ids, None
        return out

    # ---- one bad request cannot take the batch down (a pdlab addition) -------------------
    def _run_guarded(self, so: SchedulerOutput) -> dict[str, list[int]]:
        """vLLM lets an exception in ``execute_model`` kill the engine core (its runners in
        ``vllm/v1/worker/`` have no per-request isolation); pdlab keeps serving: a request
        whose inputs are out of range is left out before the forward, and if the batched
        forward still raises, each request runs alone once to find the ones that fail.
        Those land in ``req_errors``; the engine finishes them with ``FINISHED_ERROR`` and
        frees their blocks."""
        rids = [r for r, n in so.num_scheduled_tokens.items() if n > 0]
        spec = getattr(so, "scheduled_spec_decode_tokens", None) or {}
        for r in rids:
            why = self._input_error(r, so.num_scheduled_tokens[r], len(spec.get(r, ())))
            if why is not None:
                self.req_errors[r] = str(why)
        good = [r for r in rids if r not in self.req_errors]
        if not good:
            return {}
        try:
            return self._run_batch(so, good)
        except Exception as e:  # noqa: BLE001 - isolated below, reported per request
            if len(good) == 1:
                self.req_errors[good[0]] = one_line(e)
                return {}
        sampled: dict[str, list[int]] = {}
        for r in good:
            try:
                sampled.update(self._run_batch(so, [r]))
            except Exception as e:  # noqa: BLE001
                self.req_errors[r] = one_line(e)
        return sampled

    def _input_error(self, rid: str, n: int, num_drafts: int = 0) -> Phrase | Exception | None:
        """Why this request's inputs cannot run (sampling under speculative decoding,
        token ids, positions, block ids) as a catalog message, or None. ``n`` counts
        ``num_drafts`` drafts."""
        s = self.requests.get(rid)
        if s is None:
            return Phrase("err_runner_no_state", req=rid)
        error = sampling_params_error(self.speculative_config, s.sampling_params)
        if error is not None:
            return error
        c, bs = s.num_computed_tokens, self.cache_config.block_size
        toks = s.all_token_ids[c : c + n - num_drafts]
        if num_drafts < 0 or len(toks) != n - num_drafts:
            return Phrase("err_runner_tokens", n=n - num_drafts, start=c, known=s.num_tokens)
        vocab = self.cfg.vocab_size
        bad = [t for t in toks if not 0 <= t < vocab]
        if bad:
            return Phrase("err_runner_token_id", value=bad[0], vocab=vocab)
        if c + n > self.cfg.max_position_embeddings:
            limit = self.cfg.max_position_embeddings
            return Phrase("err_runner_position", value=c + n - 1, limit=limit)
        need = cdiv(c + n, bs)
        if len(s.block_ids) < need:
            return Phrase("err_runner_blocks", have=len(s.block_ids), tokens=c + n, need=need)
        nb = self.cache_config.num_blocks
        wild = [b for b in s.block_ids[:need] if not 0 <= b < nb]
        if wild:
            return Phrase("err_runner_block_id", value=wild[0], num_blocks=nb)
        return None
