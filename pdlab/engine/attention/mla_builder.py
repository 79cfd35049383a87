"""The MLA metadata builder: one step's batch, split into decodes and prefills, with the
prefills' cached context planned in workspace-sized chunks.

Mirrors ``MLACommonMetadataBuilder.build`` and ``plan_mla_context_chunks`` in
``vllm/model_executor/layers/attention/mla_attention.py`` (vLLM 0.33.0). Two settings decide the
routing:

* the backend profile (:class:`pdlab.engine.config.MLABackendProfile`): ``decode_threshold`` is
  its ``reorder_batch_threshold`` (raised for speculative decoding, forced to 1 by decode
  context parallelism where the backend cannot keep it, as ``_init_reorder_batch_threshold``
  does) and ``require_uniform`` is ``query_len_support != VARLEN``;
* ``use_pcp`` (``prefill_context_parallel_size > 1``): the builder passes
  ``treat_short_extends_as_decodes = not use_pcp``: D's first step after a KV transfer
  (a short extend) is a decode by default and a prefill under PCP.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pdlab.engine.attention.backend import CommonAttentionMetadata, split_decodes_and_prefills
from pdlab.engine.config import AttentionConfig, ParallelConfig
from pdlab.engine.math_utils import round_down
from pdlab.errors import PdlabValueError

if TYPE_CHECKING:  # tensors are made in build only: the thresholds are read without torch
    import torch


@dataclass(frozen=True)
class ContextChunk:
    """A group of consecutive prefills whose cached context is gathered together:
    prefill ``request_start + i`` reads ``seq_lens[i]`` rows from position ``starts[i]``."""

    request_start: int
    request_end: int
    starts: list[int]
    seq_lens: list[int]

    @property
    def is_continuation(self) -> bool:
        """The first request's context began in an earlier chunk."""
        return self.starts[0] > 0


def plan_context_chunks(
    context_lens: list[int], workspace_size: int, block_size: int
) -> list[ContextChunk]:
    """Pack the prefills' contexts, in batch order, into chunks of at most
    ``workspace_size`` rows. A context that does not fit in what is left is split at a
    multiple of ``block_size`` (the gather starts on a page boundary) and continues in the
    next chunk. A request with no context ends the current chunk and is skipped."""
    max_chunk = round_down(workspace_size, block_size)
    if max_chunk <= 0:
        raise PdlabValueError("err_workspace_small", value=workspace_size, rows=block_size)
    plans: list[ContextChunk] = []
    req, start, n = 0, 0, len(context_lens)
    while req < n:
        if context_lens[req] == 0:
            req += 1
            continue
        first, starts, lens, rows = req, [], [], 0
        while req < n and context_lens[req] > 0:
            remaining = context_lens[req] - start
            if rows + remaining > workspace_size:
                room = round_down(workspace_size - rows, block_size)
                piece = min(max_chunk, round_down(remaining - 1, block_size), room)
                if piece > 0:
                    starts.append(start)
                    lens.append(piece)
                    start += piece
                break
            rows += remaining
            starts.append(start)
            lens.append(remaining)
            req, start = req + 1, 0
        plans.append(ContextChunk(first, first + len(lens), starts, lens))
    return plans


@dataclass
class MLAMetadata:
    """What one step's MLA attention needs, decodes first; ``num_computed_tokens`` is each
    request's context, ``seq_lens - query_lens``."""

    req_ids: list[str]
    query_start_loc: torch.Tensor  # int32[B + 1]
    seq_lens: torch.Tensor  # int32[B]
    num_computed_tokens: torch.Tensor  # int32[B]
    is_prefilling: torch.Tensor  # bool[B]
    block_table: torch.Tensor  # int32[B, max_blocks]
    slot_mapping: torch.Tensor  # int64[T]
    block_size: int
    num_decodes: int
    num_prefills: int
    num_decode_tokens: int
    num_prefill_tokens: int
    decode_threshold: int = 1
    require_uniform: bool = False
    treat_short_extends_as_decodes: bool = True
    context_chunks: list[ContextChunk] = field(default_factory=list)

    @property
    def num_reqs(self) -> int:
        return len(self.req_ids)

    @property
    def num_actual_tokens(self) -> int:
        return int(self.query_start_loc[-1])

    @property
    def query_lens(self) -> torch.Tensor:
        return self.query_start_loc[1:] - self.query_start_loc[:-1]


