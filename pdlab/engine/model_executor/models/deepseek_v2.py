"""A tiny DeepSeek-style decoder: RMSNorm, MLA with decoupled RoPE, a gated SiLU MLP.

Mirrors ``vllm/model_executor/models/deepseek_v2.py`` (``DeepseekV2MLAAttention``,
``DeepseekV2DecoderLayer``, ``DeepseekV2ForCausalLM``) with DeepSeek-V2/V3 checkpoint
parameter names, so a dense state dict in that format loads (which weights it runs:
``model_loader.py``).

Called without a forward context, the model runs one token sequence with no cache at all,
attention computed by the oracle (``pdlab.attention.reference``): the model-level oracle
the engine is tested against. With a context (the model runner's), each layer's attention
runs the paged ``MLAAttention``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from pdlab.attention.reference import mla_absorbed, mla_naive
from pdlab.engine.config import ModelConfig
from pdlab.engine.model_executor.rotary_embedding import apply_rope, rope_cos_sin
from pdlab.errors import PdlabValueError

if TYPE_CHECKING:  # the paged path; the oracle path (ctx None) needs no kernels
    from pdlab.engine.attention.mla_attention import ForwardContext
    from pdlab.engine.model_executor.models.deepseek_mtp import DeepSeekMTP


@torch.no_grad()
def init_parameters(module: nn.Module, cfg: ModelConfig) -> None:
    """The seeded initialisation (``cfg.seed``), in ``named_parameters`` order: norms near 1,
    matrices ``N(0, std)`` with ``std = init_std or fan_in ** -0.5``, embeddings ``N(0, 1)``."""
    g = torch.Generator().manual_seed(cfg.seed)
    for name, p in module.named_parameters():
        if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
            p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
        elif p.dim() == 2 and "embed_tokens" not in name:
            std = cfg.init_std or p.shape[1] ** -0.5
            p.copy_(torch.randn(p.shape, generator=g) * std)
        else:
            p.copy_(torch.randn(p.shape, generator=g))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * self.weight.float()).to(x.dtype)


class DeepseekV2MLAAttention(nn.Module):
    """The projections around MLA. Produces, per token, the query ``[H, nope + rope]`` and the
    latent row ``[kv_c_normed | k_pe]`` the paged cache stores; consumes ``[H, v]``."""

    def __init__(self, cfg: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        self.cfg, self.layer_idx = cfg, layer_idx
        h, d = cfg.num_attention_heads, cfg.hidden_size
        if cfg.q_lora_rank is None:
            self.q_proj = nn.Linear(d, h * cfg.qk_head_dim, bias=False)
        else:
            self.q_a_proj = nn.Linear(d, cfg.q_lora_rank, bias=False)
            self.q_a_layernorm = RMSNorm(cfg.q_lora_rank, cfg.rms_norm_eps)
            self.q_b_proj = nn.Linear(cfg.q_lora_rank, h * cfg.qk_head_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(d, cfg.kv_cache_dim, bias=False)
        self.kv_a_layernorm = RMSNorm(cfg.kv_lora_rank, cfg.rms_norm_eps)
        self.kv_b_proj = nn.Linear(
            cfg.kv_lora_rank, h * (cfg.qk_nope_head_dim + cfg.v_head_dim), bias=False
        )
        self.o_proj = nn.Linear(h * cfg.v_head_dim, d, bias=False)

    def project(
        self, positions: torch.Tensor, x: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``q[T, H, nope + rope]``, ``kv_c_normed[T, L]``, ``k_pe[T, R]``, RoPE applied."""
        cfg = self.cfg
        if cfg.q_lora_rank is None:
            q = self.q_proj(x)
        else:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        q = q.view(x.shape[0], cfg.num_attention_heads, cfg.qk_head_dim)
        kv_c, k_pe = self.kv_a_proj_with_mqa(x).split(
            [cfg.kv_lora_rank, cfg.qk_rope_head_dim], dim=-1
        )
        cos, sin = rope_cos_sin(cfg, positions)
        q_pe = apply_rope(q[..., cfg.qk_nope_head_dim :], cos, sin)
        q = torch.cat([q[..., : cfg.qk_nope_head_dim], q_pe], dim=-1)
        k_pe = apply_rope(k_pe.contiguous(), cos, sin)
        return q, self.kv_a_layernorm(kv_c.contiguous()), k_pe

    def forward(
        self, positions: torch.Tensor, x: torch.Tensor,
        ctx: ForwardContext | None = None, attn_impl: str = "absorb",
    ) -> torch.Tensor:  # fmt: skip
        cfg = self.cfg
        q, kv_c, k_pe = self.project(positions, x)
        if ctx is None:
            fn = {"naive": mla_naive, "absorb": mla_absorbed}[attn_impl]  # causal by default
            w = self.kv_b_proj.weight
            out, _ = fn(q, kv_c, k_pe, w, cfg.qk_nope_head_dim, cfg.v_head_dim, cfg.softmax_scale)
        else:
            out = ctx.attention(self, q, kv_c, k_pe, ctx)
        return self.o_proj(out.to(x.dtype).reshape(x.shape[0], -1))


