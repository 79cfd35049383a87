"""The token budget: ``SchedulerConfig`` (vLLM's ``vllm/config/scheduler.py``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pdlab.engine.config.utils import _check_int, _check_positive_float, _fail
from pdlab.errors import Phrase


@dataclass(frozen=True)
class SchedulerConfig:
    """vLLM v1's unified token budget (``vllm/config/scheduler.py``)."""

    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 64
    long_prefill_token_threshold: int = 0  # 0 disables the cap, as in vLLM
    max_model_len: int | None = None
    kv_transfer_timeout_s: float = 30.0
    # vLLM's default: admit a waiting request only if its whole prompt fits in the free
    # blocks, not just its first chunk (``vllm/config/scheduler.py``).
    scheduler_reserve_full_isl: bool = True

    def __post_init__(self) -> None:
        c = "SchedulerConfig"
        if not isinstance(self.scheduler_reserve_full_isl, bool):
            _fail(
                c,
                "scheduler_reserve_full_isl",
                self.scheduler_reserve_full_isl,
                Phrase("err_x_bool"),
            )
        _check_int(c, "max_num_batched_tokens", self.max_num_batched_tokens)
        _check_int(c, "max_num_seqs", self.max_num_seqs)
        _check_int(c, "long_prefill_token_threshold", self.long_prefill_token_threshold, 0)
        if self.max_model_len is not None:
            _check_int(c, "max_model_len", self.max_model_len)
        _check_positive_float(c, "kv_transfer_timeout_s", self.kv_transfer_timeout_s)

    def replace(self, **changes: Any) -> SchedulerConfig:
        return dataclasses.replace(self, **changes)
