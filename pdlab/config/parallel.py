"""Parallelism: ``ParallelConfig`` (vLLM's ``vllm/config/parallel.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from pdlab.config.utils import _check_int


@dataclass(frozen=True)
class ParallelConfig:
    """The one parallelism setting pdlab models: ``prefill_context_parallel_size``
    (``vllm/config/parallel.py``).

    pdlab does not implement context parallelism (it runs on one device). It reproduces only
    the routing consequence: with a size above 1 the MLA metadata builder sets
    ``use_pcp`` and passes ``treat_short_extends_as_decodes = not use_pcp`` to
    ``split_decodes_and_prefills``, so a request that is still in its prompt
    (``is_prefilling``) runs ``_forward_prefill`` even for a one-token query.
    """

    prefill_context_parallel_size: int = 1

    def __post_init__(self) -> None:
        _check_int(
            "ParallelConfig", "prefill_context_parallel_size", self.prefill_context_parallel_size
        )

    @property
    def use_pcp(self) -> bool:
        return self.prefill_context_parallel_size > 1
