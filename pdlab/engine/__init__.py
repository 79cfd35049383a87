"""The engine wing: everything in pdlab that mirrors vLLM 0.33.0, laid out as vLLM is.

A file here sits where its upstream file sits, with ``v1/`` dropped: ``pdlab/engine/X`` is
``vllm/v1/X``, or ``vllm/X`` where ``v1`` has no ``X``; the engine loop and the input
processor (``vllm/v1/engine/``) sit at this folder's top. Each module's docstring names
its upstream file.

==================================  ====================================================
``request.py``                      ``vllm/v1/request.py``
``llm_engine.py``                   ``vllm/v1/engine/llm_engine.py`` and ``core.py``
``input_processor.py``              ``vllm/v1/engine/input_processor.py``
``config/``                         ``vllm/config/``
``platforms.py``                    ``vllm/platforms/cuda.py``
``core/`` (block pool, manager)     ``vllm/v1/core/``
``core/sched/``                     ``vllm/v1/core/sched/``
``worker/gpu/``                     ``vllm/v1/worker/gpu/`` (Model Runner V2)
``worker/gpu/spec_decode/``         ``vllm/v1/worker/gpu/spec_decode/``
``attention/``                      ``vllm/v1/attention/`` and the MLA layer
``model_executor/``                 ``vllm/model_executor/`` (DeepSeek, MTP, loader)
``distributed/kv_transfer/``        ``vllm/distributed/kv_transfer/``
``trace.py``, ``events.py``         ``vllm/v1/metrics/stats.py`` (pdlab's trace)
==================================  ====================================================

The kernels are ``pdlab.kernels`` (the top-level ``kernels/`` folder) and the naive oracle
is ``pdlab.attention.reference``. The wing imports nothing of the lab (P/D orchestration,
the simulator, the views, the CLI, the tools, the exercises): it reports what happened as
facts on the trace, and the lab says them (tests/contracts/test_engine_wing.py).

``LLMEngine`` is importable from here, loaded on first use (PEP 562).
"""

from typing import Any

__all__ = ["LLMEngine"]


def __getattr__(name: str) -> Any:
    if name == "LLMEngine":
        from pdlab.engine.llm_engine import LLMEngine

        return LLMEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
