"""The paged cache: ``CacheConfig`` (vLLM's ``vllm/config/cache.py``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pdlab.engine.config.utils import _check_int, _fail
from pdlab.errors import Phrase


@dataclass(frozen=True)
class CacheConfig:
    """The paged latent cache: ``num_blocks`` pages of ``block_size`` token rows."""

    block_size: int = 4
    num_blocks: int = 256
    enable_prefix_caching: bool = True

    def __post_init__(self) -> None:
        _check_int("CacheConfig", "block_size", self.block_size)
        _check_int("CacheConfig", "num_blocks", self.num_blocks)
        if not isinstance(self.enable_prefix_caching, bool):
            _fail(
                "CacheConfig",
                "enable_prefix_caching",
                self.enable_prefix_caching,
                Phrase("err_x_bool"),
            )

    def replace(self, **changes: Any) -> CacheConfig:
        return dataclasses.replace(self, **changes)
