"""LLMEngine: the loop ``schedule() -> execute_model() -> update_from_output()``.

Mirrors ``vllm/v1/engine/llm_engine.py`` and ``vllm/v1/engine/core.py`` (``EngineCore.step``)
in one small class: text in through the byte tokenizer, tokens out, greedy by default so
runs compare token for token, every step recorded in the tracer. The P/D pair lives in
``pdlab/disagg/pair.py``.

With a ``SpeculativeConfig`` the step ends as ``EngineCore.post_step`` does: the drafts
the runner proposed (``take_draft_token_ids``) go to ``Scheduler.update_draft_token_ids``
for the next step to verify.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from pdlab.engine.config import (
    AttentionConfig,
    CacheConfig,
    KVTransferConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    SpeculativeConfig,
    adjust_dcp_kv_cache_interleave_size,
    resolve_model_runner,
)
from pdlab.engine.core.sched.output import ModelRunnerOutput, SchedulerOutput
from pdlab.engine.core.sched.scheduler import Scheduler
from pdlab.engine.distributed.kv_transfer.base import KVConnector
from pdlab.engine.input_processor import check_kv_cache_fits, process_prompt, validate_params
from pdlab.engine.model_executor.model_loader import weights_label
from pdlab.engine.model_executor.models.deepseek_v2 import DeepseekV2ForCausalLM
from pdlab.engine.request import Request, RequestStatus, SamplingParams
from pdlab.engine.tokenizer import ByteTokenizer
from pdlab.engine.trace import Tracer
from pdlab.engine.worker.gpu.model_runner import ModelRunner
from pdlab.engine.worker.gpu.spec_decode.rejection_sampler import sampling_params_error
from pdlab.errors import (
    PdlabRuntimeError,
    PdlabTypeError,
    PdlabValueError,
    Phrase,
    check_int,
    invalid,
    none_or,
    one_line,
)
from pdlab.kernels.backend import get_backend, resolve


@dataclass
class RequestOutput:
    """What ``generate`` returns per prompt (vLLM's ``RequestOutput``, flattened)."""

    request_id: str
    prompt_token_ids: list[int]
    output_token_ids: list[int] = field(default_factory=list)
    text: str = ""
    finished: bool = False
    finish_reason: str | None = None
    kv_transfer_params: dict[str, Any] | None = None
    num_cached_tokens: int = 0
    error: str | None = None  # why, when finish_reason is "error"


class LLMEngine:
    def __init__(
        self, model_config: ModelConfig, cache_config: CacheConfig | None = None,
        scheduler_config: SchedulerConfig | None = None, kv_connector: KVConnector | None = None,
        tracer: Tracer | None = None, seed: int = 0, *, instance: str = "local",
        backend: str | None = None, model: DeepseekV2ForCausalLM | None = None,
        dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
        num_kv_splits: int | None = None, workspace_tokens: int = 2048,
        attention_config: AttentionConfig | None = None,
        parallel_config: ParallelConfig | None = None,
        kv_transfer_config: KVTransferConfig | None = None, model_runner: str | None = None,
        speculative_config: SpeculativeConfig | None = None,
    ) -> None:  # fmt: skip
        resolve(backend)  # a backend that cannot run here is one line now, not a failed step
        self.model_config = model_config
        none_or("speculative_config", speculative_config, SpeculativeConfig)
        # None: no speculative decoding (nothing drafts, nothing is padded).
        self.speculative_config = speculative_config
        self.attention_config = attention_config or AttentionConfig()
        if speculative_config is not None:
            # The builders' threshold follows K (effective_threshold), as upstream's.
            self.attention_config = dataclasses.replace(
                self.attention_config,
                num_speculative_tokens=speculative_config.num_speculative_tokens,
            )
        self.parallel_config = parallel_config or ParallelConfig()
        # "v2" (vLLM 0.33.0's default) or "v1"; None reads VLLM_USE_V2_MODEL_RUNNER.
        self.model_runner = resolve_model_runner(model_runner, self.parallel_config)
        self.cache_config = cache_config or CacheConfig()
        # A P/D instance under DCP stores K/V a block per rank (as EngineCore adjusts it).
        self.parallel_config = adjust_dcp_kv_cache_interleave_size(
            self.parallel_config, self.cache_config.block_size, kv_connector is not None
        )
        self.scheduler_config = scheduler_config or SchedulerConfig()
        self.tracer = tracer if tracer is not None else Tracer()
        self.instance = instance
        # The sink this engine, its scheduler, runner and connector report to; step()
        # advances its step. A connector built first takes the same object from the tracer.
        self._emit = self.tracer.sink(instance)
        self._emit.step = 0  # a tracer may outlive an earlier engine of this instance
        self.tokenizer = ByteTokenizer()
        if model is None:
            model = DeepseekV2ForCausalLM(model_config, dtype=dtype, device=device)
        elif model.config != model_config:
            raise PdlabValueError("err_model_mismatch")
        self.model = model.eval()
        self.max_model_len = (
            self.scheduler_config.max_model_len or model_config.max_position_embeddings
        )
        if self.max_model_len > model_config.max_position_embeddings:
            raise PdlabValueError(
                "err_model_max_len", value=self.max_model_len,
                limit=model_config.max_position_embeddings, model=model_config.name,
            )  # fmt: skip
        self.kv_transfer_config = kv_transfer_config
        check_kv_cache_fits(model_config, self.cache_config, self.model)
        self.kv_connector = kv_connector
        self.step_count = 0
        self._ids = itertools.count()
        self.scheduler = Scheduler(
            self.scheduler_config, self.cache_config, self.max_model_len, connector=kv_connector,
            emit=self._emit, kv_transfer_config=kv_transfer_config,
            speculative_config=speculative_config, vocab_size=model_config.vocab_size,
        )  # fmt: skip
        self.runner = ModelRunner(
            self.model, self.cache_config, self.scheduler_config, backend=backend, seed=seed,
            emit=self._emit, num_kv_splits=num_kv_splits, workspace_tokens=workspace_tokens,
            connector_worker=kv_connector, attention_config=self.attention_config,
            parallel_config=self.parallel_config, model_runner=self.model_runner,
            speculative_config=speculative_config,
        )  # fmt: skip
        self._outputs: dict[str, RequestOutput] = {}
        self.tracer.meta.setdefault("block_size", self.cache_config.block_size)
        self.tracer.meta.setdefault("model", model_config.name)
        self.tracer.meta.setdefault("weights", weights_label(model_config.weights))
        self.tracer.meta.setdefault("dtype", str(next(self.model.parameters()).dtype)[6:])
        builder = self.runner.attn_metadata_builder
        choice = self.attention_config.choice
        self.tracer.meta.setdefault("routing", {})[instance] = {
            "model_runner": self.model_runner,
            "mla_backend": self.attention_config.backend,
            "gpu": self.attention_config.gpu,
            # the platform's facts (None: the backend was named); the views word them
            "choice": None if choice is None else dataclasses.asdict(choice),
            "reorder_batch_threshold": builder.reorder_batch_threshold,
            "require_uniform": builder.require_uniform,
            "prefill_context_parallel_size": self.parallel_config.prefill_context_parallel_size,
            "decode_context_parallel_size": self.parallel_config.decode_context_parallel_size,
            "treat_short_extends_as_decodes": builder.treat_short_extends_as_decodes,
        }
        self.tracer.meta.setdefault("backend", backend or get_backend())

    # ---- requests --------------------------------------------------------------------
    def add_request(
        self, prompt: str | Sequence[int], sampling_params: SamplingParams | None = None,
        request_id: str | None = None, kv_transfer_params: dict[str, Any] | None = None,
    ) -> str:  # fmt: skip
        """Queue a prompt (text or token ids); returns its request id. Raises ``ValueError``
        or ``TypeError`` naming the argument, and queues nothing, when the request could
        never run: checked here, not inside ``step()``, where one bad request would fail
        a whole batch."""
        ids = process_prompt(prompt, self.tokenizer, self.model_config, self.max_model_len)
        validate_params(sampling_params, request_id, kv_transfer_params, self.model_config)
        error = sampling_params_error(self.speculative_config, sampling_params)
        if error is not None:  # the runner would fail it at its first step
            raise error
        rid = request_id if request_id is not None else f"{self.instance}-{next(self._ids)}"
        req = Request(
            rid, ids, sampling_params or SamplingParams(),
            kv_transfer_params=dict(kv_transfer_params) if kv_transfer_params else None,
        )  # fmt: skip
        self.scheduler.add_request(req)
        self._outputs[rid] = RequestOutput(rid, list(ids))
        self._emit(
            "add_request", req_id=rid, num_prompt_tokens=len(ids), prompt_token_ids=ids,
            kv_transfer_params=kv_transfer_params,
        )  # fmt: skip
        return rid

    def abort_request(self, request_ids: str | Sequence[str]) -> None:
        ids = [request_ids] if isinstance(request_ids, str) else request_ids
        if not isinstance(ids, Sequence) or not all(isinstance(r, str) for r in ids):
            allowed = Phrase("err_x_request_ids")
            raise invalid("request_ids", request_ids, allowed, PdlabTypeError)
        ids = list(ids)
        self.scheduler.finish_requests(ids, RequestStatus.FINISHED_ABORTED)
        for rid in ids:
            out = self._outputs.get(rid)
            if out is not None and not out.finished:
                out.finished, out.finish_reason = True, "abort"

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests()

    # ---- the loop --------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        """One engine step; returns the outputs that changed."""
        self.step_count += 1
        self._emit.step = self.step_count
        so = self.scheduler.schedule()
        self._emit_step(so)
        executed = False
        try:
            mro = self.runner.execute_model(so, self.step_count)
            errors = dict(self.runner.req_errors)
            executed = so.total_num_scheduled_tokens > 0
        except Exception as e:  # noqa: BLE001 - outside any one request: fail the batch
            why = one_line(e)
            rids = list(so.num_scheduled_tokens)
            mro = ModelRunnerOutput(req_ids=rids, sampled_token_ids=[[] for _ in rids])
            errors = dict.fromkeys(rids, why)
        changed = self._finish_errored(errors)
        for eco in self.scheduler.update_from_output(so, mro):
            out = self._outputs.get(eco.req_id)
            if out is None:
                continue
            out.output_token_ids.extend(eco.new_token_ids)
            out.text = self.tokenizer.decode(out.output_token_ids)
            if eco.finish_reason is not None:
                out.finished, out.finish_reason = True, str(eco.finish_reason)
                out.error = out.error or eco.error
                out.kv_transfer_params = eco.kv_transfer_params
                out.num_cached_tokens = max(eco.num_cached_tokens, 0)
            changed.append(out)
        if executed:
            self._post_step()
        return changed

    def _post_step(self) -> None:
        """Upstream's ``EngineCore.post_step``: the drafts proposed during the step go to
        the scheduler for the next one."""
        take = getattr(self.runner, "take_draft_token_ids", None)
        if self.speculative_config is None or take is None:
            return
        draft_token_ids = take()
        if draft_token_ids is not None:
            self.scheduler.update_draft_token_ids(draft_token_ids)

    def _finish_errored(self, errors: dict[str, str]) -> list[RequestOutput]:
        """Requests whose step raised end with ``FINISHED_ERROR`` and give their blocks
        back; the others carry on (``update_from_output`` skips finished requests)."""
        changed = []
        for rid in self.scheduler.finish_requests(list(errors), RequestStatus.FINISHED_ERROR):
            self._emit("request_error", req_id=rid, error=errors[rid])
            out = self._outputs.get(rid)
            if out is not None:
                out.finished, out.finish_reason, out.error = True, "error", errors[rid]
                changed.append(out)
        return changed

    def _emit_step(self, so: SchedulerOutput) -> None:
        if so.total_num_scheduled_tokens == 0:
            return  # an idle step (waiting for K/V, or P waiting to free): nothing to show
        sched = []
        for rid, n in so.num_scheduled_tokens.items():
            req = self.scheduler.get_request(rid)
            # schedule() already advanced num_computed_tokens (vLLM's _update_after_schedule)
            before = req.num_computed_tokens - n
            drafts = so.scheduled_spec_decode_tokens.get(rid, [])
            sched.append(
                {
                    "req_id": rid,
                    "num_prompt_tokens": req.num_prompt_tokens,
                    "num_tokens": req.num_tokens,
                    "num_computed_tokens_before": before,
                    "num_computed_tokens_after": before + n,
                    "num_scheduled_tokens": n,
                    # The drafts among them (-1: a placeholder padding a new row).
                    "spec_token_ids": list(drafts),
                    "block_ids": self.scheduler.kv_cache_manager.get_block_ids(rid),
                }
            )
        self._emit(
            "step", scheduled=sched, total_num_scheduled_tokens=so.total_num_scheduled_tokens,
            kv_cache_usage=self.scheduler.kv_cache_manager.usage,
        )  # fmt: skip

    def generate(
        self, prompts: str | Sequence[int] | Sequence[str | Sequence[int]],
        sampling_params: SamplingParams | None = None, max_steps: int = 100_000,
    ) -> list[RequestOutput]:  # fmt: skip
        """Run prompts to completion; outputs in prompt order."""
        check_int("max_steps", max_steps)
        rids = [self.add_request(p, sampling_params) for p in prompt_list(prompts)]
        self.run_until_done(max_steps)
        return [self._outputs[r] for r in rids]

    def run_until_done(self, max_steps: int = 100_000) -> None:
        check_int("max_steps", max_steps)
        for _ in range(max_steps):
            if not self.has_unfinished_requests():
                return
            self.step()
        raise PdlabRuntimeError("err_unfinished", n=max_steps)

    def get_output(self, request_id: str) -> RequestOutput:
        if request_id not in self._outputs:
            allowed = Phrase("err_x_id_returned")
            raise PdlabValueError(
                "err_unknown", name="request_id", value=request_id, allowed=allowed
            )
        return self._outputs[request_id]


def prompt_list(
    prompts: str | Sequence[int] | Sequence[str | Sequence[int]],
) -> list[str | Sequence[int]]:
    """One prompt (text or token ids) or a batch of them, as a batch."""
    if isinstance(prompts, str) or (
        isinstance(prompts, Sequence) and prompts and isinstance(prompts[0], int)
    ):
        return [prompts]  # type: ignore[list-item]
    return list(prompts)  # type: ignore[arg-type]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run a block on one CPU thread: the tiny model's matrices are too small to split, and
    on a busy machine the thread pool's overhead turns a fraction of a second into several."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
