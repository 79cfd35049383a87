"""MLAAttention: the attention of one step, routed to ``forward_mqa`` (the absorbed decode)
or ``forward_mha`` (the prefill).

Mirrors ``MLAAttention.forward_impl`` and ``MLACommonImpl`` in
``vllm/model_executor/layers/attention/mla_attention.py`` (vLLM 0.33.0), with the same
method names (older releases, and the question pdlab answers, call the two paths
``_forward_decode`` and ``_forward_prefill``). ``forward_impl``:

1. writes this step's latent rows ``[kv_c_normed | k_pe]`` into the paged cache
   (``reshape_and_cache_mla``);
2. reads the split the metadata builder made (``mla_builder.py``: decodes first);
3. decodes: absorbs ``W_UK`` into the query, runs ``mla_decode`` (MQA over latent rows),
   maps the latent output back with ``W_UV``;
4. prefills: up-projects the new tokens through ``kv_b_proj`` and attends causally with
   ``flash_attn_varlen``; if the request has cached context, ``_compute_prefill_context``
   gathers it chunk by chunk (``gather_cache``), up-projects each chunk, attends without a
   mask and merges every part with ``merge_attn_states``.

Both paths compute the same numbers (MLA's two forms are algebraically equal); they differ
in cost. Each kernel call goes through ``_call``, which emits a ``kernel`` event (facts
only), priced by ``pdlab/sim/kernel_costs.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Protocol, TypeVar

import torch

from pdlab import kernels
from pdlab.engine.attention.mla_builder import MLAMetadata
from pdlab.engine.config import ModelConfig
from pdlab.engine.trace import EventSink

_T = TypeVar("_T")
_Part = tuple[torch.Tensor, torch.Tensor]  # an attention output and its LSE


class MLALayer(Protocol):
    """What the attention reads from a layer (``DeepseekV2MLAAttention``, or a stand-in in a
    benchmark): its config, its index (its cache and absorbed weights), ``kv_b_proj``."""

    cfg: ModelConfig
    layer_idx: int
    kv_b_proj: torch.nn.Linear


@dataclass
class ForwardContext:
    """What a layer's attention needs during one model forward (vLLM's
    ``vllm/forward_context.py``): metadata, the per-layer caches, where to report."""

    attn_metadata: MLAMetadata
    kv_caches: list[torch.Tensor]
    attention: MLAAttention
    backend: str | None = None
    num_kv_splits: int | None = None  # None: chosen per step by mla_decode (automatic)
    workspace_tokens: int = 2048
    emit: EventSink | None = None


class MLAAttention:
    """One instance serves every layer; absorbed weights are cached per layer."""

    def __init__(self) -> None:
        self._absorbed: dict[int, tuple[int, torch.Tensor, torch.Tensor]] = {}

    # ---- weights ---------------------------------------------------------------------
    def absorbed_weights(self, layer: MLALayer) -> tuple[torch.Tensor, torch.Tensor]:
        """``W_UK_T[H, nope, L]`` and ``W_UV[H, L, v]`` from ``kv_b_proj`` (vLLM's
        ``process_weights_after_loading``), recomputed if the weight changed."""
        w = layer.kv_b_proj.weight
        cached = self._absorbed.get(layer.layer_idx)
        if cached is None or cached[0] != w._version:
            cfg = layer.cfg
            wv = w.detach().view(
                cfg.num_attention_heads, cfg.qk_nope_head_dim + cfg.v_head_dim, cfg.kv_lora_rank
            )
            w_uk_t = wv[:, : cfg.qk_nope_head_dim].contiguous()
            w_uv = wv[:, cfg.qk_nope_head_dim :].transpose(1, 2).contiguous()
            cached = (w._version, w_uk_t, w_uv)
            self._absorbed[layer.layer_idx] = cached
        return cached[1], cached[2]

    # ---- entry -----------------------------------------------------------------------
    def forward_impl(
        self, layer: MLALayer, q: torch.Tensor,
        kv_c_normed: torch.Tensor, k_pe: torch.Tensor, ctx: ForwardContext,
    ) -> torch.Tensor:  # fmt: skip
        m, cfg = ctx.attn_metadata, layer.cfg
        kv_cache = ctx.kv_caches[layer.layer_idx]
        t = q.shape[0]
        _call(
            ctx, layer, "reshape_and_cache_mla", "write",
            kernels.reshape_and_cache_mla, kv_c_normed, k_pe, kv_cache, m.slot_mapping,
            backend=ctx.backend,
            elem_bytes=kv_c_normed.element_size(),
            shapes={"kv_c": kv_c_normed.shape, "k_pe": k_pe.shape, "kv_cache": kv_cache.shape},
        )  # fmt: skip
        out = q.new_empty(t, cfg.num_attention_heads, cfg.v_head_dim)
        nd = m.num_decode_tokens
        if m.num_decodes:
            out[:nd] = self.forward_mqa(layer, q[:nd], kv_cache, m, ctx)
        if m.num_prefills:
            out[nd:] = self.forward_mha(
                layer, q[nd:], kv_c_normed[nd:], k_pe[nd:], kv_cache, m, ctx
            )
        return out

    __call__ = forward_impl

    # ---- decode: absorbed MQA over the latent cache ----------------------------------
    def forward_mqa(
        self, layer: MLALayer, q: torch.Tensor,
        kv_cache: torch.Tensor, m: MLAMetadata, ctx: ForwardContext,
    ) -> torch.Tensor:  # fmt: skip
        cfg = layer.cfg
        w_uk_t, w_uv = self.absorbed_weights(layer)
        n, L, rows = cfg.qk_nope_head_dim, cfg.kv_lora_rank, q.shape[0]
        e = q.element_size()
        # The kernel's arguments when every decode row has one query.
        row_block_table, row_seq_lens = _decode_rows(m, rows, q.device)
        q_nope, q_pe = q[..., :n], q[..., n:]
        q_latent = _call(
            ctx, layer, "q_nope @ W_UK_T", "decode",
            torch.einsum, "bhn,hnl->bhl", q_nope, w_uk_t.to(q.dtype),
            elem_bytes=e,
            shapes={"q_nope": q_nope.shape, "W_UK_T": w_uk_t.shape},
        )  # fmt: skip
        q_mqa = torch.cat([q_latent, q_pe], dim=-1).contiguous()
        # Decode rows of more than one query (1 + K when verifying drafts) go to the kernel
        # whole with query_start_loc, as FlashMLA and FlashAttention MLA take their blocks.
        nreq = m.num_decodes
        qsl = None
        block_table, seq_lens = row_block_table, row_seq_lens
        if rows > nreq:
            qsl = (m.query_start_loc[: nreq + 1] - m.query_start_loc[0]).to(torch.int32)
            block_table, seq_lens = m.block_table[:nreq], m.seq_lens[:nreq]
        # The split count is fixed here, so that the trace and the kernel agree on it.
        splits = kernels.decode_attention.plan_num_kv_splits(
            q_mqa, seq_lens, ctx.num_kv_splits, L, query_start_loc=qsl
        )
        # The call as made, and what pricing it needs (the split count, L).
        shapes: dict[str, Any] = {
            "q": q_mqa.shape, "kv_cache": kv_cache.shape, "block_table": block_table.shape,
            "seq_lens": seq_lens.tolist(), "num_kv_splits": splits, "kv_lora_rank": L,
        }  # fmt: skip
        if qsl is not None:
            shapes["query_start_loc"] = qsl.tolist()
        o_latent, _ = _call(
            ctx, layer, "mla_decode", "decode",
            kernels.mla_decode, q_mqa, kv_cache, block_table, seq_lens, cfg.softmax_scale,
            num_kv_splits=splits, kv_lora_rank=L, backend=ctx.backend, query_start_loc=qsl,
            elem_bytes=e,
            shapes=shapes,
        )  # fmt: skip
        return _call(
            ctx, layer, "o_latent @ W_UV", "decode",
            torch.einsum, "bhl,hlv->bhv", o_latent.to(q.dtype), w_uv.to(q.dtype),
            elem_bytes=e,
            shapes={"o_latent": o_latent.shape, "W_UV": w_uv.shape},
        )  # fmt: skip

    # ---- prefill: up-project and run flash attention ---------------------------------
    def forward_mha(
        self,
        layer: MLALayer,
        q: torch.Tensor,
        kv_c: torch.Tensor,
        k_pe: torch.Tensor,
        kv_cache: torch.Tensor,
        m: MLAMetadata,
        ctx: ForwardContext,
    ) -> torch.Tensor:
        qsl = m.query_start_loc[m.num_decodes :]
        cu_q = (qsl - qsl[0]).to(torch.int32)
        k, v = _up_project(layer, kv_c, k_pe, ctx, "new tokens")
        out, lse = _flash(layer, ctx, "new tokens", q, k, v, cu_q, cu_q, causal=True)
        if m.context_chunks:
            ctx_out, ctx_lse = self._compute_prefill_context(layer, q, kv_cache, m, cu_q, ctx)
            out, lse = _merge(layer, ctx, (ctx_out, ctx_lse), (out, lse))
        return out.to(q.dtype)

    def _compute_prefill_context(
        self, layer: MLALayer, q: torch.Tensor, kv_cache: torch.Tensor,
        m: MLAMetadata, cu_q: torch.Tensor, ctx: ForwardContext,
    ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """Attention of the new tokens over their cached context, one workspace-sized chunk
        at a time (``m.context_chunks``, planned by the builder as upstream does); a context
        split across two chunks is merged by LSE. Tokens of a request with no context keep
        ``lse = -inf`` (weight 0 in the final merge)."""
        block_table = m.block_table[m.num_decodes :]
        L = layer.cfg.kv_lora_rank
        acc_out = q.new_zeros(q.shape[0], layer.cfg.num_attention_heads, layer.cfg.v_head_dim)
        acc_lse = acc_out.new_full(acc_out.shape[:2], float("-inf"), dtype=torch.float32)
        q_bounds = cu_q.tolist()
        for i, chunk in enumerate(m.context_chunks):
            rs, re = chunk.request_start, chunk.request_end
            t0, t1 = q_bounds[rs], q_bounds[re]
            cu = torch.tensor([0, *accumulate(chunk.seq_lens)], dtype=torch.int32, device=q.device)
            starts = torch.tensor(chunk.starts, dtype=torch.int32, device=q.device)
            rows = _call(
                ctx, layer, "gather_cache", "prefill",
                kernels.gather_cache, kv_cache, block_table[rs:re], cu, starts,
                backend=ctx.backend,
                elem_bytes=kv_cache.element_size(),
                shapes={"kv_cache": kv_cache.shape, "block_table": block_table[rs:re].shape,
                        "rows": int(cu[-1]), "chunk": i, "seq_starts": chunk.starts},
            )  # fmt: skip
            k, v = _up_project(
                layer, rows[:, :L].to(q.dtype), rows[:, L:].to(q.dtype), ctx, "context"
            )
            cu_q_chunk = (cu_q[rs : re + 1] - cu_q[rs]).to(torch.int32)
            out, lse = _flash(
                layer, ctx, f"context chunk {i}", q[t0:t1], k, v, cu_q_chunk, cu, causal=False
            )
            if chunk.is_continuation:
                # The first request already has a part from the previous chunk: merge it in.
                t_end = q_bounds[rs + 1]
                n = t_end - t0
                merged = _merge(
                    layer, ctx, (acc_out[t0:t_end], acc_lse[t0:t_end]), (out[:n], lse[:n])
                )
                out, lse = out.clone(), lse.clone()
                out[:n], lse[:n] = merged
            acc_out[t0:t1] = out
            acc_lse[t0:t1] = lse
        return acc_out, acc_lse


# ---- the steps the two paths share ---------------------------------------------------
def _call(
    ctx: ForwardContext, layer: MLALayer, name: str, path: str, fn: Callable[..., _T],
    *args: Any, elem_bytes: int, shapes: dict[str, Any], **kwargs: Any,
) -> _T:  # fmt: skip
    """Record one ``kernel`` event (``name``, ``path``: "write", "decode" or "prefill", the
    layer, the backend, ``shapes``, the ``elem_bytes`` it is priced at), then return
    ``fn(*args, **kwargs)``. Call sites keep one line per part (what and where, the call,
    its bytes per value, its shapes) with ``# fmt: skip``."""
    if ctx.emit is not None:
        ctx.emit(
            "kernel", name=name, path=path, layer=layer.layer_idx,
            backend=kernels.backend.resolve(ctx.backend),
            shapes={k: list(v) if isinstance(v, torch.Size) else v for k, v in shapes.items()},
            elem_bytes=int(elem_bytes),
        )  # fmt: skip
    return fn(*args, **kwargs)


