"""As ``vllm/distributed/``: only KV transfer."""
