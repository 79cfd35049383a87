"""The modelled price of each first-token design (``pdlab/disagg/designs.py``): the P/D pair
records the ``first_token`` event (facts only); the views and ``pdlab pd --compare-designs``
price it here. vLLM 0.33.0 has no counterpart: it measures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pdlab.disagg.designs import payload_bytes
from pdlab.engine.config import ModelConfig
from pdlab.sim.costs import first_token_forward_cost, lm_head_cost
from pdlab.sim.profiles import DeviceProfile


def design_point(
    cfg: ModelConfig, mode: str, n: int, kv_bytes: int, forward: str, profile: DeviceProfile, e: int
) -> tuple[int, float, float]:
    """``(payload_bytes, d_flops, latency_s)`` of token 1 of an ``n``-token prompt under
    ``mode``, given the K/V bytes that crossed and D's first ``forward``: the latency after
    P's prefill is the transfer, then D's compute at its roofline, for an idle D (0 where
    P's token is the answer)."""
    payload = payload_bytes(cfg, mode, kv_bytes, e)
    if mode in ("first_token", "append_prompt"):
        return payload, 0.0, 0.0
    flops, compute_s = 0.0, 0.0
    if mode == "hidden_state" and kv_bytes:
        c = lm_head_cost(cfg, 1, e)
        flops, compute_s = c.flops, profile.roofline_s(c.flops, c.bytes)
    elif forward:
        step = first_token_forward_cost(cfg, n - 1, forward, e)
        flops, compute_s = step.flops, step.time_s(profile)
    return payload, flops, profile.transfer_s(kv_bytes + payload) + compute_s


def price_first_token(
    event: Mapping[str, Any], cfg: ModelConfig, profile: DeviceProfile
) -> tuple[float, float]:
    """``(d_flops, latency_s)`` of one ``first_token`` event (:func:`design_point`)."""
    facts = (event[k] for k in ("mode", "num_prompt_tokens", "kv_bytes", "d_first_forward"))
    _, flops, latency = design_point(cfg, *facts, profile, event["elem_bytes"])
    return flops, latency
