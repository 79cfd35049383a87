"""Parallelism: ``ParallelConfig`` (vLLM's ``vllm/config/parallel.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from pdlab.engine.config.utils import ConfigBase, _check_int


@dataclass(frozen=True)
class ParallelConfig(ConfigBase):
    """The parallelism settings that change routing.

    pdlab runs on one device and implements no context parallelism. It reproduces only the
    routing consequences:

    * ``prefill_context_parallel_size > 1`` sets the MLA builder's ``use_pcp``, which
      passes ``treat_short_extends_as_decodes = not use_pcp`` to
      ``split_decodes_and_prefills``, so a request still in its prompt
      (``is_prefilling``) runs ``forward_mha`` even for a one-token query, and Model Runner
      V2 then computes no ``prefill_runs_as_decode``: the attention's split must agree with
      the PCP manager's partition (:func:`pdlab.engine.worker.gpu.batch.pcp_rank_chunks`;
      upstream's reasons are quoted in the tour's chapter 4). Model Runner V1 cannot run
      it. PCP is an opt-in setting, as DCP is; neither is tied to a role.
    * ``decode_context_parallel_size > 1`` (DCP: opt-in, default 1, reusing TP ranks)
      leaves ``use_pcp`` False, so D's short extend stays a decode; it forces a builder's
      ``reorder_batch_threshold`` to 1 unless the builder supports DCP with varlen queries
      (``MLABackendProfile.effective_threshold``; a verifying row of ``1 + K`` tokens is
      then a prefill); under PCP it keeps every whole row on every rank instead of
      sharding them (:func:`pdlab.engine.worker.gpu.batch.pcp_rank_chunks`).
    * ``cp_kv_cache_interleave_size``: how many consecutive tokens of the KV cache one DCP
      rank stores before the next takes over (1: token by token); on a P/D instance under
      DCP, :func:`pdlab.engine.config.vllm.adjust_dcp_kv_cache_interleave_size` raises it
      to the block size unless ``allow_auto_resolve_cp_interleave_size`` is False.
    """

    prefill_context_parallel_size: int = 1
    decode_context_parallel_size: int = 1
    cp_kv_cache_interleave_size: int = 1
    allow_auto_resolve_cp_interleave_size: bool = True

    def __post_init__(self) -> None:
        for name in (
            "prefill_context_parallel_size", "decode_context_parallel_size",
            "cp_kv_cache_interleave_size",
        ):  # fmt: skip
            _check_int("ParallelConfig", name, getattr(self, name))

    @property
    def use_pcp(self) -> bool:
        return self.prefill_context_parallel_size > 1