class MLAMetadataBuilder:
    """Builds :class:`MLAMetadata` from a :class:`CommonAttentionMetadata`."""

    def __init__(
        self, block_size: int, attention_config: AttentionConfig | None = None,
        parallel_config: ParallelConfig | None = None, workspace_size: int = 2048,
    ) -> None:  # fmt: skip
        attn = attention_config or AttentionConfig()
        par = parallel_config or ParallelConfig()
        profile = attn.profile
        self.block_size = block_size
        self.reorder_batch_threshold = profile.effective_threshold(
            attn.num_speculative_tokens,
            par.decode_context_parallel_size,
            par.cp_kv_cache_interleave_size,
        )
        self.require_uniform = profile.require_uniform
        self.use_pcp = par.use_pcp
        self.workspace_size = workspace_size

    @property
    def treat_short_extends_as_decodes(self) -> bool:
        return not self.use_pcp

    def build(self, cm: CommonAttentionMetadata) -> MLAMetadata:
        import torch

        nd, np_, ndt, npt = split_decodes_and_prefills(
            cm,
            decode_threshold=self.reorder_batch_threshold,
            require_uniform=self.require_uniform,
            treat_short_extends_as_decodes=self.treat_short_extends_as_decodes,
        )
        device = cm.query_start_loc.device
        context = (cm.seq_lens.cpu() - cm.query_lens_cpu.to(cm.seq_lens.dtype)).to(torch.int32)
        chunks = plan_context_chunks(context[nd:].tolist(), self.workspace_size, self.block_size)
        is_prefilling = cm.is_prefilling
        if is_prefilling is None:
            is_prefilling = torch.zeros(cm.num_reqs, dtype=torch.bool)
        return MLAMetadata(
            req_ids=list(cm.req_ids), query_start_loc=cm.query_start_loc, seq_lens=cm.seq_lens,
            num_computed_tokens=context.to(device), is_prefilling=is_prefilling,
            block_table=cm.block_table_tensor, slot_mapping=cm.slot_mapping,
            block_size=self.block_size,
            num_decodes=nd, num_prefills=np_, num_decode_tokens=ndt, num_prefill_tokens=npt,
            decode_threshold=self.reorder_batch_threshold, require_uniform=self.require_uniform,
            treat_short_extends_as_decodes=self.treat_short_extends_as_decodes,
            context_chunks=chunks,
        )  # fmt: skip


def build_mla_metadata(
    query_lens: list[int], num_computed_tokens: list[int], num_prompt_tokens: list[int],
    block_table: torch.Tensor, slot_mapping: torch.Tensor, block_size: int,
    *, req_ids: list[str] | None = None,
    attention_config: AttentionConfig | None = None, parallel_config: ParallelConfig | None = None,
    workspace_size: int = 2048,
) -> MLAMetadata:  # fmt: skip
    """The model runner's two steps in one call, for a batch already in order: the common
    metadata (V1's ``is_prefilling``, V2's too for a request never preempted), then the MLA
    builder's split. Tensors go to ``block_table``'s device."""
    if req_ids is None:
        req_ids = [f"r{i}" for i in range(len(query_lens))]
    cm = CommonAttentionMetadata.from_batch(
        query_lens, num_computed_tokens, num_prompt_tokens, block_table, slot_mapping, req_ids
    )
    builder = MLAMetadataBuilder(block_size, attention_config, parallel_config, workspace_size)
    return builder.build(cm)
