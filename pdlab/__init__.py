"""pdlab: the prefill/decode path of an LLM inference engine, small enough to read and run.

Mirrors vLLM's v1 engine (``vllm/v1``) with the same names: a paged KV cache, a unified
token-budget scheduler, MLA (DeepSeek) attention with Triton kernels and torch twins, and
prefill/decode disaggregation. See docs/design.md for the contracts and README.md for the map.
"""

__version__ = "0.1.0"
