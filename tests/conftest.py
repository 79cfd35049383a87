"""Import pdlab.kernels before anything else can import triton: the backend module sets
TRITON_INTERPRET on a machine without a GPU, and triton reads it when it is first imported."""

import pdlab.kernels  # noqa: F401
