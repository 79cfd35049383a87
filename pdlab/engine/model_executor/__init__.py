"""The model, its layers and its loader, as ``vllm/model_executor/``."""
