"""The models: the tiny DeepSeek-style decoder (``deepseek_v2.py``) and its MTP layer
(``deepseek_mtp.py``), as ``vllm/model_executor/models/``.

``DeepseekV2ForCausalLM`` is imported on first use (PEP 562), so that importing this
package does not import torch.
"""

from typing import Any

__all__ = ["DeepseekV2ForCausalLM"]


def __getattr__(name: str) -> Any:
    if name == "DeepseekV2ForCausalLM":
        from pdlab.engine.model_executor.models.deepseek_v2 import DeepseekV2ForCausalLM

        return DeepseekV2ForCausalLM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
