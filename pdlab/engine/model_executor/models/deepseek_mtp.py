"""DeepSeek-V3's multi-token-prediction (MTP) layer: the drafter of speculative decoding.

Mirrors ``vllm/model_executor/models/deepseek_mtp.py`` (``DeepSeekMultiTokenPredictorLayer``,
``SharedHead``, ``DeepSeekMTP``). At position ``i`` the layer takes the embedding of token
``i + 1`` and the target's hidden state at ``i``, normalises each (``enorm``, ``hnorm``),
concatenates them (embedding first), projects back to the hidden size (``eh_proj``), runs
one decoder layer (``mtp_block``, with its own KV-cache entry ``num_hidden_layers``) and
reads the result through the shared head (``shared_head.norm``, then ``head``): a guess at
token ``i + 2``. ``embed_tokens`` and ``head`` are the target's (DeepSeek-V3's report).

What upstream feeds it (checked in 0.33.0):

* ``previous_hidden_states`` is what ``DeepseekV2Model.forward`` returns, the state after
  the final ``norm`` (only DeepSeek-V4 exposes a pre-norm one); pdlab's target returns the
  same.
* The embedding is zeroed at position 0 (upstream: "not needed by MTP").
* ``forward`` returns the state before ``shared_head.norm``; ``compute_logits`` applies the
  norm and the head. With more draft tokens than MTP layers, upstream applies the one layer
  again one position further on, fed the draft just proposed and ``shared_head(hidden)``
  ("the post-final-norm hidden", as SGLang's ``deepseek_nextn``):
  :meth:`DeepSeekMTP.propose_greedy` does exactly that.

Checkpoint names are DeepSeek-V3's, ``model.layers.{num_hidden_layers}.<name>`` with the
block's own names directly under it (:func:`checkpoint_name`; upstream's
``_rewrite_spec_layer_name`` maps the other way).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from pdlab.attention.reference import mla_naive, split_kv_b_proj
from pdlab.engine.config import ModelConfig
from pdlab.engine.model_executor.models.deepseek_v2 import (
    DeepseekV2DecoderLayer,
    RMSNorm,
    init_parameters,
)
from pdlab.errors import PdlabValueError, Phrase, invalid

if TYPE_CHECKING:
    from pdlab.engine.attention.mla_attention import ForwardContext
    from pdlab.engine.model_executor.models.deepseek_v2 import (
        DeepseekV2ForCausalLM,
        DeepseekV2MLAAttention,
    )


class SharedHead(nn.Module):
    """``norm`` then ``head``; calling it applies the norm only, as upstream's does."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.norm(hidden_states)


