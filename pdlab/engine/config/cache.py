"""The paged cache: ``CacheConfig`` (vLLM's ``vllm/config/cache.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from pdlab.engine.config.utils import ConfigBase, _check_bool, _check_int


@dataclass(frozen=True)
class CacheConfig(ConfigBase):
    """The paged latent cache: ``num_blocks`` pages of ``block_size`` token rows."""

    block_size: int = 4
    num_blocks: int = 256
    enable_prefix_caching: bool = True

    def __post_init__(self) -> None:
        _check_int("CacheConfig", "block_size", self.block_size)
        _check_int("CacheConfig", "num_blocks", self.num_blocks)
        _check_bool("CacheConfig", "enable_prefix_caching", self.enable_prefix_caching)
