"""The scheduler, its output and its helpers, as ``vllm/v1/core/sched/``."""
