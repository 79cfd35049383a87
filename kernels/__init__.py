"""pdlab.kernels: the MLA kernels, each in Triton and as a torch twin of the same signature.

``backend`` (imported first) decides which runs; see ``pdlab/kernels/backend.py``. Every
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

from pdlab.kernels import backend as backend  # noqa: I001  (must come before any kernel)
from pdlab.kernels.backend import get_backend, set_backend, use_backend
from pdlab.kernels.checks import index_checks, index_checks_enabled, set_index_checks
from pdlab.kernels.cache import gather_cache, reshape_and_cache_mla
from pdlab.kernels.flash_attn import flash_attn_varlen
from pdlab.kernels.merge import merge_attn_states
from pdlab.kernels.decode_attention import mla_decode

__all__ = [
    "backend",
    "flash_attn_varlen",
    "gather_cache",
    "get_backend",
    "index_checks",
    "index_checks_enabled",
    "merge_attn_states",
    "mla_decode",
    "reshape_and_cache_mla",
    "set_backend",
    "set_index_checks",
    "use_backend",
]
