"""The model's shape: ``ModelConfig`` and its presets (vLLM's ``vllm/config/model.py``, with the
fields of a DeepSeek-V2/V3 ``config.json``: ``DeepseekV2Config``/``DeepseekV3Config`` in
transformers).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from pdlab.engine.config.utils import ConfigBase, _check_int, _check_positive_float, _fail
from pdlab.errors import PdlabValueError, Phrase, invalid, noted


@dataclass(frozen=True)
class ModelConfig(ConfigBase):
    """The dimensions of a DeepSeek-style decoder with Multi-head Latent Attention (MLA).

    The KV cache of one layer holds, per token, one latent row of ``kv_cache_dim =
    kv_lora_rank + qk_rope_head_dim`` values (576 for DeepSeek), shared by all heads.
    """

    name: str = "custom"
    vocab_size: int = 258
    hidden_size: int = 128
    intermediate_size: int = 256
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    q_lora_rank: int | None = None
    kv_lora_rank: int = 64
    qk_nope_head_dim: int = 32
    qk_rope_head_dim: int = 16
    v_head_dim: int = 32
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 4096
    # YaRN scaling as in a DeepSeek config.json: {"type": "yarn", "factor", "mscale",
    # "mscale_all_dim", "original_max_position_embeddings", "beta_fast", "beta_slow"}.
    rope_scaling: dict[str, Any] | None = None
    init_std: float | None = None
    # DeepSeek-V3's name: how many multi-token-prediction (MTP) layers follow the decoder
    # (``pdlab.engine.model_executor.models.deepseek_mtp``); 0 = none (V2, V2-Lite), 1 =
    # DeepSeek-V3's single MTP layer, more = one module per draft step (vLLM 0.33.0's
    # multi-module MTP), at most ``MAX_NUM_NEXTN_PREDICT_LAYERS``.
    num_nextn_predict_layers: int = 0
    # DeepSeek's MoE fields, named as in its config.json and vLLM 0.33.0's deepseek_v2.py:
    # layers from ``first_k_dense_replace`` on route each token to ``num_experts_per_tok``
    # of ``n_routed_experts`` experts of width ``moe_intermediate_size``, beside
    # ``n_shared_experts`` that every token runs; the first layers keep a dense MLP of
    # ``intermediate_size``. None: no experts. pdlab's model runs every layer dense; only
    # ``pdlab sim``'s cost model (pdlab/sim/costs.py) reads these.
    n_routed_experts: int | None = None
    num_experts_per_tok: int | None = None
    n_shared_experts: int | None = None
    moe_intermediate_size: int | None = None
    first_k_dense_replace: int = 0
    seed: int = 0
    # Which weights the model loads: "random" (seeded by ``seed``; vLLM's
    # ``--load-format dummy`` plays the same role), "trained" (the checkpoint pdlab ships,
    # made by ``pdlab train`` for the tiny preset's dimensions) or a ``.safetensors`` path.
    weights: str = "random"

    def __post_init__(self) -> None:
        c = "ModelConfig"
        for name in (
            "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "kv_lora_rank", "qk_nope_head_dim", "v_head_dim",
            "max_position_embeddings",
        ):  # fmt: skip
            _check_int(c, name, getattr(self, name))
        _check_int(c, "seed", self.seed, minimum=0)
        _check_int(c, "first_k_dense_replace", self.first_k_dense_replace, minimum=0)
        for name, low in (
            ("n_routed_experts", 1), ("num_experts_per_tok", 1),
            ("n_shared_experts", 0), ("moe_intermediate_size", 1),
        ):  # fmt: skip
            if getattr(self, name) is not None:
                _check_int(c, name, getattr(self, name), minimum=low)
        n, top = self.num_nextn_predict_layers, MAX_NUM_NEXTN_PREDICT_LAYERS
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= top:
            _fail(c, "num_nextn_predict_layers", n, Phrase("err_x_int_range", a=0, b=top))
        if self.q_lora_rank is not None:
            _check_int(c, "q_lora_rank", self.q_lora_rank)
        r = self.qk_rope_head_dim
        if isinstance(r, bool) or not isinstance(r, int) or r < 2 or r % 2:
            even = noted(Phrase("err_x_even_ge", n=2), "err_n_rope_pairs")
            _fail(c, "qk_rope_head_dim", r, even)
        _check_positive_float(c, "rms_norm_eps", self.rms_norm_eps)
        _check_positive_float(c, "rope_theta", self.rope_theta)
        if self.init_std is not None:
            _check_positive_float(c, "init_std", self.init_std)
        if self.rope_scaling is not None:
            self._validate_rope_scaling()
        self._validate_weights()

    def _validate_weights(self) -> None:
        c, w = "ModelConfig", self.weights
        if not isinstance(w, str) or not (w in WEIGHTS or w.endswith(".safetensors")):
            _fail(c, "weights", w, Phrase("err_x_weights"))
        if w == "trained":
            n = self.num_nextn_predict_layers
            if n > 1:  # the shipped checkpoint holds one MTP module
                one = Phrase("err_x_int_range", a=0, b=1)
                note = Phrase("err_n_one_mtp_trained")
                allowed = Phrase("err_x_with", x=one, setting="weights='trained'", note=note)
                _fail(c, "num_nextn_predict_layers", n, allowed)
            for k, v in TRAINED_FIELDS.items():
                if getattr(self, k) != v:
                    _fail(c, k, getattr(self, k), Phrase("err_x_fixed_by_weights", value=v))

    def _validate_rope_scaling(self) -> None:
        c, rs = "ModelConfig", self.rope_scaling
        if not isinstance(rs, dict):
            _fail(c, "rope_scaling", rs, Phrase("err_x_none_or_dict"))
        kind = rs.get("type", rs.get("rope_type"))
        if kind != "yarn":
            _fail(c, "rope_scaling.type", kind, noted("'yarn'", "err_n_yarn_only"))
        factor = rs.get("factor")
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor < 1:
            _fail(c, "rope_scaling.factor", factor, Phrase("err_x_num_ge", n=1))
        orig = rs.get("original_max_position_embeddings")
        _check_int(c, "rope_scaling.original_max_position_embeddings", orig)

    # ---- derived numbers -------------------------------------------------------------
    @property
    def qk_head_dim(self) -> int:
        """Per-head query/key width of the un-absorbed form (192 for DeepSeek)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def kv_cache_dim(self) -> int:
        """Width of one latent cache row, ``[kv_c_normed | k_pe]`` (576 for DeepSeek)."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def mscale(self) -> float:
        """YaRN attention-temperature factor, ``0.1 * mscale_all_dim * ln(factor) + 1``."""
        rs = self.rope_scaling
        if not rs:
            return 1.0
        factor = float(rs["factor"])
        m = float(rs.get("mscale_all_dim", 0.0) or 0.0)
        if factor <= 1 or m == 0:
            return 1.0
        return 0.1 * m * math.log(factor) + 1.0

    @property
    def softmax_scale(self) -> float:
        """``qk_head_dim ** -0.5 * mscale ** 2``: never ``kv_cache_dim ** -0.5``, even when
        the absorbed form computes scores over 576-wide rows (the scores are the same)."""
        return self.qk_head_dim**-0.5 * self.mscale**2

    @property
    def kv_cache_bytes_per_token(self) -> int:
        """Bytes of latent cache per token for all layers, in bf16."""
        return self.kv_cache_dim * self.num_hidden_layers * 2

    # ---- presets ---------------------------------------------------------------------
    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModelConfig:
        """A preset by name: ``tiny``, ``deepseek-v2-lite``, ``deepseek-v2``, ``deepseek-v3``."""
        key = name.lower().replace("_", "-") if isinstance(name, str) else name
        if key not in PRESETS:
            raise invalid("preset", name, Phrase("err_x_one_of", choices=sorted(PRESETS)))
        return cls(**{"name": key, **copy.deepcopy(PRESETS[key]), **overrides})

    @classmethod
    def tiny(cls, **overrides: Any) -> ModelConfig:
        """DeepSeek's structure with small numbers: a block table fits on a screen, and the
        latent row (64 + 16 = 80) is not a power of two, like the real 576 = 512 + 64."""
        return cls.preset("tiny", **overrides)

    @classmethod
    def deepseek_v2_lite(cls, **overrides: Any) -> ModelConfig:
        return cls.preset("deepseek-v2-lite", **overrides)

    @classmethod
    def deepseek_v2(cls, **overrides: Any) -> ModelConfig:
        return cls.preset("deepseek-v2", **overrides)

    @classmethod
    def deepseek_v3(cls, **overrides: Any) -> ModelConfig:
        return cls.preset("deepseek-v3", **overrides)

    @classmethod
    def from_hf(cls, config: dict[str, Any], **overrides: Any) -> ModelConfig:
        """Build from a DeepSeek-V2/V3 ``config.json`` (as a dict)."""
        if not isinstance(config, dict):
            allowed, kind = Phrase("err_x_deepseek_dict"), type(config).__name__
            raise PdlabValueError("err_invalid_str", name="config", value=kind, allowed=allowed)
        required = (
            "hidden_size", "num_hidden_layers", "num_attention_heads", "kv_lora_rank",
            "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "vocab_size",
        )  # fmt: skip
        missing = [k for k in required if k not in config]
        if missing:
            raise PdlabValueError("err_config_missing", missing=missing)
        kw: dict[str, Any] = {k: config[k] for k in required}
        kw["name"] = config.get("model_type", "hf")
        kw["intermediate_size"] = config.get("intermediate_size", 4 * config["hidden_size"])
        kw["q_lora_rank"] = config.get("q_lora_rank")
        kw["rms_norm_eps"] = float(config.get("rms_norm_eps", 1e-6))
        kw["rope_theta"] = float(config.get("rope_theta", 10000.0))
        kw["max_position_embeddings"] = config.get("max_position_embeddings", 4096)
        kw["rope_scaling"] = config.get("rope_scaling")
        kw["num_nextn_predict_layers"] = config.get("num_nextn_predict_layers", 0)
        for k in ("n_routed_experts", "num_experts_per_tok", "n_shared_experts"):
            kw[k] = config.get(k)
        kw["moe_intermediate_size"] = config.get("moe_intermediate_size")
        kw["first_k_dense_replace"] = config.get("first_k_dense_replace", 0)
        kw.update(overrides)
        return cls(**kw)


def _yarn(mscale: float, mscale_all_dim: float) -> dict[str, Any]:
    return {
        "type": "yarn", "factor": 40, "mscale": mscale, "mscale_all_dim": mscale_all_dim,
        "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1,
    }  # fmt: skip


# DeepSeek's MLA widths, the same in V2-Lite, V2 and V3 (their config.json files).
_DEEPSEEK_MLA: dict[str, Any] = dict(
    kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
    max_position_embeddings=163840,
)  # fmt: skip
# And what V2-Lite and V2 share besides.
_DEEPSEEK_V2: dict[str, Any] = dict(
    vocab_size=102400, rope_scaling=_yarn(mscale=0.707, mscale_all_dim=0.707),
    num_experts_per_tok=6, n_shared_experts=2, first_k_dense_replace=1, **_DEEPSEEK_MLA,
)  # fmt: skip

# pdlab's bound on ``num_nextn_predict_layers`` (upstream sets none; DeepSeek-V3 ships 1):
# each module is one more decoder layer with its own KV cache.
MAX_NUM_NEXTN_PREDICT_LAYERS = 4

# The values of ``ModelConfig.weights`` that are not a path.
WEIGHTS = ("trained", "random")

# Each preset's fields (the name is the key). The tiny preset loads the trained checkpoint.
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(
        vocab_size=258, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, q_lora_rank=None, kv_lora_rank=64, qk_nope_head_dim=32,
        qk_rope_head_dim=16, v_head_dim=32, max_position_embeddings=4096,
        num_nextn_predict_layers=1,  # the shipped checkpoint holds DeepSeek-V3's MTP layer
        weights="trained",
    ),
    "deepseek-v2-lite": dict(
        hidden_size=2048, intermediate_size=10944, num_hidden_layers=27, num_attention_heads=16,
        q_lora_rank=None, n_routed_experts=64, moe_intermediate_size=1408, **_DEEPSEEK_V2,
    ),
    "deepseek-v2": dict(
        hidden_size=5120, intermediate_size=12288, num_hidden_layers=60, num_attention_heads=128,
        q_lora_rank=1536, n_routed_experts=160, moe_intermediate_size=1536, **_DEEPSEEK_V2,
    ),
    "deepseek-v3": dict(
        vocab_size=129280, hidden_size=7168, intermediate_size=18432, num_hidden_layers=61,
        num_attention_heads=128, q_lora_rank=1536, num_nextn_predict_layers=1,
        rope_scaling=_yarn(mscale=1.0, mscale_all_dim=1.0),
        n_routed_experts=256, num_experts_per_tok=8, n_shared_experts=1,
        moe_intermediate_size=2048, first_k_dense_replace=3, **_DEEPSEEK_MLA,
    ),
}  # fmt: skip

# The fields the shipped checkpoint's tensors (and what they learned) depend on, with the
# values it was trained with. ``num_nextn_predict_layers`` is free: with 0 the loader skips
# the checkpoint's MTP layer, as vLLM's target model does.
TRAINED_FIELDS: dict[str, Any] = {
    k: v
    for k, v in PRESETS["tiny"].items()
    if k not in ("max_position_embeddings", "weights", "num_nextn_predict_layers")
} | {"rope_theta": 10000.0, "rope_scaling": None}
