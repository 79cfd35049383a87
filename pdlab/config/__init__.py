"""Configuration: the model's shape, the paged cache, the scheduler, routing, KV transfer.

Mirrors the package vLLM threads through its v1 engine, ``vllm/config/``, one module per
config: ``model.py``, ``cache.py``, ``scheduler.py``, ``parallel.py``, ``attention.py`` and
``kv_transfer.py``. Every config validates itself on construction: a bad value raises
``ValueError`` naming the field, the value and what is allowed.
"""

from pdlab.config.attention import MLA_BACKENDS, AttentionConfig, MLABackendProfile
from pdlab.config.cache import CacheConfig
from pdlab.config.kv_transfer import KV_LOAD_FAILURE_POLICIES, KVTransferConfig
from pdlab.config.model import PRESETS, ModelConfig
from pdlab.config.parallel import ParallelConfig
from pdlab.config.scheduler import SchedulerConfig

__all__ = [
    "KV_LOAD_FAILURE_POLICIES",
    "MLA_BACKENDS",
    "PRESETS",
    "AttentionConfig",
    "CacheConfig",
    "KVTransferConfig",
    "MLABackendProfile",
    "ModelConfig",
    "ParallelConfig",
    "SchedulerConfig",
]
