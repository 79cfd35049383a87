"""Which MLA backend's routing to follow: ``AttentionConfig`` and the backend profiles
(vLLM's ``vllm/config/attention.py`` and the MLA builders in
``vllm/v1/attention/backends/mla/``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pdlab.config.utils import _fail


@dataclass(frozen=True)
class MLABackendProfile:
    """What routing needs from one upstream MLA backend's metadata builder: its
    ``reorder_batch_threshold`` and its ``query_len_support`` (``require_uniform`` is
    ``query_len_support != VARLEN`` in ``MLACommonMetadataBuilder.build``)."""

    name: str  # the backend's get_name() upstream
    reorder_batch_threshold: int
    query_len_support: str  # "single_only", "uniform" or "varlen"
    upstream: str  # the file that sets the two values in vLLM 0.33.0

    @property
    def require_uniform(self) -> bool:
        return self.query_len_support != "varlen"


# The builders' class attributes in vLLM 0.33.0. pdlab's kernels are the same whichever
# profile is chosen; a profile changes only which requests take which path.
MLA_BACKENDS: dict[str, MLABackendProfile] = {
    "triton_mla": MLABackendProfile(
        "TRITON_MLA", 1, "uniform", "vllm/v1/attention/backends/mla/triton_mla.py"
    ),
    "flashmla": MLABackendProfile(
        "FLASHMLA", 128, "uniform", "vllm/v1/attention/backends/mla/flashmla.py"
    ),
    "flash_attn_mla": MLABackendProfile(
        "FLASH_ATTN_MLA", 512, "varlen", "vllm/v1/attention/backends/mla/flashattn_mla.py"
    ),
}


@dataclass(frozen=True)
class AttentionConfig:
    """Which MLA backend's routing to follow (``vllm/config/attention.py``'s ``backend``).

    ``"triton_mla"`` (default) has ``reorder_batch_threshold = 1``, like the common MLA
    builder; ``"flashmla"`` (128) and ``"flash_attn_mla"`` (512) send short fresh prompts
    down the absorbed decode path too. Upstream names (``"FLASHMLA"``) are accepted.
    """

    backend: str = "triton_mla"

    def __post_init__(self) -> None:
        key = self.backend.lower().replace("-", "_") if isinstance(self.backend, str) else None
        aliases = {p.name.lower(): k for k, p in MLA_BACKENDS.items()}
        aliases["flashattn_mla"] = "flash_attn_mla"
        key = aliases.get(key, key)
        if key not in MLA_BACKENDS:
            _fail("AttentionConfig", "backend", self.backend, f"one of {tuple(MLA_BACKENDS)}")
        object.__setattr__(self, "backend", key)

    @property
    def profile(self) -> MLABackendProfile:
        return MLA_BACKENDS[self.backend]
