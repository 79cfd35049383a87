"""The token budget: ``SchedulerConfig`` (vLLM's ``vllm/config/scheduler.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from pdlab.engine.config.utils import ConfigBase, _check_bool, _check_int, _check_positive_float


@dataclass(frozen=True)
class SchedulerConfig(ConfigBase):
    """vLLM v1's unified token budget."""

    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 64
    long_prefill_token_threshold: int = 0  # 0 disables the cap, as in vLLM
    max_model_len: int | None = None
    kv_transfer_timeout_s: float = 30.0
    # vLLM's default: admit a waiting request only if its whole prompt fits in the free
    # blocks, not just its first chunk.
    scheduler_reserve_full_isl: bool = True

    def __post_init__(self) -> None:
        c = "SchedulerConfig"
        _check_bool(c, "scheduler_reserve_full_isl", self.scheduler_reserve_full_isl)
        _check_int(c, "max_num_batched_tokens", self.max_num_batched_tokens)
        _check_int(c, "max_num_seqs", self.max_num_seqs)
        _check_int(c, "long_prefill_token_threshold", self.long_prefill_token_threshold, 0)
        if self.max_model_len is not None:
            _check_int(c, "max_model_len", self.max_model_len)
        _check_positive_float(c, "kv_transfer_timeout_s", self.kv_transfer_timeout_s)