class DeepSeekMTP(nn.Module):
    """One MTP layer (module ``index`` of several is layer ``num_hidden_layers + index``).
    Built alone it owns ``embed_tokens`` and ``shared_head.head``; inside
    ``DeepseekV2ForCausalLM`` they are the target's ``model.embed_tokens`` and ``lm_head``."""

    def __init__(self, cfg: ModelConfig, index: int = 0) -> None:
        super().__init__()
        self.config = cfg
        self.layer_idx = cfg.num_hidden_layers + index  # its KV-cache entry
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.enorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.hnorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.eh_proj = nn.Linear(2 * cfg.hidden_size, cfg.hidden_size, bias=False)
        self.mtp_block = DeepseekV2DecoderLayer(cfg, self.layer_idx)
        self.shared_head = SharedHead(cfg)
        init_parameters(self, cfg)

    def forward(
        self, input_ids: torch.Tensor, positions: torch.Tensor,
        previous_hidden_states: torch.Tensor,
        ctx: ForwardContext | None = None, attn_impl: str = "absorb",
    ) -> torch.Tensor:  # fmt: skip
        """``input_ids[T]`` (token ``i + 1`` at position ``i``), ``positions[T]`` and the
        target's ``previous_hidden_states[T, hidden]``; returns the hidden states before
        ``shared_head.norm``. Without ``ctx`` attention is the cacheless oracle (causal)."""
        embeds = self.embed_tokens(input_ids)
        embeds = torch.where(positions.unsqueeze(-1) == 0, 0, embeds)  # as upstream
        x = torch.cat([self.enorm(embeds), self.hnorm(previous_hidden_states)], dim=-1)
        return self.mtp_block(positions, self.eh_proj(x), ctx, attn_impl)

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """``head(shared_head.norm(hidden))`` as float: the logits of token ``i + 2``."""
        return self.shared_head.head(self.shared_head(hidden_states)).float()

    @torch.no_grad()
    def propose_greedy(
        self, token_ids: list[int] | torch.Tensor, hidden: torch.Tensor, k: int
    ) -> list[int]:
        """``k`` greedy drafts for one sequence, no cache: the oracle of the runner's
        proposer. ``hidden[N, hidden]`` is the target's output at positions ``0 .. N-1``;
        ``token_ids`` holds ``N + 1`` tokens, the last one the token the target just produced
        from ``hidden[N-1]``. Draft ``j`` (``j = 1 .. k``) guesses token ``N + j``."""
        dev = self.eh_proj.weight.device
        ids = torch.as_tensor(token_ids, dtype=torch.long, device=dev)
        if hidden.dim() != 2 or hidden.shape[1] != self.config.hidden_size:
            raise ValueError(
                f"hidden must be [N, {self.config.hidden_size}]; got {tuple(hidden.shape)}"
            )
        n = hidden.shape[0]
        if ids.dim() != 1 or n < 1 or ids.numel() != n + 1:
            raise ValueError(
                f"token_ids must hold hidden.shape[0] + 1 = {n + 1} tokens (N >= 1); "
                f"got shape {tuple(ids.shape)}"
            )
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise invalid("k", k, Phrase("err_x_int_ge", n=1))
        inputs, prev = ids[1:], hidden.to(dev, self.eh_proj.weight.dtype)
        drafts: list[int] = []
        for _ in range(k):
            out = self(inputs, torch.arange(inputs.numel(), device=dev), prev)
            draft = int(self.compute_logits(out[-1:])[0].argmax())
            drafts.append(draft)
            inputs = torch.cat([inputs, inputs.new_tensor([draft])])
            prev = torch.cat([prev, self.shared_head(out[-1:])])
        return drafts


def checkpoint_name(module_name: str, num_hidden_layers: int) -> str:
    """``mtp.<name>`` (pdlab's module; ``mtp{j}.<name>`` for module ``j``) as a DeepSeek-V3
    checkpoint names it: the layer's own weights under ``model.layers.{num_hidden_layers +
    j}.``, the block's without ``mtp_block``."""
    head, name = module_name.split(".", 1)
    layer = num_hidden_layers + int(head.removeprefix("mtp") or 0)
    return f"model.layers.{layer}." + name.removeprefix("mtp_block.")


def spec_layer_index(name: str, num_hidden_layers: int) -> int | None:
    """The MTP layer a checkpoint name belongs to (``num_hidden_layers`` onwards), or None
    (upstream's ``get_spec_layer_idx_from_weight_name``)."""
    parts = name.split(".")
    if len(parts) > 3 and parts[:2] == ["model", "layers"] and parts[2].isdigit():
        idx = int(parts[2])
        return idx if idx >= num_hidden_layers else None
    return None


# ---- measuring the drafter: greedy acceptance over a text ------------------------------


