"""Published peaks of common GPUs (dense bf16 tensor FLOP/s, HBM bandwidth): plain data, so
that ``pdlab sim`` reads them without importing torch (the sources of the four it offers are
the catalog's ``sim_source_*``). vLLM 0.33.0 has no counterpart.
"""

from __future__ import annotations

from pdlab.errors import Phrase, invalid

# Published peaks (dense bf16 tensor TFLOP/s, HBM GB/s), matched on the device name.
# NVIDIA's datasheets list tensor FLOP/s with 2:4 sparsity; dense is half of that figure.
PEAKS = [
    ("B200", 2250.0, 8000.0),
    ("H200", 989.0, 4800.0),
    ("H100 PCIe", 756.0, 2000.0),
    ("H100 NVL", 835.0, 3900.0),
    ("H100", 989.0, 3350.0),
    ("H800", 989.0, 3350.0),
    ("H20", 148.0, 4000.0),
    ("A100-SXM4-80GB", 312.0, 2039.0),
    ("A100 80GB PCIe", 312.0, 1935.0),
    ("A100", 312.0, 1555.0),
    ("A800", 312.0, 2039.0),
    ("L40S", 362.0, 864.0),
    ("L40", 181.0, 864.0),
    ("L4", 121.0, 300.0),
    ("A10G", 70.0, 600.0),
    ("A10", 125.0, 600.0),
    ("RTX 4090", 165.0, 1008.0),
    ("RTX 3090", 71.0, 936.0),
]


# HBM capacity (GB) of the GPUs ``pdlab sim`` offers, from their datasheets: what a GPU's
# share of the weights must fit in.
MEMORY_GB = {"H100": 80, "H800": 80, "H200": 141, "B200": 180}


def published_peak(name: str) -> tuple[float, float]:
    """(dense bf16 FLOP/s, HBM bytes/s) of a GPU named in :data:`PEAKS`, e.g. ``"H800"``."""
    for key, tflops, gbps in PEAKS:
        if key == name:
            return tflops * 1e12, gbps * 1e9
    raise invalid("name", name, Phrase("err_x_one_of", choices=[k for k, _, _ in PEAKS]))
