"""A prefill/decode pair in one process, driven the way vLLM's P/D proxy drives two
instances (``examples/online_serving/disaggregated_serving/`` and the toy proxy in
``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py``):

1. the prompt goes to P with ``max_tokens=1`` and ``{"do_remote_decode": True}``;
2. P prefills, samples one token (the proxy discards it), holds the blocks, and returns
   ``kv_transfer_params`` (its block ids and engine id);
3. the original request goes to D with those params (``do_remote_prefill``); D reads P's
   blocks, sets ``num_computed_tokens = N - 1``, runs the last prompt token again for its
   logits, and generates the whole answer.

Both instances run one model object, so the same weights (``ModelConfig.weights``: the
shipped checkpoint by default), and the output equals a colocated run's.
The cross-process version is in ``pdlab/disagg/procs.py``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

import torch

from pdlab.config import CacheConfig, KVTransferConfig, ModelConfig, SchedulerConfig
from pdlab.engine import LLMEngine, RequestOutput, prompt_list
from pdlab.kv_transfer.pd_connector import PDConnector
from pdlab.kv_transfer.transport import InProcessTransport
from pdlab.model.deepseek import DeepseekV2ForCausalLM
from pdlab.request import SamplingParams
from pdlab.trace import Tracer


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
        **engine_kwargs: Any,
    ) -> None:
        cache_config = cache_config or CacheConfig()
        scheduler_config = scheduler_config or SchedulerConfig()
        d_cache = decode_cache_config or cache_config
        # Checked before the first request: D writes P's blocks row for row, so a block of
        # P must be a block of D (vLLM's NIXL handshake compares the same).
        if d_cache.block_size != cache_config.block_size:
            raise ValueError(
                f"decode_cache_config.block_size={d_cache.block_size} is invalid: expected "
                f"{cache_config.block_size}, P's block size (both sides must share it)"
            )
        self.tracer = tracer if tracer is not None else Tracer()
        self.transport = transport or InProcessTransport()
        model = DeepseekV2ForCausalLM(model_config, dtype=dtype)  # shared: same weights
        timeout = scheduler_config.kv_transfer_timeout_s
        # Each connector reports to its engine's sink, the tracer's one object per instance.
        self.p_connector = PDConnector(
            "prefill",
            "P",
            self.transport,
            cache_config.block_size,
            timeout,
            emit=self.tracer.sink("P"),
        )
        self.d_connector = PDConnector(
            "decode", "D", self.transport, d_cache.block_size, timeout, emit=self.tracer.sink("D")
        )
        self.prefill = LLMEngine(
            model_config,
            cache_config,
            scheduler_config,
            self.p_connector,
            self.tracer,
            seed,
            instance="P",
            backend=backend,
            model=model,
            kv_transfer_config=kv_transfer_config,
            **engine_kwargs,
        )
        self.decode = LLMEngine(
            model_config,
            d_cache,
            scheduler_config,
            self.d_connector,
            self.tracer,
            seed,
            instance="D",
            backend=backend,
            model=model,
            kv_transfer_config=kv_transfer_config,
            **engine_kwargs,
        )
        self.tracer.meta["transport"] = "in-process"
        self._ids = itertools.count()
        self._pending: dict[str, tuple[str | Sequence[int], SamplingParams]] = {}

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
            raise ValueError(
                f"request_id={rid!r} is invalid: a request with this id is still in the "
                "pair; expected a unique id"
            )
        if sampling_params is not None and not isinstance(sampling_params, SamplingParams):
            raise TypeError(
                f"sampling_params={sampling_params!r} is invalid: expected None or a SamplingParams"
            )
        sp = sampling_params or SamplingParams()
        # As vLLM's proxy: the same sampling parameters (stop tokens included), one token.
        p_params = dataclasses.replace(sp, max_tokens=1)
        self.prefill.add_request(prompt, p_params, rid, {"do_remote_decode": True})
        self._pending[rid] = (prompt, sp)
        return rid

    def step(self) -> None:
        """One step of each instance, forwarding P's finished requests to D."""
        for out in self.prefill.step():
            if out.finished and out.request_id in self._pending:
                prompt, sp = self._pending.pop(out.request_id)
                if out.kv_transfer_params is None:
                    # P could not hand over (aborted, or no blocks): D computes it all.
                    self.decode.add_request(prompt, sp, out.request_id)
                else:
                    self.decode.add_request(prompt, sp, out.request_id, out.kv_transfer_params)
        if self.decode.has_unfinished_requests() or self.d_connector.num_pending:
            self.decode.step()

    def has_unfinished_requests(self) -> bool:
        # P counts until its held blocks are released (read by D, or timed out).
        return (
            bool(self._pending)
            or self.prefill.has_unfinished_requests()
            or self.p_connector.num_pending > 0
            or self.decode.has_unfinished_requests()
            or self.d_connector.num_pending > 0
        )

    def generate(
        self,
        prompts: str | Sequence[int] | Sequence[str | Sequence[int]],
        sampling_params: SamplingParams | None = None,
        max_steps: int = 100_000,
    ) -> list[RequestOutput]:
        rids = [self.add_request(p, sampling_params) for p in prompt_list(prompts)]
        for _ in range(max_steps):
            if not self.has_unfinished_requests():
                break
            self.step()
        else:
            raise RuntimeError(f"P/D requests still unfinished after {max_steps} steps")
        return [self.decode.get_output(r) for r in rids]

    def abort_request(self, request_id: str) -> None:
        self._pending.pop(request_id, None)
        for eng in (self.prefill, self.decode):
            if eng.scheduler.get_request(request_id) is not None:
                eng.abort_request(request_id)
