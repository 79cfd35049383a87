"""MLA attention and its metadata, as ``vllm/v1/attention/`` (the layer itself is in
``vllm/model_executor/layers/attention/mla_attention.py`` upstream)."""
