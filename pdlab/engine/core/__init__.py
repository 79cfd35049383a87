"""The KV cache and the scheduler, as ``vllm/v1/core/``."""
