"""KV transfer between instances, as ``vllm/distributed/kv_transfer/``."""