class DeepseekV2MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class DeepseekV2DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        self.self_attn = DeepseekV2MLAAttention(cfg, layer_idx)
        self.mlp = DeepseekV2MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(
        self, positions: torch.Tensor, x: torch.Tensor,
        ctx: ForwardContext | None = None, attn_impl: str = "absorb",
    ) -> torch.Tensor:  # fmt: skip
        x = x + self.self_attn(positions, self.input_layernorm(x), ctx, attn_impl)
        return x + self.mlp(self.post_attention_layernorm(x))


class DeepseekV2Model(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(
            DeepseekV2DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers)
        )
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(
        self, input_ids: torch.Tensor, positions: torch.Tensor,
        ctx: ForwardContext | None = None, attn_impl: str = "absorb",
    ) -> torch.Tensor:  # fmt: skip
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(positions, x, ctx, attn_impl)
        return self.norm(x)


class DeepseekV2ForCausalLM(nn.Module):
    """The whole decoder. ``forward`` returns the final hidden states (after ``model.norm``,
    as upstream's; also what the MTP drafter takes); ``compute_logits`` applies ``lm_head``.
    ``mtp`` is DeepSeek-V3's MTP layer (``deepseek_mtp.py``) when ``num_nextn_predict_layers``
    is 1 or more, else None; module ``j >= 1`` is ``mtp{j}``, ``mtp_layers`` lists them all."""

    def __init__(
        self, cfg: ModelConfig, dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ) -> None:  # fmt: skip
        super().__init__()
        self.config = cfg
        self.model = DeepseekV2Model(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        # DeepSeek-V3's MTP layer (deepseek_mtp.py), sharing the embedding and the head.
        # Built after the target's parameters and outside the global RNG, so adding it
        # changes neither the target's seeded initialisation nor anyone's random stream.
        self.mtp: DeepSeekMTP | None = None
        if cfg.num_nextn_predict_layers:
            from pdlab.engine.model_executor.models.deepseek_mtp import DeepSeekMTP

            for j in range(cfg.num_nextn_predict_layers):
                with torch.random.fork_rng(devices=[]):
                    mtp = DeepSeekMTP(cfg, j)
                mtp.embed_tokens = self.model.embed_tokens
                mtp.shared_head.head = self.lm_head
                setattr(self, f"mtp{j or ''}", mtp)  # mtp, mtp1, mtp2, ...
        init_parameters(self, cfg)
        if cfg.weights != "random":
            from pdlab.engine.model_executor.model_loader import load_weights

            load_weights(self, cfg.weights)
        self.to(device=device, dtype=dtype)

    @property
    def mtp_layers(self) -> list[DeepSeekMTP]:
        """The MTP modules in order: module ``j`` is layer ``num_hidden_layers + j``."""
        n = self.config.num_nextn_predict_layers
        return [getattr(self, f"mtp{j or ''}") for j in range(n)]

    def forward(
        self, input_ids: torch.Tensor, positions: torch.Tensor,
        ctx: ForwardContext | None = None, attn_impl: str = "absorb",
    ) -> torch.Tensor:  # fmt: skip
        return self.model(input_ids, positions, ctx, attn_impl)

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden_states).float()

    @torch.no_grad()
    def forward_full(
        self, token_ids: list[int] | torch.Tensor, attn_impl: str = "absorb"
    ) -> torch.Tensor:
        """Logits ``[T, vocab]`` of one sequence, no cache: the model-level oracle."""
        ids = torch.as_tensor(token_ids, dtype=torch.long, device=self.lm_head.weight.device)
        if ids.dim() != 1 or ids.numel() == 0:
            raise ValueError(
                f"token_ids must be a non-empty 1-D sequence; got shape {tuple(ids.shape)}"
            )
        positions = torch.arange(ids.numel(), device=ids.device)
        return self.compute_logits(self.forward(ids, positions, None, attn_impl))

    @torch.no_grad()
    def greedy_generate(self, token_ids: list[int], max_tokens: int) -> list[int]:
        """Greedy decoding by re-running the full forward each step (slow, obviously right)."""
        ids = list(token_ids)
        out: list[int] = []
        for _ in range(max_tokens):
            nxt = int(self.forward_full(ids)[-1].argmax())
            out.append(nxt)
            ids.append(nxt)
        return out

    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        """The state dict under DeepSeek checkpoint names: the target's as they are, MTP
        module ``j``'s as ``model.layers.{num_hidden_layers + j}.*`` (with its copies of the
        shared ``embed_tokens`` and ``shared_head.head``, as DeepSeek-V3's checkpoint holds
        them)."""
        from pdlab.engine.model_executor.models.deepseek_mtp import checkpoint_name

        n = self.config.num_hidden_layers
        return {
            checkpoint_name(k, n) if k.startswith("mtp") else k: v
            for k, v in self.state_dict().items()
        }

    @torch.no_grad()
    def load_hf_state_dict(
        self, state_dict: dict[str, torch.Tensor], source: str = "state_dict"
    ) -> None:
        """Load a dense DeepSeek-V2/V3-format state dict; reject a mismatched one with a
        message listing the missing, unexpected and misshaped keys. Without an MTP module
        (``num_nextn_predict_layers=0``) the checkpoint's MTP layer is skipped, as vLLM's
        target model skips it; with one, a checkpoint without it is one line."""
        from pdlab.engine.model_executor.models.deepseek_mtp import spec_layer_index

        n = self.config.num_hidden_layers
        own = self.hf_state_dict()
        given = {k: v for k, v in state_dict.items() if not k.endswith("rotary_emb.inv_freq")}
        spec = {k for k in given if spec_layer_index(k, n) is not None}
        shared = {}
        for j in range(max(self.config.num_nextn_predict_layers, 1)):
            shared[f"model.layers.{n + j}.embed_tokens.weight"] = "model.embed_tokens.weight"
            shared[f"model.layers.{n + j}.shared_head.head.weight"] = "lm_head.weight"
        if self.mtp is None:
            given = {k: v for k, v in given.items() if k not in spec}
        elif not spec - set(shared):
            raise PdlabValueError("err_checkpoint_no_mtp", source=source, n=n)
        for copy, main in shared.items():  # optional in a checkpoint; the target's if absent
            if copy in given and main in given and not torch.equal(given[copy], given[main]):
                raise PdlabValueError(
                    "err_checkpoint_unshared", source=source, copy=copy, main=main
                )
            if copy in own and copy not in given and main in given:
                given[copy] = given[main]
        missing = sorted(set(own) - set(given))
        unexpected = sorted(set(given) - set(own))
        misshaped = sorted(
            f"{k}: expected {tuple(own[k].shape)}, got {tuple(given[k].shape)}"
            for k in set(own) & set(given)
            if own[k].shape != given[k].shape
        )
        if missing or unexpected or misshaped:
            parts = []
            if missing:
                parts.append(f"missing keys {_clip(missing)}")
            if unexpected:
                moe = any(".mlp.experts." in k or ".mlp.gate." in k for k in unexpected)
                hint = " (MoE layers are not supported: pdlab's model is dense)" if moe else ""
                parts.append(f"unexpected keys {_clip(unexpected)}{hint}")
            if misshaped:
                parts.append(f"misshaped keys {_clip(misshaped)}")
            raise ValueError(
                f"{source} does not match this DeepSeek model config: " + "; ".join(parts)
            )
        for k, v in own.items():
            v.copy_(given[k])


def _clip(items: list[str], n: int = 8) -> str:
    more = f" ... and {len(items) - n} more" if len(items) > n else ""
    return "[" + ", ".join(items[:n]) + "]" + more
