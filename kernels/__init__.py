"""pdlab.kernels: the MLA kernels, each in Triton and as a torch twin of the same signature.

``backend.py`` decides which runs (every kernel file imports it first). Every public
function takes ``backend=None`` ("triton" or "torch"; None = the one in force).

* ``cache.py``: ``reshape_and_cache_mla`` and ``gather_cache``;
* ``flash_attn.py``: ``flash_attn_varlen``, the prefill path's attention (its Triton kernel
  in ``flash_attn_kernels.py``);
* ``merge.py``: ``merge_attn_states``, joining partial results by their LSE;
* ``decode_attention.py``: ``mla_decode``, absorbed MQA decode with split KV (its Triton
  kernels in ``decode_attention_kernels.py``, its torch twin in ``decode_attention_twin.py``,
  its tiles and split count in ``decode_plan.py``, plain Python for the cost model);
* ``checks.py``: index-range checks every kernel runs before launch.

Tools that measure or compile these kernels live in ``pdlab/tools/``.
"""

from typing import Any

# Imported on first use (PEP 562), so that ``decode_plan.py`` loads without torch or triton.
_WHERE = {
    name: f"pdlab.kernels.{module}"
    for module, names in {
        "backend": ("backend", "get_backend", "set_backend", "use_backend"),
        "checks": ("index_checks", "index_checks_enabled", "set_index_checks"),
        "cache": ("gather_cache", "reshape_and_cache_mla"),
        "flash_attn": ("flash_attn_varlen",),
        "merge": ("merge_attn_states",),
        "decode_attention": ("mla_decode",),
    }.items()
    for name in names
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    import importlib
    import importlib.util

    if name in _WHERE:
        module = importlib.import_module(_WHERE[name])
        value = module if name == "backend" else getattr(module, name)
    elif importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")  # a kernel file, e.g. cache
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # looked up once
    return value
