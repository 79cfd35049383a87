"""What vLLM's ``VllmConfig`` (``vllm/config/vllm.py``, 0.33.0) decides across configs.

Upstream runs Model Runner V2 (``vllm/v1/worker/gpu/model_runner.py``) unless the
environment sets ``VLLM_USE_V2_MODEL_RUNNER=0`` or a feature V2 lacks is asked for; V1
(``vllm/v1/worker/gpu_model_runner.py``) refuses prefill context parallelism, which only
V2 implements (``_get_v1_model_runner_unsupported_features``). pdlab takes the same
switch: ``model_runner="v2"`` or ``"v1"``, else ``VLLM_USE_V2_MODEL_RUNNER``, else V2.
"""

from __future__ import annotations

import os
from typing import Any

from pdlab.engine.config.parallel import ParallelConfig
from pdlab.errors import PdlabValueError, Phrase, either, invalid, noted

MODEL_RUNNERS = ("v2", "v1")
_TRUE, _FALSE = ("1", "true", "yes"), ("0", "false", "no")


def resolve_model_runner(
    model_runner: str | None, parallel_config: ParallelConfig | None = None
) -> str:
    """Which model runner (``VllmConfig.use_v2_model_runner``): ``"v2"`` or ``"v1"``;
    ``ValueError`` in one line for a bad value or V1 with PCP."""
    origin = "model_runner"
    if model_runner is None:
        env = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
        if env is None or env.strip() == "":
            model_runner = "v2"
        elif env.strip().lower() in _TRUE:
            model_runner, origin = "v2", "VLLM_USE_V2_MODEL_RUNNER=" + env
        elif env.strip().lower() in _FALSE:
            model_runner, origin = "v1", "VLLM_USE_V2_MODEL_RUNNER=" + env
        else:
            v2, v1 = noted(1, "err_n_v2"), noted(0, "err_n_v1")
            raise invalid("VLLM_USE_V2_MODEL_RUNNER", env, either(v2, v1))
    key = model_runner.lower() if isinstance(model_runner, str) else model_runner
    if key not in MODEL_RUNNERS:
        raise invalid("model_runner", model_runner, Phrase("err_x_one_of", choices=MODEL_RUNNERS))
    pcp = (parallel_config or ParallelConfig()).prefill_context_parallel_size
    if key == "v1" and pcp > 1:
        shown = "model_runner='v1'" if origin == "model_runner" else origin
        raise PdlabValueError("err_pcp_needs_v2", runner=shown, pcp=pcp)
    return key


def adjust_dcp_kv_cache_interleave_size(
    parallel_config: ParallelConfig, block_size: int, kv_transfer_instance: bool
) -> ParallelConfig:
    """The parallel config a P/D instance runs with (``VllmConfig.
    adjust_dcp_kv_cache_interleave_size``, which ``EngineCore`` calls before profiling).

    On an instance with NIXL's connector (pdlab's ``PDConnector`` plays it:
    ``kv_transfer_instance``) and ``decode_context_parallel_size > 1``, the interleave
    becomes the block size, so that a whole block of K/V lives on one DCP rank
    (upstream's log line: "for block-level alignment"; P sends whole blocks), unless the
    user named an interleave (``allow_auto_resolve_cp_interleave_size`` False, upstream's
    ``_allow_auto_resolve_cp_interleave_size``, which ``EngineArgs`` clears). pdlab
    takes the cache's ``block_size``, upstream the smallest kernel block size of its KV
    cache groups (one group here). FLASH_ATTN_MLA then loses ``supports_dcp_with_varlen``
    and its threshold drops to 1 (``MLABackendProfile.effective_threshold``). Anything
    else comes back unchanged.

    A difference pdlab keeps: with that interleave, vLLM 0.33.0 refuses any speculative
    decoding at start-up (``check_attention_cp_compatibility`` in
    ``vllm/v1/worker/cp_utils.py``: no dense MLA impl sets
    ``supports_mtp_with_cp_non_trivial_interleave_size``), and FLASHINFER_MLA's builder
    refuses DCP with an interleave other than 1. pdlab runs both, so that its views can
    show where the rows would go (``tests/upstream/test_batch_routing.py`` keeps the
    first)."""
    if (
        not kv_transfer_instance
        or parallel_config.decode_context_parallel_size <= 1
        or not parallel_config.allow_auto_resolve_cp_interleave_size
    ):
        return parallel_config
    return parallel_config.replace(cp_kv_cache_interleave_size=block_size)


def num_hash_lookahead_tokens(
    speculative_config: Any, enable_prefix_caching: bool, has_kv_connector: bool
) -> int:
    """Tokens after each block that its prefix-cache hash covers
    (``VllmConfig.num_hash_lookahead_tokens``): under MTP with prefix caching on and no
    KV connector, the drafter's prefill lookahead; else 0 (why:
    ``pdlab/engine/core/kv_cache_manager.py``)."""
    if (
        speculative_config is None
        or not speculative_config.use_eagle_block_drop()
        or not enable_prefix_caching
        or has_kv_connector
    ):
        return 0
    return speculative_config.num_prefill_lookahead_tokens
