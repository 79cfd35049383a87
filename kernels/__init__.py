"""pdlab.kernels: the MLA kernels, each in Triton and as a torch twin of the same signature.

``backend`` (imported first) decides which runs; see ``pdlab/kernels/backend.py``.
"""

from pdlab.kernels import backend as backend  # noqa: I001  (must come before any kernel)
from pdlab.kernels.backend import get_backend, set_backend, use_backend

__all__ = ["backend", "get_backend", "set_backend", "use_backend"]
