"""pdlab.kernels: the MLA kernels, each in Triton and as a torch twin of the same signature.

``backend`` decides which runs (every kernel file imports it first); see
``pdlab/kernels/backend.py``. ``decode_plan.py`` holds ``mla_decode``'s tiles and split count
in plain Python (no torch, no triton), for the cost model. Every
public function takes ``backend=None`` ("triton" or "torch"; None = the one in force).

* ``cache.py``: ``reshape_and_cache_mla`` (write latent rows into their slots) and
  ``gather_cache`` (read a request's rows back through its block table);
* ``flash_attn.py``: ``flash_attn_varlen``, the prefill path's attention (its Triton kernel,
  with the math and the tiling, in ``flash_attn_kernels.py``);
* ``merge.py``: ``merge_attn_states``, joining partial results by their LSE;
* ``decode_attention.py``: ``mla_decode``, absorbed MQA decode with split KV (its two Triton
  kernels, with the math and the tiling, in ``decode_attention_kernels.py``);
* ``checks.py``: index-range checks every kernel runs before launch (on by default; off
  with ``PDLAB_CHECK_INDICES=0`` or ``set_index_checks(False)`` for benchmarking);

Tools that measure or compile these kernels (``bench_kernels.py``, ``aot.py``,
``gpu_check.py``) live in ``pdlab/tools/``.
"""

from typing import Any

# The names below are imported on first use (PEP 562), so that torch-free parts (the
# decode plan, ``decode_plan.py``, which the cost model reads) load without torch or triton.
# Each kernel file imports ``backend`` before triton, as Triton's interpreter requires.
_WHERE = {
    "backend": "pdlab.kernels.backend",
    "get_backend": "pdlab.kernels.backend",
    "set_backend": "pdlab.kernels.backend",
    "use_backend": "pdlab.kernels.backend",
    "index_checks": "pdlab.kernels.checks",
    "index_checks_enabled": "pdlab.kernels.checks",
    "set_index_checks": "pdlab.kernels.checks",
    "gather_cache": "pdlab.kernels.cache",
    "reshape_and_cache_mla": "pdlab.kernels.cache",
    "flash_attn_varlen": "pdlab.kernels.flash_attn",
    "merge_attn_states": "pdlab.kernels.merge",
    "mla_decode": "pdlab.kernels.decode_attention",
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
