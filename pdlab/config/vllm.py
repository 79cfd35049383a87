"""Which model runner an engine uses: vLLM's ``VllmConfig.use_v2_model_runner``
(``vllm/config/vllm.py``, 0.33.0).

Upstream runs Model Runner V2 (``vllm/v1/worker/gpu/model_runner.py``) unless the
environment sets ``VLLM_USE_V2_MODEL_RUNNER=0`` or a feature V2 lacks is asked for; V1
(``vllm/v1/worker/gpu_model_runner.py``) refuses prefill context parallelism, which only
V2 implements (``_get_v1_model_runner_unsupported_features``). pdlab takes the same
switch: ``model_runner="v2"`` or ``"v1"``, else ``VLLM_USE_V2_MODEL_RUNNER``, else V2.
"""

from __future__ import annotations

import os

from pdlab.config.parallel import ParallelConfig
from pdlab.errors import PdlabValueError, Phrase, either, invalid, noted

MODEL_RUNNERS = ("v2", "v1")
_TRUE, _FALSE = ("1", "true", "yes"), ("0", "false", "no")


def resolve_model_runner(
    model_runner: str | None, parallel_config: ParallelConfig | None = None
) -> str:
    """``"v2"`` or ``"v1"``; ``ValueError`` in one line for a bad value or V1 with PCP."""
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
