"""Which MLA backend's routing to follow: ``AttentionConfig`` and the backend profiles
(vLLM's ``vllm/config/attention.py`` and the MLA metadata builders in
``vllm/v1/attention/backends/mla/``), chosen as the platform chooses them
(``pdlab/engine/platforms.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pdlab.engine.config.utils import _check_int, _fail
from pdlab.engine.platforms import BackendChoice, Chosen, check_gpu, select_mla_backend
from pdlab.errors import Phrase


@dataclass(frozen=True)
class MLABackendProfile:
    """What routing needs from one upstream MLA backend's metadata builder: its
    ``reorder_batch_threshold`` and ``query_len_support`` (``require_uniform`` is
    ``query_len_support != VARLEN`` in ``MLACommonMetadataBuilder.build``), and whether
    it keeps its threshold under decode context parallelism."""

    name: str  # the backend's get_name() upstream
    reorder_batch_threshold: int
    query_len_support: str  # "single_only", "uniform" or "varlen"
    upstream: str  # the file that sets the values in vLLM 0.33.0
    supports_dcp_with_varlen: bool = False

    @property
    def require_uniform(self) -> bool:
        return self.query_len_support != "varlen"

    def effective_threshold(
        self,
        num_speculative_tokens: int = 0,
        decode_context_parallel_size: int = 1,
        cp_kv_cache_interleave_size: int = 1,
    ) -> int:
        """The builder's threshold after ``_init_reorder_batch_threshold``
        (``vllm/v1/attention/backend.py``): raised to ``1 + num_speculative_tokens`` (a
        verification row) unless SINGLE_ONLY; 1 under DCP unless the builder supports DCP
        with varlen queries (FLASH_ATTN_MLA only at ``cp_kv_cache_interleave_size == 1``)."""
        t = self.reorder_batch_threshold
        if self.query_len_support != "single_only" and num_speculative_tokens > 0:
            t = max(t, 1 + num_speculative_tokens)
        dcp_ok = self.supports_dcp_with_varlen and (
            self.name != "FLASH_ATTN_MLA" or cp_kv_cache_interleave_size == 1
        )
        if decode_context_parallel_size > 1 and not dcp_ok:
            t = 1
        return t


_MLA = "vllm/v1/attention/backends/mla/"
# The builders' class attributes in vLLM 0.33.0. CPU_MLA and CUTLASS_MLA use the common
# builder's defaults (MLACommonMetadataBuilder in
# vllm/model_executor/layers/attention/mla_attention.py). pdlab's kernels are the same
# whichever profile is chosen; a profile changes only which requests take which path.
MLA_BACKENDS: dict[str, MLABackendProfile] = {
    "cpu_mla": MLABackendProfile("CPU_MLA", 1, "single_only", _MLA + "cpu_mla.py"),
    "triton_mla": MLABackendProfile("TRITON_MLA", 1, "uniform", _MLA + "triton_mla.py"),
    "flashmla": MLABackendProfile("FLASHMLA", 128, "uniform", _MLA + "flashmla.py"),
    "flash_attn_mla": MLABackendProfile(
        "FLASH_ATTN_MLA", 512, "varlen", _MLA + "flashattn_mla.py", supports_dcp_with_varlen=True
    ),
    "flashinfer_mla": MLABackendProfile(
        "FLASHINFER_MLA", 1, "varlen", _MLA + "flashinfer_mla.py", supports_dcp_with_varlen=True
    ),
    "cutlass_mla": MLABackendProfile("CUTLASS_MLA", 1, "single_only", _MLA + "cutlass_mla.py"),
}


@dataclass(frozen=True)
class AttentionConfig:
    """Which MLA backend's routing to follow (``vllm/config/attention.py``'s ``backend``).

    ``backend`` None (the default, as upstream) lets the platform choose for ``gpu``
    (``pdlab.engine.platforms.select_mla_backend``; None reads ``PDLAB_GPU``, then this
    machine's GPU, else the CPU platform); ``choice`` keeps its facts (``BackendChoice``),
    None when the backend was named. ``num_speculative_tokens`` changes only the threshold,
    as upstream's builders do; ``LLMEngine`` sets it from its ``SpeculativeConfig``.
    """

    backend: str | None = None
    gpu: str | None = None
    num_speculative_tokens: int = 0
    choice: BackendChoice | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        _check_int("AttentionConfig", "num_speculative_tokens", self.num_speculative_tokens, 0)
        if self.backend is None:
            choice = select_mla_backend(self.gpu)
            object.__setattr__(self, "backend", choice.backend)
            object.__setattr__(self, "gpu", choice.gpu)
            object.__setattr__(self, "choice", choice)
            return
        key = self.backend.lower().replace("-", "_") if isinstance(self.backend, str) else None
        aliases = {p.name.lower(): k for k, p in MLA_BACKENDS.items()}
        aliases["flashattn_mla"] = "flash_attn_mla"
        key = aliases.get(key, key)
        if key not in MLA_BACKENDS:
            allowed = Phrase("err_x_one_of", choices=tuple(MLA_BACKENDS))
            _fail("AttentionConfig", "backend", self.backend, allowed)
        object.__setattr__(self, "backend", key)
        if self.gpu is not None:
            object.__setattr__(self, "gpu", check_gpu(self.gpu))

    @property
    def selected_how(self) -> Chosen:
        """How the backend was chosen: by the platform (``choice.how``) or named."""
        return Chosen.BACKEND if self.choice is None else self.choice.how

    @property
    def profile(self) -> MLABackendProfile:
        return MLA_BACKENDS[self.backend]
