"""pdlab.model: the tiny DeepSeek-style decoder and the model runner.

``DeepseekV2ForCausalLM`` is imported on first use (PEP 562), so that the runner's batch
rules (``pdlab.model.batch``, which ``pdlab sim`` runs) load without torch.
"""

from typing import Any

__all__ = ["DeepseekV2ForCausalLM"]


def __getattr__(name: str) -> Any:
    if name == "DeepseekV2ForCausalLM":
        from pdlab.model.deepseek import DeepseekV2ForCausalLM

        return DeepseekV2ForCausalLM
    raise AttributeError(f"module 'pdlab.model' has no attribute {name!r}")
