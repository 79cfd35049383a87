"""A prefill/decode pair in one process, driven the way vLLM's P/D proxy drives two
instances (``examples/online_serving/disaggregated_serving/`` and the toy proxy in
``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py``):

1. the prompt goes to P with ``max_tokens=1`` and ``{"do_remote_decode": True}``;
2. P prefills, samples one token (the proxy discards it), holds the blocks, and returns
   ``kv_transfer_params`` (its block ids and engine id);
3. the original request goes to D with those params (``do_remote_prefill``); D reads P's
   blocks, runs the last prompt token again (why: ``pdlab tour --chapter 3``) and
   generates the whole answer.

Both instances run one model object, so the output equals a colocated run's.
``first_token`` picks how D gets its first output token (``pdlab/disagg/designs.py``); each
finished request gets a ``first_token`` event in the trace. With a ``speculative_config``
both instances draft with the model's MTP layer. The cross-process version is in
``pdlab/disagg/procs.py``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

import torch

from pdlab.disagg.designs import (
    HandOff,
    check_first_token_mode,
    hand_off,
    prefill_params,
    record_first_tokens,
)
from pdlab.engine.config import (
    CacheConfig,
    KVTransferConfig,
    ModelConfig,
    SchedulerConfig,
    SpeculativeConfig,
)
from pdlab.engine.distributed.kv_transfer.pd_connector import PDConnector
from pdlab.engine.distributed.kv_transfer.transport import InProcessTransport
from pdlab.engine.input_processor import process_prompt
from pdlab.engine.llm_engine import LLMEngine, RequestOutput, prompt_list
from pdlab.engine.model_executor.models.deepseek_v2 import DeepseekV2ForCausalLM
from pdlab.engine.request import Request, SamplingParams
from pdlab.engine.trace import Tracer
from pdlab.errors import PdlabRuntimeError, PdlabTypeError, PdlabValueError, Phrase, invalid

_RECEIVING = {"do_remote_prefill": True}  # how D will hold a request: receiving its K/V


class PDPair:
    """Two engines, P and D, and a KV connector each over an in-process transport."""

    def __init__(
        self,
        model_config: ModelConfig,
        cache_config: CacheConfig | None = None,
        scheduler_config: SchedulerConfig | None = None,
        tracer: Tracer | None = None,
        seed: int = 0,
        *,
        decode_cache_config: CacheConfig | None = None,
        backend: str | None = None,
        dtype: torch.dtype = torch.float32,
        transport: InProcessTransport | None = None,
        kv_transfer_config: KVTransferConfig | None = None,
        first_token: str = "recompute",
        speculative_config: SpeculativeConfig | None = None,
        **engine_kwargs: Any,
    ) -> None:
        self.speculative_config = speculative_config
        self.first_token = check_first_token_mode(first_token, None, speculative_config)
        # Both sides draft: P's MTP layer writes its cache entries for the prompt.
        engine_kwargs["speculative_config"] = speculative_config
        self.model_config = model_config
        cache_config = cache_config or CacheConfig()
        scheduler_config = scheduler_config or SchedulerConfig()
        d_cache = decode_cache_config or cache_config
        # Checked before the first request: D writes P's blocks row for row, so a block of
        # P must be a block of D (vLLM's NIXL handshake compares the same).
        if d_cache.block_size != cache_config.block_size:
            allowed = Phrase("err_x_side_block_size", x=cache_config.block_size)
            name, value = "decode_cache_config.block_size", d_cache.block_size
            raise PdlabValueError("err_invalid_str", name=name, value=value, allowed=allowed)
        self.tracer = tracer if tracer is not None else Tracer()
        self.transport = transport or InProcessTransport()
        model = DeepseekV2ForCausalLM(model_config, dtype=dtype)  # shared: same weights
        timeout = scheduler_config.kv_transfer_timeout_s
        spec = speculative_config
        lookahead = spec.num_prefill_lookahead_tokens if spec is not None else 0
        sink, size = self.tracer.sink, cache_config.block_size  # the same as D's, checked above
        ahead = {"num_prefill_lookahead_tokens": lookahead}
        # Each connector reports to its engine's sink, the tracer's one object per instance.
        self.p_connector, self.d_connector = (
            PDConnector(role, name, self.transport, size, timeout, emit=sink(name), **ahead)
            for role, name in (("prefill", "P"), ("decode", "D"))
        )
        kw = dict(
            backend=backend, model=model, kv_transfer_config=kv_transfer_config, **engine_kwargs
        )
        sides = (("P", cache_config, self.p_connector), ("D", d_cache, self.d_connector))
        self.prefill, self.decode = (
            LLMEngine(
                model_config, cache, scheduler_config, conn, self.tracer, seed, instance=name, **kw
            )
            for name, cache, conn in sides
        )
        self.tracer.meta["transport"] = "in-process"
        self._ids = itertools.count()
        self._pending: dict[str, tuple[str | Sequence[int], SamplingParams]] = {}
        # What the proxy did with each hand-off, and the answers it gave without D.
        self._handoffs: dict[str, HandOff] = {}
        self._prompts: dict[str, list[int]] = {}
        self._done: dict[str, RequestOutput] = {}

    @staticmethod
    def request_id(index: int) -> str:
        """The id the pair gives its ``index``-th request when the caller names none (and
        ``pdlab/disagg/procs.py`` its ``index``-th prompt), the same on P and on D."""
        return f"req-{index}"

    def add_request(
        self,
        prompt: str | Sequence[int],
        sampling_params: SamplingParams | None = None,
        request_id: str | None = None,
    ) -> str:
        """Send the prompt to P (step 1 of the proxy); D gets it when P finishes."""
        rid = request_id or self.request_id(next(self._ids))
        if rid in self._pending or self.decode.scheduler.get_request(rid) is not None:
            raise PdlabValueError("err_duplicate_id", req=rid, where=Phrase("err_n_in_pair"))
        if sampling_params is not None and not isinstance(sampling_params, SamplingParams):
            allowed = Phrase("err_x_none_or", t="SamplingParams")
            raise invalid("sampling_params", sampling_params, allowed, PdlabTypeError)
        sp = sampling_params or SamplingParams()
        check_first_token_mode(self.first_token, sp, self.speculative_config)
        # D must be able to hold the request before P computes it: a refusal after P's
        # prefill would waste it and hold P's blocks for a read that never comes.
        d = self.decode
        ids = process_prompt(prompt, d.tokenizer, self.model_config, d.max_model_len)
        d.scheduler.check_request_fits(Request(rid, ids, sp, kv_transfer_params=_RECEIVING))
        # As vLLM's proxy: the same sampling parameters (stop tokens included), one token.
        p_params = dataclasses.replace(sp, max_tokens=1)
        self.prefill.add_request(prompt, p_params, rid, prefill_params(self.first_token))
        self._pending[rid] = (prompt, sp)
        return rid

    def step(self) -> None:
        """One step of each instance, forwarding P's finished requests to D."""
        for out in self.prefill.step():
            if out.finished and out.request_id in self._pending:
                rid = out.request_id
                _, sp = self._pending.pop(rid)
                self._prompts[rid] = list(out.prompt_token_ids)
                # P could not hand over (aborted, or no blocks): D computes it all.
                p_out = (out.prompt_token_ids, sp, out.output_token_ids, out.kv_transfer_params)
                h = hand_off(
                    self.first_token, *p_out, self.prefill.step_count, self.decode.max_model_len
                )
                self._handoffs[rid] = h
                if h.done:  # P's token is the whole answer: D is not needed
                    self.p_connector.end_send(rid, "P's first token ended the request")
                    self._done[rid] = self._answer(rid)
                    self._record(rid)
                else:
                    self.decode.add_request(h.prompt, h.sampling_params, rid, h.kv_transfer_params)
        if self.decode.has_unfinished_requests() or self.d_connector.num_pending:
            for out in self.decode.step():
                if out.finished and out.request_id in self._handoffs:
                    self._record(out.request_id)

    def _record(self, rid: str) -> None:
        record_first_tokens(self.tracer, {rid: self.first_token}, self.model_config)

    def _answer(self, rid: str) -> RequestOutput:
        h = self._handoffs[rid]
        if h.done:
            out = RequestOutput(rid, self._prompts[rid], list(h.prefix), finished=True)
            out.finish_reason = h.finish_reason
        else:
            out = dataclasses.replace(self.decode.get_output(rid))
            out.prompt_token_ids = self._prompts[rid]
            out.output_token_ids = h.prefix + out.output_token_ids
        out.text = self.decode.tokenizer.decode(out.output_token_ids)
        return out

    def get_output(self, request_id: str) -> RequestOutput:
        """The request's answer as the proxy returns it (P's token first, where the design
        put it before D's)."""
        if request_id in self._done:
            return self._done[request_id]
        if request_id in self._handoffs:
            return self._answer(request_id)
        return self.decode.get_output(request_id)

    def has_unfinished_requests(self) -> bool:
        # P counts until its held blocks are released (read by D, or timed out).
        engines = self.prefill.has_unfinished_requests() or self.decode.has_unfinished_requests()
        held = self.p_connector.num_pending > 0 or self.d_connector.num_pending > 0
        return bool(self._pending) or engines or held

    def generate(
        self,
        prompts: str | Sequence[int] | Sequence[str | Sequence[int]],
        sampling_params: SamplingParams | None = None,
        max_steps: int = 100_000,
    ) -> list[RequestOutput]:
        rids: list[str] = []
        try:
            for p in prompt_list(prompts):
                rids.append(self.add_request(p, sampling_params))
        except Exception:
            for rid in rids:  # all or nothing: the batch is refused whole
                self.abort_request(rid)
            raise
        for _ in range(max_steps):
            if not self.has_unfinished_requests():
                break
            self.step()
        else:
            raise PdlabRuntimeError("err_pd_unfinished", n=max_steps)
        return [self.get_output(r) for r in rids]

    def abort_request(self, request_id: str) -> None:
        """Abort on both sides; blocks P holds for D's read are released at once."""
        self._pending.pop(request_id, None)
        for eng in (self.prefill, self.decode):
            if eng.scheduler.get_request(request_id) is not None:
                eng.abort_request(request_id)
        if self.p_connector.is_sending(request_id):
            self.p_connector.end_send(request_id, "aborted")
