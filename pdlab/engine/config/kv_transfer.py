"""How a P/D instance treats KV transfers: ``KVTransferConfig`` (vLLM's
``vllm/config/kv_transfer.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pdlab.engine.config.utils import ConfigBase, _fail
from pdlab.errors import Phrase

KV_LOAD_FAILURE_POLICIES = ("fail", "recompute")


@dataclass(frozen=True)
class KVTransferConfig(ConfigBase):
    """pdlab keeps only the fields of vLLM's ``KVTransferConfig`` that its scheduler reads.

    ``kv_load_failure_policy`` says what happens when K/V a request was waiting for fail
    to arrive: ``"fail"`` (vLLM's default) ends the request with
    ``RequestStatus.FINISHED_ERROR`` (finish reason ``"error"``) and frees its blocks;
    ``"recompute"`` keeps the tokens before the first failed block and computes the rest
    locally.
    """

    kv_load_failure_policy: str = "fail"

    def __post_init__(self) -> None:
        policy = self.kv_load_failure_policy
        if policy not in KV_LOAD_FAILURE_POLICIES:
            allowed = Phrase("err_x_one_of", choices=KV_LOAD_FAILURE_POLICIES)
            _fail("KVTransferConfig", "kv_load_failure_policy", policy, allowed)
