"""Configuration: the model's shape, the paged cache, the scheduler, routing, KV transfer.

Mirrors the package vLLM threads through its v1 engine, ``vllm/config/``, one module per
config. Every config validates itself on construction: a bad value raises ``ValueError``
naming the field, the value and what is allowed.
"""

from pdlab.engine.config.attention import MLA_BACKENDS, AttentionConfig, MLABackendProfile
from pdlab.engine.config.cache import CacheConfig
from pdlab.engine.config.kv_transfer import KV_LOAD_FAILURE_POLICIES, KVTransferConfig
from pdlab.engine.config.model import PRESETS, ModelConfig
from pdlab.engine.config.parallel import ParallelConfig
from pdlab.engine.config.scheduler import SchedulerConfig
from pdlab.engine.config.speculative import SPECULATIVE_METHODS, SpeculativeConfig
from pdlab.engine.config.vllm import (
    MODEL_RUNNERS,
    adjust_dcp_kv_cache_interleave_size,
    num_hash_lookahead_tokens,
    resolve_model_runner,
)

__all__ = [
    "KV_LOAD_FAILURE_POLICIES", "MLA_BACKENDS", "MODEL_RUNNERS", "PRESETS", "SPECULATIVE_METHODS",
    "AttentionConfig", "CacheConfig", "KVTransferConfig", "MLABackendProfile", "ModelConfig",
    "ParallelConfig", "SchedulerConfig", "SpeculativeConfig", "adjust_dcp_kv_cache_interleave_size",
    "num_hash_lookahead_tokens", "resolve_model_runner",
]  # fmt: skip
