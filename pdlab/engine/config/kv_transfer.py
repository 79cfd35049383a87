"""How a P/D instance treats KV transfers: ``KVTransferConfig`` (vLLM's
``vllm/config/kv_transfer.py``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pdlab.engine.config.utils import _fail
from pdlab.errors import Phrase

KV_LOAD_FAILURE_POLICIES = ("fail", "recompute")


@dataclass(frozen=True)
class KVTransferConfig:
    """How a P/D instance treats KV transfers (vLLM's ``KVTransferConfig`` in
    ``vllm/config/kv_transfer.py``; pdlab keeps only the fields its scheduler reads).

    ``kv_load_failure_policy`` says what happens when K/V a request was waiting for fail
    to arrive: ``"fail"`` (vLLM's default) ends the request with
    ``RequestStatus.FINISHED_ERROR`` (finish reason ``"error"``) and frees its blocks;
    ``"recompute"`` keeps the tokens before the first failed block and computes the rest
    locally.
    """

    kv_load_failure_policy: str = "fail"

    def __post_init__(self) -> None:
        if self.kv_load_failure_policy not in KV_LOAD_FAILURE_POLICIES:
            _fail(
                "KVTransferConfig",
                "kv_load_failure_policy",
                self.kv_load_failure_policy,
                Phrase("err_x_one_of", choices=KV_LOAD_FAILURE_POLICIES),
            )

    def replace(self, **changes: Any) -> KVTransferConfig:
        return dataclasses.replace(self, **changes)
