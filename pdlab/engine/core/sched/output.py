"""What the scheduler sends the model runner each step, and what comes back.

Mirrors ``vllm/v1/core/sched/output.py`` (``SchedulerOutput``, ``NewRequestData``,
``CachedRequestData``), ``vllm/v1/outputs.py`` (``ModelRunnerOutput``,
``KVConnectorOutput``, ``DraftTokenIds``) and ``EngineCoreOutput`` in
``vllm/v1/engine/__init__.py``.

The runner keeps its own state per request (tokens, block ids) and the scheduler sends
deltas: a request seen for the first time (or resumed after preemption) comes whole as a
``NewRequestData``; a request already on the runner comes as one row of
``CachedRequestData`` with the blocks added this step. ``num_computed_tokens`` in both is
counted *before* this step: the tokens to compute are ``all_token_ids[c : c + n]`` with
``n = num_scheduled_tokens[req_id]``.

Under speculative decoding ``n`` also counts the row's draft tokens,
``scheduled_spec_decode_tokens[req_id]`` (``-1`` is a placeholder that is never
accepted): the row's input is ``all_token_ids[c : c + n - len(drafts)] + drafts``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pdlab.engine.distributed.kv_transfer.base import KVConnectorMetadata
from pdlab.engine.request import Request, SamplingParams
from pdlab.errors import PdlabValueError, Phrase, invalid


@dataclass
class NewRequestData:
    req_id: str
    prompt_token_ids: list[int]
    sampling_params: SamplingParams
    block_ids: list[int]
    num_computed_tokens: int
    # Prompt and outputs so far. Equal to the prompt for a new request; longer for one
    # resumed after preemption, which is re-sent whole (as vLLM does for its V2 runner).
    all_token_ids: list[int] = field(default_factory=list)
    # V2's prefill_len: the tokens given to the runner as its prefill. The prompt, or every
    # token for a resumed request; a first output that came from P (the first_token design)
    # is not among them, so that row is a decode. 0: len(all_token_ids).
    prefill_len: int = 0

    @classmethod
    def from_request(cls, request: Request, block_ids: list[int]) -> NewRequestData:
        prefill_len = request.num_tokens if request.num_preemptions else request.num_prompt_tokens
        return cls(
            request.request_id, list(request.prompt_token_ids), request.sampling_params,
            block_ids, request.num_computed_tokens, list(request.all_token_ids), prefill_len,
        )  # fmt: skip


@dataclass
class CachedRequestData:
    """Requests the runner already holds, one list entry per request."""

    req_ids: list[str] = field(default_factory=list)
    # pdlab re-sends a resumed request as a NewRequestData, so these are all False; the
    # field keeps the shape of vLLM's v1 CachedRequestData (where True replaces block ids).
    resumed_from_preemption: list[bool] = field(default_factory=list)
    # The known token ids scheduled this step, drafts excluded (vLLM sends them only with
    # pipeline parallelism).
    new_token_ids: list[list[int]] = field(default_factory=list)
    # Blocks appended to the request's block table this step (often empty).
    new_block_ids: list[list[int]] = field(default_factory=list)
    num_computed_tokens: list[int] = field(default_factory=list)

    @property
    def num_reqs(self) -> int:
        return len(self.req_ids)


@dataclass
class SchedulerOutput:
    scheduled_new_reqs: list[NewRequestData]
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict[str, int]
    total_num_scheduled_tokens: int
    # Requests finished since the previous step: the runner drops their state.
    finished_req_ids: set[str]
    # Requests preempted in this step: their blocks are gone; they come back as new.
    preempted_req_ids: set[str] = field(default_factory=set)
    kv_connector_metadata: KVConnectorMetadata | None = None
    # Speculative decoding: req_id -> the draft tokens scheduled this step (counted in
    # num_scheduled_tokens; -1 is a placeholder). A request without drafts has no entry.
    scheduled_spec_decode_tokens: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class KVConnectorOutput:
    """What the worker side of the KV connector reports after a step."""

    finished_sending: set[str] | None = None
    finished_recving: set[str] | None = None
    # Receives that failed as a whole (pdlab): recompute the request from scratch.
    failed_recving: set[str] = field(default_factory=set)
    # Blocks whose load failed (vLLM): recompute from the first failed block.
    invalid_block_ids: set[int] = field(default_factory=set)
    # pdlab: the tokens each landed receive wrote (checked against the scheduler's count),
    # and first output tokens that came with the K/V (P's token, or the logits of P's
    # hidden state computed on D) for the designs of pdlab/disagg/designs.py.
    num_loaded_tokens: dict[str, int] = field(default_factory=dict)
    first_token_ids: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class ModelRunnerOutput:
    """``sampled_token_ids[i]`` is ``[token]`` for ``req_ids[i]`` when every known token
    of the request is computed after this step, and ``[]`` while its prompt is still being
    prefilled in chunks. For a row with draft tokens it is the accepted drafts followed by
    one more token (the bonus token, or the target's own where a draft was rejected):
    1 to ``1 + len(drafts)`` tokens."""

    req_ids: list[str]
    sampled_token_ids: list[list[int]]
    kv_connector_output: KVConnectorOutput | None = None
    req_id_to_index: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_rows(self.req_ids, self.sampled_token_ids, "sampled_token_ids")
        if not self.req_id_to_index:
            self.req_id_to_index = {r: i for i, r in enumerate(self.req_ids)}


@dataclass
class DraftTokenIds:
    """The drafts a runner proposed after a step, for the next one to verify
    (``vllm/v1/outputs.py``); given to ``Scheduler.update_draft_token_ids``."""

    req_ids: list[str]
    draft_token_ids: list[list[int]]

    def __post_init__(self) -> None:
        _check_rows(self.req_ids, self.draft_token_ids, "draft_token_ids")


@dataclass
class EngineCoreOutput:
    """One request's news from a step: new tokens, and when it finished, why."""

    req_id: str
    new_token_ids: list[int]
    finish_reason: str | None = None
    kv_transfer_params: dict[str, Any] | None = None
    num_cached_tokens: int = 0
    error: str | None = None  # why, when finish_reason is "error"

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


def _check_rows(req_ids: Any, rows: Any, name: str) -> None:
    """A runner's per-request lists are well formed: distinct string ids, and a list of
    integer ids for each (their count and range are the scheduler's to check), one per id."""
    if (
        not isinstance(req_ids, (list, tuple))
        or not all(isinstance(r, str) for r in req_ids)
        or len(set(req_ids)) != len(req_ids)
    ):
        raise invalid("req_ids", req_ids, Phrase("err_x_unique_req_ids"))
    if not isinstance(rows, (list, tuple)) or not all(
        isinstance(row, (list, tuple))
        and all(isinstance(t, int) and not isinstance(t, bool) for t in row)
        for row in rows
    ):
        raise invalid(name, rows, Phrase("err_x_token_id_lists"))
    if len(req_ids) != len(rows):
        k = len(req_ids)
        raise PdlabValueError("err_entries_per_request", name=name, n=len(rows), k=k)
