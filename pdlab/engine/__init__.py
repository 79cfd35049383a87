"""The engine wing: everything in pdlab that mirrors vLLM 0.33.0, laid out as vLLM is.

A folder here is its upstream folder with ``v1/`` dropped (``core/sched/`` is
``vllm/v1/core/sched/``); the engine loop and the input processor (``vllm/v1/engine/``) sit
at the top, and each module's docstring names its upstream file (README.md, "Layout", lists
them all). The wing imports nothing of the lab (P/D orchestration, the simulator, the
views, the CLI, the tools, the exercises): it reports what happened as facts on the trace,
and the lab says them (tests/contracts/test_engine_wing.py).

``LLMEngine`` is importable from here, loaded on first use (PEP 562).
"""

from typing import Any

__all__ = ["LLMEngine"]


def __getattr__(name: str) -> Any:
    if name == "LLMEngine":
        from pdlab.engine.llm_engine import LLMEngine

        return LLMEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
