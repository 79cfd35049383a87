"""MLAAttention: the attention of one step, routed to ``_forward_decode`` or
``_forward_prefill``.

Mirrors ``MLACommonImpl`` in ``vllm/model_executor/layers/attention/mla_attention.py``
(vLLM 0.33.0), where the two paths are called ``forward_mqa`` (absorbed decode, pdlab's
``_forward_decode``) and ``forward_mha`` (pdlab's ``_forward_prefill``). ``forward``:

1. writes this step's latent rows ``[kv_c_normed | k_pe]`` into the paged cache
   (``reshape_and_cache_mla``);
2. reads the split the metadata builder made (``pdlab/attention/builder.py``: decodes first,
   by ``split_decodes_and_prefills`` with the backend's threshold and
   ``treat_short_extends_as_decodes = not use_pcp``);
3. decodes: absorbs ``W_UK`` into the query, runs ``mla_decode`` (MQA over latent rows),
   maps the latent output back with ``W_UV``;
4. prefills: up-projects the new tokens through ``kv_b_proj`` and attends causally with
   ``flash_attn_varlen``; if the request has cached context, ``_compute_prefill_context``
   gathers it chunk by chunk (``gather_cache``), up-projects each chunk, attends without a
   mask and merges every part with ``merge_attn_states``.

Both paths compute the same numbers (MLA's two forms are algebraically equal); they differ
in cost, which every kernel call records in the trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

from pdlab import kernels
from pdlab.attention import cost
from pdlab.attention.builder import MLAMetadata
from pdlab.config import ModelConfig
from pdlab.trace import EventSink


class MLALayer(Protocol):
    """What the attention reads from a layer (``DeepseekV2MLAAttention`` in
    ``pdlab/model/deepseek.py``, or a stand-in in a benchmark): its config, its index in the
    model (which cache and absorbed weights are its), and ``kv_b_proj``."""

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
    def __call__(
        self,
        layer: MLALayer,
        q: torch.Tensor,
        kv_c_normed: torch.Tensor,
        k_pe: torch.Tensor,
        ctx: ForwardContext,
    ) -> torch.Tensor:
        return self.forward(layer, q, kv_c_normed, k_pe, ctx)

    def forward(
        self,
        layer: MLALayer,
        q: torch.Tensor,
        kv_c_normed: torch.Tensor,
        k_pe: torch.Tensor,
        ctx: ForwardContext,
    ) -> torch.Tensor:
        m, cfg = ctx.attn_metadata, layer.cfg
        kv_cache = ctx.kv_caches[layer.layer_idx]
        t = q.shape[0]
        self._record(
            ctx,
            layer,
            "reshape_and_cache_mla",
            "write",
            {"kv_c": kv_c_normed.shape, "k_pe": k_pe.shape, "kv_cache": kv_cache.shape},
            0.0,
            2.0 * kv_c_normed.element_size() * t * cfg.kv_cache_dim,
        )
        kernels.reshape_and_cache_mla(
            kv_c_normed, k_pe, kv_cache, m.slot_mapping, backend=ctx.backend
        )
        out = q.new_empty(t, cfg.num_attention_heads, cfg.v_head_dim)
        nd = m.num_decode_tokens
        if m.num_decodes:
            out[:nd] = self._forward_decode(layer, q[:nd], kv_cache, m, ctx)
        if m.num_prefills:
            out[nd:] = self._forward_prefill(
                layer, q[nd:], kv_c_normed[nd:], k_pe[nd:], kv_cache, m, ctx
            )
        return out

    # ---- decode: absorbed MQA over the latent cache ----------------------------------
    def _forward_decode(
        self,
        layer: MLALayer,
        q: torch.Tensor,
        kv_cache: torch.Tensor,
        m: MLAMetadata,
        ctx: ForwardContext,
    ) -> torch.Tensor:
        cfg = layer.cfg
        nreq = m.num_decodes
        w_uk_t, w_uv = self.absorbed_weights(layer)
        h, n, L = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.kv_lora_rank
        e = q.element_size()
        # A decode may carry more than one query token (a backend whose
        # reorder_batch_threshold is above 1 sends short prompts here): each token becomes
        # its own row that sees the cache up to and including itself (causal).
        q_lens = m.query_lens[:nreq].long()
        seq_lens = m.seq_lens[:nreq].long()
        row_req = torch.repeat_interleave(torch.arange(nreq, device=q.device), q_lens)
        starts = m.query_start_loc[:nreq].long()
        offset_in_q = torch.arange(q.shape[0], device=q.device) - starts[row_req]
        row_seq_lens = (seq_lens[row_req] - q_lens[row_req] + offset_in_q + 1).to(torch.int32)
        row_block_table = m.block_table[:nreq][row_req]

        q_nope, q_pe = q[..., :n], q[..., n:]
        rows = q.shape[0]
        self._record(
            ctx,
            layer,
            "q_nope @ W_UK_T",
            "decode",
            {"q_nope": q_nope.shape, "W_UK_T": w_uk_t.shape},
            *cost.per_head_gemm(rows, h, L, n, e),
        )
        q_latent = torch.einsum("bhn,hnl->bhl", q_nope, w_uk_t.to(q.dtype))
        q_mqa = torch.cat([q_latent, q_pe], dim=-1).contiguous()
        # The split count is fixed here, so that the trace and the kernel agree on it.
        splits = kernels.decode_attention.plan_num_kv_splits(
            q_mqa, row_seq_lens, ctx.num_kv_splits, L
        )
        seq_list = row_seq_lens.tolist()
        fl, by = cost.mla_decode_cost(seq_list, h, cfg.kv_cache_dim, L, e)
        tile = kernels.decode_attention.mla_decode_config(L, cfg.qk_rope_head_dim, e)
        wf, wb = cost.split_workspace_cost(seq_list, h, L, splits, tile["stage1"]["BLOCK_N"])
        self._record(
            ctx,
            layer,
            "mla_decode",
            "decode",
            {
                "q": q_mqa.shape,
                "kv_cache": kv_cache.shape,
                "block_table": row_block_table.shape,
                "seq_lens": seq_list,
                "num_kv_splits": splits,
            },
            fl + wf,
            by + wb,
        )
        o_latent, _ = kernels.mla_decode(
            q_mqa,
            kv_cache,
            row_block_table,
            row_seq_lens,
            cfg.softmax_scale,
            num_kv_splits=splits,
            kv_lora_rank=L,
            backend=ctx.backend,
        )
        self._record(
            ctx,
            layer,
            "o_latent @ W_UV",
            "decode",
            {"o_latent": o_latent.shape, "W_UV": w_uv.shape},
            *cost.per_head_gemm(rows, h, cfg.v_head_dim, L, e),
        )
        return torch.einsum("bhl,hlv->bhv", o_latent.to(q.dtype), w_uv.to(q.dtype))

    # ---- prefill: up-project and run flash attention ---------------------------------
    def _up_project(
        self,
        layer: MLALayer,
        kv_c: torch.Tensor,
        k_pe: torch.Tensor,
        ctx: ForwardContext,
        what: str,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = layer.cfg
        h, n = cfg.num_attention_heads, cfg.qk_nope_head_dim
        s = kv_c.shape[0]
        self._record(
            ctx,
            layer,
            f"kv_b_proj ({what})",
            "prefill",
            {"kv_c": kv_c.shape, "kv_b_proj": layer.kv_b_proj.weight.shape},
            *cost.gemm(s, h * (n + cfg.v_head_dim), cfg.kv_lora_rank, kv_c.element_size()),
        )
        kv = layer.kv_b_proj(kv_c).view(s, h, n + cfg.v_head_dim)
        k_nope, v = kv.split([n, cfg.v_head_dim], dim=-1)
        self._record(
            ctx,
            layer,
            f"K/V assembly ({what})",
            "prefill",
            {"k_nope": k_nope.shape, "k_pe": k_pe.shape, "v": v.shape},
            *cost.k_assembly_cost(s, h, n, k_pe.shape[-1], cfg.v_head_dim, kv_c.element_size()),
        )
        k = torch.cat([k_nope, k_pe[:, None, :].expand(-1, h, -1)], dim=-1)
        return k.contiguous(), v.contiguous()

    def _flash(
        self,
        layer: MLALayer,
        ctx: ForwardContext,
        what: str,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        cu_q: torch.Tensor,
        cu_k: torch.Tensor,
        causal: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = layer.cfg
        q_lens = (cu_q[1:] - cu_q[:-1]).tolist()
        k_lens = (cu_k[1:] - cu_k[:-1]).tolist()
        fl, by = cost.flash_attn_cost(
            q_lens,
            k_lens,
            cfg.num_attention_heads,
            cfg.qk_head_dim,
            cfg.v_head_dim,
            causal,
            q.element_size(),
        )
        self._record(
            ctx,
            layer,
            "flash_attn_varlen",
            "prefill",
            {
                "q": q.shape,
                "k": k.shape,
                "v": v.shape,
                "q_lens": q_lens,
                "k_lens": k_lens,
                "causal": causal,
                "part": what,
            },
            fl,
            by,
        )
        return kernels.flash_attn_varlen(
            q,
            k,
            v,
            cu_q,
            cu_k,
            max(q_lens),
            max(k_lens),
            cfg.softmax_scale,
            causal,
            backend=ctx.backend,
        )

    def _forward_prefill(
        self,
        layer: MLALayer,
        q: torch.Tensor,
        kv_c: torch.Tensor,
        k_pe: torch.Tensor,
        kv_cache: torch.Tensor,
        m: MLAMetadata,
        ctx: ForwardContext,
    ) -> torch.Tensor:
        nd = m.num_decodes
        qsl = m.query_start_loc[nd:]
        cu_q = (qsl - qsl[0]).to(torch.int32)
        k, v = self._up_project(layer, kv_c, k_pe, ctx, "new tokens")
        out, lse = self._flash(layer, ctx, "new tokens", q, k, v, cu_q, cu_q, causal=True)
        if m.context_chunks:
            ctx_out, ctx_lse = self._compute_prefill_context(layer, q, kv_cache, m, cu_q, ctx)
            self._record(
                ctx,
                layer,
                "merge_attn_states",
                "prefill",
                {"out": out.shape, "lse": lse.shape},
                5.0 * out.numel(),
                3.0 * out.numel() * out.element_size(),
            )
            out, lse = kernels.merge_attn_states(ctx_out, ctx_lse, out, lse, backend=ctx.backend)
        return out.to(q.dtype)

    def _compute_prefill_context(
        self,
        layer: MLALayer,
        q: torch.Tensor,
        kv_cache: torch.Tensor,
        m: MLAMetadata,
        cu_q: torch.Tensor,
        ctx: ForwardContext,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention of the new tokens over their cached context, one workspace-sized chunk
        at a time (``m.context_chunks``, planned by the builder as upstream does). A chunk
        covers consecutive prefills; a context too long for what is left continues in the
        next chunk, whose result is merged into the first by LSE. Tokens of a request with
        no context keep ``lse = -inf`` (weight 0 in the final merge)."""
        nd = m.num_decodes
        block_table = m.block_table[nd:]
        L = layer.cfg.kv_lora_rank
        h, dv = layer.cfg.num_attention_heads, layer.cfg.v_head_dim
        acc_out: torch.Tensor | None = None
        acc_lse: torch.Tensor | None = None
        q_bounds = cu_q.tolist()
        for i, chunk in enumerate(m.context_chunks):
            rs, re = chunk.request_start, chunk.request_end
            t0, t1 = q_bounds[rs], q_bounds[re]
            lens = torch.tensor(chunk.seq_lens, dtype=torch.int32, device=q.device)
            cu = torch.zeros(re - rs + 1, dtype=torch.int32, device=q.device)
            cu[1:] = torch.cumsum(lens, 0)
            starts = torch.tensor(chunk.starts, dtype=torch.int32, device=q.device)
            self._record(
                ctx,
                layer,
                "gather_cache",
                "prefill",
                {
                    "kv_cache": kv_cache.shape,
                    "block_table": block_table[rs:re].shape,
                    "rows": int(cu[-1]),
                    "chunk": i,
                    "seq_starts": chunk.starts,
                },
                0.0,
                2.0 * kv_cache.element_size() * int(cu[-1]) * kv_cache.shape[-1],
            )
            rows = kernels.gather_cache(
                kv_cache, block_table[rs:re], cu, starts, backend=ctx.backend
            )
            k, v = self._up_project(
                layer, rows[:, :L].to(q.dtype), rows[:, L:].to(q.dtype), ctx, "context"
            )
            cu_q_chunk = (cu_q[rs : re + 1] - cu_q[rs]).to(torch.int32)
            out, lse = self._flash(
                layer, ctx, f"context chunk {i}", q[t0:t1], k, v, cu_q_chunk, cu, causal=False
            )
            if acc_out is None or acc_lse is None:
                acc_out = out.new_zeros(q.shape[0], h, dv)
                acc_lse = lse.new_full((q.shape[0], h), float("-inf"))
            if chunk.is_continuation:
                # The first request already has a part from the previous chunk.
                t_end = q_bounds[rs + 1]
                n = t_end - t0
                self._record(
                    ctx,
                    layer,
                    "merge_attn_states",
                    "prefill",
                    {"out": out[:n].shape, "lse": lse[:n].shape},
                    5.0 * out[:n].numel(),
                    3.0 * out[:n].numel() * out.element_size(),
                )
                merged = kernels.merge_attn_states(
                    acc_out[t0:t_end], acc_lse[t0:t_end], out[:n], lse[:n], backend=ctx.backend
                )
                out, lse = out.clone(), lse.clone()
                out[:n], lse[:n] = merged
            acc_out[t0:t1] = out
            acc_lse[t0:t1] = lse
        assert acc_out is not None and acc_lse is not None
        return acc_out, acc_lse

    # ---- trace -----------------------------------------------------------------------
    @staticmethod
    def _record(
        ctx: ForwardContext,
        layer: MLALayer,
        name: str,
        path: str,
        shapes: dict[str, Any],
        flops: float,
        nbytes: float,
    ) -> None:
        if ctx.emit is not None:
            ctx.emit(
                "kernel",
                name=name,
                path=path,
                layer=layer.layer_idx,
                backend=kernels.backend.resolve(ctx.backend),
                shapes={k: list(v) if isinstance(v, torch.Size) else v for k, v in shapes.items()},
                flops=float(flops),
                bytes=float(nbytes),
            )
