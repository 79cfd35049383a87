"""Device profiles for ``pdlab sim`` and the first-token designs: peak FLOP/s and HBM
bandwidth, and the two parameters a roofline alone lacks (the link K/V cross and what a
CUDA graph saves), named. The published peaks are :data:`pdlab.sim.peaks.PEAKS`, their
sources the catalog's ``sim_source_*``; ``"here"`` is this machine, measured now with
:func:`pdlab.tools.measure.measure_ceilings` (the only profile that imports torch). vLLM
has no counterpart.
"""

from __future__ import annotations

from dataclasses import dataclass

from pdlab.errors import Phrase, invalid
from pdlab.sim.peaks import published_peak

GPUS = ("H100", "H800", "H200", "B200")
PROFILES = (*GPUS, "here")

# The link D reads P's K/V over: one 400 Gb/s NDR InfiniBand port per GPU (NVIDIA's HGX
# reference design). An assumption about the deployment: set link_bytes_per_s.
LINK_BYTES_PER_S = 50e9

# A step that is not a uniform decode batch cannot replay the full decode CUDA graph; vLLM
# then launches the attention eagerly between piecewise graphs. pdlab charges each eager
# launch this much: an assumption (no published figure), set it with launch_overhead_s.
LAUNCH_OVERHEAD_S = 5e-6


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    peak_flops: float  # dense bf16 tensor FLOP/s
    hbm_bytes_per_s: float
    link_bytes_per_s: float = LINK_BYTES_PER_S
    launch_overhead_s: float = LAUNCH_OVERHEAD_S
    measured_on: str = ""  # "here": the device type, and the matmul shape timed
    measured_shape: str = ""

    def roofline_s(self, flops: float, nbytes: float) -> float:
        """The floor of a kernel group: ``max(FLOPs / peak, bytes / bandwidth)``."""
        return max(flops / self.peak_flops, nbytes / self.hbm_bytes_per_s)

    def transfer_s(self, nbytes: float) -> float:
        return nbytes / self.link_bytes_per_s


def device_profile(
    name: str,
    *,
    link_bytes_per_s: float = LINK_BYTES_PER_S,
    launch_overhead_s: float = LAUNCH_OVERHEAD_S,
) -> DeviceProfile:
    """The profile ``name`` (one of :data:`PROFILES`); ``"here"`` measures this machine."""
    if name not in PROFILES:
        raise invalid("gpu", name, Phrase("err_x_one_of", choices=list(PROFILES)))
    rates = {"link_bytes_per_s": link_bytes_per_s, "launch_overhead_s": launch_overhead_s}
    for what, v in rates.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
            raise invalid(what, v, Phrase("err_x_num_ge", n=0))
    if link_bytes_per_s == 0:
        raise invalid("link_bytes_per_s", 0, Phrase("err_x_num_gt", n=0))
    if name != "here":
        flops, bw = published_peak(name)
        return DeviceProfile(name, flops, bw, link_bytes_per_s, launch_overhead_s)
    import torch

    from pdlab.tools.measure import measure_ceilings

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    c = measure_ceilings(dev, torch.bfloat16 if dev.type == "cuda" else torch.float32)
    flops, bw = c["matmul_tflops"] * 1e12, c["copy_gbps"] * 1e9
    shape = str(c["matmul_shape"])
    return DeviceProfile(name, flops, bw, link_bytes_per_s, launch_overhead_s, dev.type, shape)
