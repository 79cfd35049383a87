"""A request as the scheduler sees it: its tokens, how many of them are computed, its status.

Mirrors ``vllm/v1/request.py`` (``Request``, ``RequestStatus``) and the fields of
``vllm/sampling_params.py`` (``SamplingParams``) that pdlab uses. A request carries no
phase, only ``num_computed_tokens`` (tokens whose K/V are in the paged cache) and
``num_tokens`` (prompt + outputs); ``pdlab/engine/core/sched/scheduler.py`` closes the gap.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pdlab.errors import Phrase, check_int, invalid, noted


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class SamplingParams:
    """How to pick output tokens. ``temperature=0`` is greedy (pdlab's default, so runs
    compare token for token; vLLM's default is 1.0)."""

    max_tokens: int = 16
    temperature: float = 0.0
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        check_int("SamplingParams.max_tokens", self.max_tokens)
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not t >= 0:
            greedy = noted(Phrase("err_x_num_ge", n=0), "err_n_greedy")
            raise invalid("SamplingParams.temperature", t, greedy)
        stops = self.stop_token_ids
        if (
            isinstance(stops, (str, bytes))
            or not isinstance(stops, Sequence)
            or not all(_is_int(s) and s >= 0 for s in stops)
        ):
            ids = noted(Phrase("err_x_token_ids_seq"), "err_n_ints_ge0")
            raise invalid("SamplingParams.stop_token_ids", stops, ids)
        object.__setattr__(self, "stop_token_ids", tuple(stops))
        if self.seed is not None and not _is_int(self.seed):
            raise invalid("SamplingParams.seed", self.seed, Phrase("err_x_none_or_int"))


class RequestStatus(enum.IntEnum):
    """Where a request is in its life. Every status after ``PREEMPTED`` is finished."""

    WAITING = enum.auto()
    WAITING_FOR_REMOTE_KVS = enum.auto()  # D side: blocks allocated, K/V still arriving
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    FINISHED_STOPPED = enum.auto()
    FINISHED_LENGTH_CAPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()
    FINISHED_IGNORED = enum.auto()
    FINISHED_ERROR = enum.auto()  # a failed KV load ("fail" policy) or a model-runner error

    @staticmethod
    def is_finished(status: RequestStatus) -> bool:
        return status > RequestStatus.PREEMPTED

    @staticmethod
    def get_finished_reason(status: RequestStatus) -> str | None:
        """The OpenAI-style finish reason: ``"stop"``, ``"length"``, ``"abort"``,
        ``"error"`` or None."""
        return _FINISHED_REASON.get(status)


# As vLLM: an ignored request is one that could not fit, so its reason is "length".
_FINISHED_REASON = {
    RequestStatus.FINISHED_STOPPED: "stop",
    RequestStatus.FINISHED_LENGTH_CAPPED: "length",
    RequestStatus.FINISHED_ABORTED: "abort",
    RequestStatus.FINISHED_IGNORED: "length",
    RequestStatus.FINISHED_ERROR: "error",
}


class Request:
    """One generation request.

    ``kv_transfer_params`` carries P/D instructions for the KV connector, as in vLLM:
    ``{"do_remote_decode": True}`` on the prefill instance (P), and on the decode instance
    (D) what P returned (``do_remote_prefill``, ``remote_block_ids``, ``remote_engine_id``,
    ...). A P request stops after its first token: vLLM's proxy sends it with
    ``max_tokens=1``, and pdlab enforces that here.
    """

    def __init__(
        self, request_id: str, prompt_token_ids: Sequence[int],
        sampling_params: SamplingParams | None = None,
        kv_transfer_params: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        if not isinstance(request_id, str) or not request_id:
            raise invalid("request_id", request_id, Phrase("err_x_nonempty_str"))
        if isinstance(prompt_token_ids, (str, bytes)) or not isinstance(prompt_token_ids, Sequence):
            raise invalid("prompt_token_ids", prompt_token_ids, Phrase("err_x_token_ids"))
        if len(prompt_token_ids) == 0:
            raise invalid("prompt_token_ids", prompt_token_ids, Phrase("err_x_one_token_id"))
        if not all(_is_int(t) and t >= 0 for t in prompt_token_ids):
            ids = list(prompt_token_ids)
            raise invalid("prompt_token_ids", ids, Phrase("err_x_token_ids_ge0"))
        if sampling_params is None:
            sampling_params = SamplingParams()
        if not isinstance(sampling_params, SamplingParams):
            raise invalid("sampling_params", sampling_params, Phrase("err_x_a", t="SamplingParams"))
        if kv_transfer_params is not None and not isinstance(kv_transfer_params, dict):
            raise invalid("kv_transfer_params", kv_transfer_params, Phrase("err_x_none_or_dict"))

        self.request_id = request_id
        self.sampling_params = sampling_params
        # A copy: the connector marks its progress in it (NixlConnector clears
        # "do_remote_prefill" once the load is set up), and the caller's dict stays as given.
        self.kv_transfer_params = None if kv_transfer_params is None else dict(kv_transfer_params)
        self.status = RequestStatus.WAITING
        self.stop_reason: int | None = None
        self.max_tokens = sampling_params.max_tokens
        if kv_transfer_params and kv_transfer_params.get("do_remote_decode"):
            self.max_tokens = 1

        self.prompt_token_ids = list(prompt_token_ids)
        self.num_prompt_tokens = len(self.prompt_token_ids)
        self._output_token_ids: list[int] = []
        self._all_token_ids: list[int] = list(self.prompt_token_ids)
        # While WAITING_FOR_REMOTE_KVS it already counts the K/V on their way (as vLLM).
        self.num_computed_tokens = 0
        # Prefix hit (local + external) when first scheduled; -1 until then.
        self.num_cached_tokens = -1
        self.num_external_computed_tokens = 0
        self.num_preemptions = 0
        # Chained hashes of the full blocks, filled in by the KVCacheManager (vLLM fills
        # them in the request itself with a block hasher; they depend on the block size).
        self.block_hashes: list[bytes] = []
        # Speculative decoding: the drafts proposed after the last step, verified in the
        # next (set by Scheduler.update_draft_token_ids, cleared once scheduled).
        self.spec_token_ids: list[int] = []
        # Whether the last step left known tokens uncomputed (a prefill chunk); drafts
        # proposed after such a step are dropped. Set by Scheduler._update_after_schedule.
        self.is_prefill_chunk = False

    @property
    def output_token_ids(self) -> list[int]:
        """The sampled tokens. Read-only: use ``append_output_token_ids``."""
        return self._output_token_ids

    @property
    def all_token_ids(self) -> list[int]:
        """Prompt then outputs. Read-only: use ``append_output_token_ids``."""
        return self._all_token_ids

    def append_output_token_ids(self, token_ids: int | Sequence[int]) -> None:
        ids = [token_ids] if isinstance(token_ids, int) else list(token_ids)
        self._output_token_ids.extend(ids)
        self._all_token_ids.extend(ids)

    @property
    def num_tokens(self) -> int:
        return len(self._all_token_ids)

    @property
    def num_tokens_with_spec(self) -> int:
        """Known tokens plus the drafts waiting to be verified."""
        return len(self._all_token_ids) + len(self.spec_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self._output_token_ids)

    def is_finished(self) -> bool:
        return RequestStatus.is_finished(self.status)

    def get_finished_reason(self) -> str | None:
        return RequestStatus.get_finished_reason(self.status)

    def __repr__(self) -> str:
        return (
            f"Request({self.request_id!r}, {self.status.name}, "
            f"computed={self.num_computed_tokens}/{self.num_tokens})"
        )