class _BranchContext:
    """A stand-in for the forward context on the cacheless path, for :func:`draft_and_verify`.
    A layer's first call is a causal pass over a whole line, whose latent rows it keeps;
    each later call brings one token per row ``r`` that sees the kept rows ``<= ends[r]``,
    the row's tokens of the earlier calls and itself: every prefix of the line grows its own
    branch of drafts in one batched pass."""

    def __init__(self, ends: torch.Tensor) -> None:
        self.ends = ends
        self.kept: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}

    def attention(
        self, layer: DeepseekV2MLAAttention, q: torch.Tensor,
        kv_c: torch.Tensor, k_pe: torch.Tensor, ctx: object,
    ) -> torch.Tensor:  # fmt: skip
        cfg, rows = layer.cfg, self.kept.setdefault(layer.layer_idx, [])
        rows.append((kv_c, k_pe))
        nope, v_dim, w = cfg.qk_nope_head_dim, cfg.v_head_dim, layer.kv_b_proj.weight
        if len(rows) == 1:
            return mla_naive(q, kv_c, k_pe, w, nope, v_dim, cfg.softmax_scale, causal=True)[0]
        c = torch.cat([r[0] for r in rows]).float()
        pe = torch.cat([r[1] for r in rows]).float()
        w_uk, w_uv = split_kv_b_proj(w.float(), q.shape[1], nope, v_dim)
        k = torch.cat(
            [torch.einsum("sl,hdl->shd", c, w_uk), pe[:, None].expand(-1, q.shape[1], -1)], -1
        )
        see = [torch.arange(rows[0][0].shape[0])[None] <= self.ends[:, None]]
        see += [torch.eye(q.shape[0], dtype=torch.bool)] * (len(rows) - 1)
        scores = torch.einsum("qhd,khd->hqk", q.float(), k) * cfg.softmax_scale
        probs = scores.masked_fill(~torch.cat(see, 1), float("-inf")).softmax(-1)
        return torch.einsum("hqk,khd->qhd", probs, torch.einsum("sl,hdl->shd", c, w_uv))


@torch.no_grad()
def draft_and_verify(
    model: DeepseekV2ForCausalLM, token_ids: list[int], k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """For every prefix ``token_ids[: r + 2]`` of a line (``r = 0 .. L-2``), the MTP's ``k``
    chained greedy drafts and the target's greedy tokens at the same places, each given the
    prefix and the drafts before it: ``drafts[L-1, k]``, ``target[L-1, k]``. Draft ``j`` of
    row ``r`` is what ``model.mtp.propose_greedy(token_ids[: r + 2], hidden[: r + 1], k)``
    proposes; it is accepted, under greedy verification, if it and every draft before it
    equal the target's tokens."""
    mtp, n = model.mtp, len(token_ids)
    if mtp is None:
        raise PdlabValueError("err_no_mtp_layer")
    ids = torch.tensor(token_ids)
    rows = torch.arange(n - 1)
    at, am = _BranchContext(rows + 1), _BranchContext(rows)
    hidden = model(ids, torch.arange(n), at, "naive")
    target = [model.compute_logits(hidden)[1:].argmax(-1)]
    out = mtp(ids[1:], rows, hidden[:-1], am, "naive")
    drafts = [mtp.compute_logits(out).argmax(-1)]
    for j in range(1, k):
        hidden = model(drafts[-1], rows + 1 + j, at, "naive")
        target.append(model.compute_logits(hidden).argmax(-1))
        out = mtp(drafts[-1], rows + j, mtp.shared_head(out), am, "naive")
        drafts.append(mtp.compute_logits(out).argmax(-1))
    return torch.stack(drafts, 1), torch.stack(target, 1)


def acceptance_rates(model: DeepseekV2ForCausalLM, lines: list[list[int]], k: int) -> list[float]:
    """Greedy per-position acceptance rates over every prefix of every line (vLLM's
    ``Per-position acceptance rate``): entry ``j`` is the fraction of drafting steps whose
    drafts ``1 .. j + 1`` all equal the target's greedy tokens. The mean acceptance length
    (with the bonus token, as vLLM counts it) is ``1 + sum(rates)``."""
    accepted, steps = torch.zeros(k), 0
    for line in lines:
        drafts, target = draft_and_verify(model, line, k)
        accepted += (drafts == target).long().cumprod(1).sum(0)
        steps += drafts.shape[0]
    return (accepted / steps).tolist()
