"""Model Runner V2, as ``vllm/v1/worker/gpu/``."""
