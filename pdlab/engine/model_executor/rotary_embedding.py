"""Rotary position embedding for MLA's decoupled part, with DeepSeek's YaRN scaling.

Mirrors ``precompute_freqs_cis`` / ``apply_rotary_emb`` in DeepSeek-V3's
``inference/model.py`` (and vLLM's ``DeepseekScalingRotaryEmbedding`` in
``vllm/model_executor/layers/rotary_embedding``). Only the ``qk_rope_head_dim`` slice of the
query and the shared ``k_pe`` are rotated; the layout is DeepSeek's interleaved pairs
``(x0, x1), (x2, x3), ...``.
"""

from __future__ import annotations

import math

import torch

from pdlab.engine.config import ModelConfig


def rope_inv_freq(cfg: ModelConfig) -> torch.Tensor:
    """Per-pair inverse frequencies ``[R/2]``, YaRN-blended when ``rope_scaling`` is set."""
    dim, base = cfg.qk_rope_head_dim, cfg.rope_theta
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    rs = cfg.rope_scaling
    if not rs or float(rs["factor"]) <= 1:
        return freqs.float()
    factor = float(rs["factor"])
    orig = int(rs["original_max_position_embeddings"])
    beta_fast, beta_slow = float(rs.get("beta_fast", 32)), float(rs.get("beta_slow", 1))

    def correction_dim(num_rotations: float) -> float:
        return dim * math.log(orig / (num_rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    # Long-wavelength pairs are interpolated by `factor`, short ones are left alone.
    keep = 1 - ramp
    return (freqs / factor * (1 - keep) + freqs * keep).float()


def _yarn_get_mscale(factor: float, mscale: float) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def rope_cos_sin(cfg: ModelConfig, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos, sin`` of shape ``[T, R/2]`` (fp32) for integer ``positions[T]``."""
    angles = positions.to(torch.float32)[:, None] * rope_inv_freq(cfg).to(positions.device)[None]
    cos, sin = angles.cos(), angles.sin()
    rs = cfg.rope_scaling
    if rs and float(rs["factor"]) > 1:
        # transformers' DeepseekV3YarnRotaryEmbedding scales cos/sin by this ratio; it is 1
        # for every published DeepSeek config (mscale == mscale_all_dim).
        f = float(rs["factor"])
        ratio = _yarn_get_mscale(f, float(rs.get("mscale", 1.0))) / _yarn_get_mscale(
            f, float(rs.get("mscale_all_dim", 0.0) or 0.0)
        )
        cos, sin = cos * ratio, sin * ratio
    return cos, sin


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs of ``x[T, ..., R]`` by per-token angles ``cos/sin[T, R/2]``."""
    shape = x.shape
    xf = x.float().reshape(shape[0], -1, shape[-1] // 2, 2)
    c, s = cos[:, None, :], sin[:, None, :]
    x0, x1 = xf[..., 0], xf[..., 1]
    out = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1)
    return out.reshape(shape).to(x.dtype)
