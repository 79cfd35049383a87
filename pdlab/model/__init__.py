"""pdlab.model: the tiny DeepSeek-style decoder and the model runner."""

from pdlab.model.deepseek import DeepseekV2ForCausalLM

__all__ = ["DeepseekV2ForCausalLM"]
