"""Per-step attention metadata, and the rule that splits a batch into decodes and prefills.

Mirrors ``CommonAttentionMetadata`` and ``split_decodes_and_prefills`` in
``vllm/v1/attention/backends/utils.py``, and the MLA metadata builder in
``vllm/v1/attention/backends/mla/common.py``. Two routing rules are implemented:

* ``rule="query_len"`` (upstream vLLM): a request whose query has at most
  ``decode_threshold`` tokens is a decode. D's first step after a KV transfer, one token
  over ``N - 1`` cached tokens, is therefore a decode (absorbed MQA).
* ``rule="prompt"`` (the ``num_computed_tokens < num_prompt_tokens`` test of vllm-ascend's
  context-parallel MLA builders and some forks): a request that has not finished its prompt
  is a prefill, so the same one-token step runs ``_forward_prefill``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pdlab.config import ROUTING_RULES


def is_decode(
    query_len: int,
    num_computed_tokens: int,
    num_prompt_tokens: int,
    rule: str = "query_len",
    decode_threshold: int = 1,
) -> bool:
    """Routing of one request. ``num_computed_tokens`` is counted before this step."""
    if rule == "query_len":
        return query_len <= decode_threshold
    if rule == "prompt":
        return num_computed_tokens >= num_prompt_tokens
    raise ValueError(f"rule={rule!r} is invalid: expected one of {ROUTING_RULES}")


@dataclass
class MLAMetadata:
    """What one step's attention needs. Requests are ordered decodes first.

    ``seq_lens`` counts the tokens in the cache after this step's write;
    ``num_computed_tokens`` counts them before it, so ``query_len = seq_len - computed``.
    """

    req_ids: list[str]
    query_start_loc: torch.Tensor  # int32[B + 1]
    seq_lens: torch.Tensor  # int32[B]
    num_computed_tokens: torch.Tensor  # int32[B]
    num_prompt_tokens: torch.Tensor  # int32[B]
    block_table: torch.Tensor  # int32[B, max_blocks]
    slot_mapping: torch.Tensor  # int64[T]
    block_size: int
    rule: str = "query_len"
    decode_threshold: int = 1

    def __post_init__(self) -> None:
        if self.rule not in ROUTING_RULES:
            raise ValueError(f"rule={self.rule!r} is invalid: expected one of {ROUTING_RULES}")
        (self.num_decodes, self.num_prefills, self.num_decode_tokens, self.num_prefill_tokens) = (
            split_decodes_and_prefills(self, self.decode_threshold, self.rule)
        )

    @property
    def num_reqs(self) -> int:
        return len(self.req_ids)

    @property
    def num_actual_tokens(self) -> int:
        return int(self.query_start_loc[-1])

    @property
    def query_lens(self) -> torch.Tensor:
        return self.query_start_loc[1:] - self.query_start_loc[:-1]

    def is_decode(self) -> list[bool]:
        q = self.query_lens.tolist()
        c = self.num_computed_tokens.tolist()
        p = self.num_prompt_tokens.tolist()
        return [
            is_decode(q[i], c[i], p[i], self.rule, self.decode_threshold)
            for i in range(self.num_reqs)
        ]


def split_decodes_and_prefills(
    metadata: MLAMetadata, decode_threshold: int = 1, rule: str = "query_len"
) -> tuple[int, int, int, int]:
    """``(num_decodes, num_prefills, num_decode_tokens, num_prefill_tokens)``.

    Like upstream, it assumes the batch is already ordered decodes first (the model runner's
    ``reorder_batch_to_split_decodes_and_prefills``) and checks that it is.
    """
    q = metadata.query_lens.tolist()
    c = metadata.num_computed_tokens.tolist()
    p = metadata.num_prompt_tokens.tolist()
    flags = [is_decode(q[i], c[i], p[i], rule, decode_threshold) for i in range(len(q))]
    num_decodes = flags.index(False) if False in flags else len(flags)
    if any(flags[num_decodes:]):
        raise ValueError(
            "batch is not ordered decodes first; run "
            "reorder_batch_to_split_decodes_and_prefills before splitting"
        )
    num_decode_tokens = sum(q[:num_decodes])
    return num_decodes, len(q) - num_decodes, num_decode_tokens, sum(q) - num_decode_tokens


def reorder_batch_to_split_decodes_and_prefills(
    query_lens: list[int],
    num_computed_tokens: list[int],
    num_prompt_tokens: list[int],
    rule: str = "query_len",
    decode_threshold: int = 1,
) -> list[int]:
    """A stable order of request indices with every decode before every prefill."""
    flags = [
        is_decode(q, c, p, rule, decode_threshold)
        for q, c, p in zip(query_lens, num_computed_tokens, num_prompt_tokens)
    ]
    return [i for i, d in enumerate(flags) if d] + [i for i, d in enumerate(flags) if not d]
