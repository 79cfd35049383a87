"""Device profiles for ``pdlab sim`` and the first-token designs: peak FLOP/s and HBM
bandwidth, each with where it comes from, and the two parameters a roofline alone lacks
(the link K/V cross and what a CUDA graph saves), named, with their sources.

The published peaks are :data:`pdlab.sim.peaks.PEAKS` (dense bf16 tensor FLOP/s, HBM
bytes/s) with :data:`pdlab.sim.peaks.PEAK_SOURCES`; ``"here"`` is this machine,
measured now with :func:`pdlab.tools.measure.measure_ceilings` (the only profile that
imports torch). vLLM has no counterpart.
"""

from __future__ import annotations

from dataclasses import dataclass

from pdlab.errors import Phrase, invalid
from pdlab.sim.peaks import PEAK_SOURCES, published_peak

GPUS = ("H100", "H800", "H200", "B200")
PROFILES = (*GPUS, "here")

# The link D reads P's K/V over: one 400 Gb/s NDR InfiniBand port per GPU (the NIC count
# of NVIDIA's HGX H100/H200 reference design, eight ConnectX-7 for eight GPUs). An
# assumption about the deployment, not a property of the GPU: set link_bytes_per_s.
LINK_BYTES_PER_S = 50e9
LINK_SOURCE = "one 400 Gb/s NDR InfiniBand port per GPU (HGX reference design): an assumption"

# A step that is not a uniform decode batch cannot replay the full decode CUDA graph; vLLM
# then runs piecewise graphs with the attention launched eagerly between the pieces.
# pdlab charges each eager attention launch this much. No published figure: an assumption
# (the order of a kernel launch from Python), set it with launch_overhead_s.
LAUNCH_OVERHEAD_S = 5e-6
LAUNCH_SOURCE = "assumed: about one eager kernel launch, 5 us (no published figure)"


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    peak_flops: float  # dense bf16 tensor FLOP/s
    hbm_bytes_per_s: float
    source: str
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
    for what, v in (
        ("link_bytes_per_s", link_bytes_per_s),
        ("launch_overhead_s", launch_overhead_s),
    ):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
            raise invalid(what, v, Phrase("err_x_num_ge", n=0))
    if link_bytes_per_s == 0:
        raise invalid("link_bytes_per_s", 0, Phrase("err_x_num_gt", n=0))
    if name == "here":
        import torch

        from pdlab.tools.measure import measure_ceilings

        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        c = measure_ceilings(dev, torch.bfloat16 if dev.type == "cuda" else torch.float32)
        flops, bw = c["matmul_tflops"] * 1e12, c["copy_gbps"] * 1e9
        source = f"measured now on this {dev.type}: {c['matmul_shape']} matmul, tensor copy"
        on, shape = dev.type, str(c["matmul_shape"])
    else:
        flops, bw = published_peak(name)
        source, on, shape = PEAK_SOURCES[name], "", ""
    return DeviceProfile(name, flops, bw, source, link_bytes_per_s, launch_overhead_s, on, shape)