def _decode_rows(
    m: MLAMetadata, rows: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """One row per decode query token: its request's block table and the cache length it
    sees, up to and including itself (causal)."""
    nreq = m.num_decodes
    q_lens = m.query_lens[:nreq].long()
    seq_lens = m.seq_lens[:nreq].long()
    row_req = torch.repeat_interleave(torch.arange(nreq, device=device), q_lens)
    offset_in_q = torch.arange(rows, device=device) - m.query_start_loc[:nreq].long()[row_req]
    row_seq_lens = (seq_lens[row_req] - q_lens[row_req] + offset_in_q + 1).to(torch.int32)
    return m.block_table[:nreq][row_req], row_seq_lens


def _assemble_kv(
    k_nope: torch.Tensor, k_pe: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-head K = ``[k_nope | k_pe]`` (``k_pe`` shared by every head) and V, packed."""
    k = torch.cat([k_nope, k_pe[:, None, :].expand(-1, k_nope.shape[1], -1)], dim=-1)
    return k.contiguous(), v.contiguous()


def _up_project(
    layer: MLALayer, kv_c: torch.Tensor, k_pe: torch.Tensor, ctx: ForwardContext, what: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Latent rows to per-head K and V: ``kv_b_proj``, then the K/V assembly."""
    cfg, e = layer.cfg, kv_c.element_size()
    h, n, dv, s = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.v_head_dim, kv_c.shape[0]
    kv = _call(
        ctx, layer, f"kv_b_proj ({what})", "prefill",
        layer.kv_b_proj, kv_c,
        elem_bytes=e,
        shapes={"kv_c": kv_c.shape, "kv_b_proj": layer.kv_b_proj.weight.shape},
    )  # fmt: skip
    k_nope, v = kv.view(s, h, n + dv).split([n, dv], dim=-1)
    return _call(
        ctx, layer, f"K/V assembly ({what})", "prefill",
        _assemble_kv, k_nope, k_pe, v,
        elem_bytes=e,
        shapes={"k_nope": k_nope.shape, "k_pe": k_pe.shape, "v": v.shape},
    )  # fmt: skip


def _flash(
    layer: MLALayer, ctx: ForwardContext, what: str,
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
    cu_q: torch.Tensor, cu_k: torch.Tensor, causal: bool,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """``flash_attn_varlen`` over packed sequences; ``what`` names the part in the trace."""
    cfg = layer.cfg
    q_lens = (cu_q[1:] - cu_q[:-1]).tolist()
    k_lens = (cu_k[1:] - cu_k[:-1]).tolist()
    return _call(
        ctx, layer, "flash_attn_varlen", "prefill",
        kernels.flash_attn_varlen, q, k, v, cu_q, cu_k, max(q_lens), max(k_lens),
        cfg.softmax_scale, causal, backend=ctx.backend,
        elem_bytes=q.element_size(),
        shapes={"q": q.shape, "k": k.shape, "v": v.shape, "q_lens": q_lens, "k_lens": k_lens,
                "causal": causal, "part": what},
    )  # fmt: skip


def _merge(layer: MLALayer, ctx: ForwardContext, a: _Part, b: _Part) -> _Part:
    """``merge_attn_states`` of parts ``a = (out, lse)`` and ``b`` (the trace shows b's)."""
    (out_a, lse_a), (out_b, lse_b) = a, b
    return _call(
        ctx, layer, "merge_attn_states", "prefill",
        kernels.merge_attn_states, out_a, lse_a, out_b, lse_b, backend=ctx.backend,
        elem_bytes=out_b.element_size(),
        shapes={"out": out_b.shape, "lse": lse_b.shape},
    )  # fmt: skip
