"""The model runner, as ``vllm/v1/worker/``."""
