"""The ``route`` event of every row of a step: what the model runner and the MLA metadata
builder decided about it (``pdlab/events.py``, ``Route``), with the values upstream reads
(vLLM 0.33.0: ``gather_batch_req_state`` in ``vllm/v1/worker/gpu/model_runner.py``, the
builder's ``split_decodes_and_prefills``). :class:`pdlab.model.runner.ModelRunner` mixes
it in.
"""

from __future__ import annotations

from typing import Any

from pdlab.attention.builder import MLAMetadata
from pdlab.attention.metadata import batch_region
from pdlab.model.batch import BatchReqState


class RouteEventsMixin:
    """Needs ``attn_metadata_builder``, ``parallel_config``, ``attention_config``,
    ``model_runner`` and ``emit``."""

    attn_metadata_builder: Any
    parallel_config: Any
    attention_config: Any
    model_runner: str
    emit: Any

    def _emit_routes(
        self,
        batch: BatchReqState,
        meta: MLAMetadata,
        prefilling: list[bool],
        num_drafts: list[int],
        spec: dict[str, list[int]],
    ) -> None:
        """One ``route`` event per row: what the runner and the builder decided."""
        b, rad = self.attn_metadata_builder, batch.prefill_runs_as_decode
        for i, r in enumerate(batch.req_ids):
            q, c, p = (
                batch.num_scheduled_tokens[i],
                batch.num_computed_tokens[i],
                batch.num_prompt_tokens[i],
            )
            decode = i < meta.num_decodes
            self.emit(
                "route",
                req_id=r,
                query_len=q,
                num_computed_tokens=c,
                num_prompt_tokens=p,
                is_prefilling=prefilling[i],
                region=batch_region(q, c, p, b.reorder_batch_threshold),
                decode_threshold=b.reorder_batch_threshold,
                require_uniform=b.require_uniform,
                treat_short_extends_as_decodes=b.treat_short_extends_as_decodes,
                prefill_context_parallel_size=self.parallel_config.prefill_context_parallel_size,
                mla_backend=self.attention_config.backend,
                model_runner=self.model_runner,
                prefill_len=batch.prefill_len[i],
                prefill_runs_as_decode=None if rad is None else bool(rad[i]),
                decode_graph_eligible=batch.decode_graph_eligible,
                path="decode" if decode else "prefill",
                forward="forward_mqa" if decode else "forward_mha",
                num_draft_tokens=num_drafts[i],
                draft_token_ids=list(spec.get(r, [])),
                uniform_decode_token_count=batch.uniform_decode_token_count,
            )
