"""The event types of a trace: one frozen dataclass per kind, found through one registry.

A component's ``emit(kind, **fields)`` becomes an event through :func:`make_event`, which
looks ``kind`` up in :data:`EVENT_TYPES`: an unknown kind, a missing field or an unknown
one is a ``ValueError`` at emit time, in one line, so a typo cannot start a new kind. Every
event is a read-only :class:`collections.abc.Mapping` whose keys are ``kind``,
``instance``, ``step`` and then its own fields, in order: the flat record the views and
the JSON file use (``e["req_id"]``, ``e.get("x")``, ``dict(e)``).

vLLM has no single equivalent: the closest are its ``SchedulerStats`` and
``IterationStats`` (``vllm/v1/metrics/stats.py``), and the profiler's kernel records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from pdlab.errors import PdlabValueError, Phrase

_RESERVED = ("kind", "instance", "step")


@dataclass(frozen=True, slots=True, eq=False)
class TraceEvent(Mapping[str, Any]):
    """What every event has: the instance that did it (``"P"``, ``"D"``, ``"local"``)
    and the engine step it happened in. Equal to any mapping with the same items."""

    kind: ClassVar[str] = ""
    _keys: ClassVar[tuple[str, ...]] = ()
    # Fields added later with a default, so that a trace saved before them still loads.
    _defaults: ClassVar[frozenset[str]] = frozenset()

    instance: str
    step: int

    def __getitem__(self, key: str) -> Any:
        if key == "kind":
            return self.kind
        if key in self._keys:
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        yield "kind"
        yield from self._keys

    def __len__(self) -> int:
        return len(self._keys) + 1


EVENT_TYPES: dict[str, type[TraceEvent]] = {}
E = TypeVar("E", bound=type[TraceEvent])


def event(kind: str) -> Callable[[E], E]:
    """Make the class a frozen dataclass (its annotations are the fields, in order) and
    register it as the type of events of ``kind``."""

    def register(cls: E) -> E:
        cls = dataclass(frozen=True, slots=True, eq=False)(cls)
        cls.kind = kind
        fields = dataclasses.fields(cls)
        cls._keys = tuple(f.name for f in fields)
        cls._defaults = frozenset(
            f.name
            for f in fields
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )
        EVENT_TYPES[kind] = cls
        return cls

    return register


def make_event(kind: str, instance: str, step: int, fields: Mapping[str, Any]) -> TraceEvent:
    """The event of ``kind`` with these fields, or ``ValueError`` naming the kind and the
    first missing or unknown field."""
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        allowed = Phrase("err_x_one_of", choices=sorted(EVENT_TYPES))
        raise PdlabValueError("err_unknown", name="event kind", value=kind, allowed=allowed)
    own = cls._keys[2:]  # after instance and step
    for name in fields:
        if name not in own:
            raise PdlabValueError("err_event_field_unknown", kind=kind, name=name, fields=list(own))
    for name in own:
        if name not in fields and name not in cls._defaults:
            raise PdlabValueError("err_event_field_missing", kind=kind, name=name)
    return cls(instance, step, **fields)


def event_from_dict(record: Mapping[str, Any]) -> TraceEvent:
    """An event from its flat record (``dict(e)``, or a line of a saved trace)."""
    if isinstance(record, TraceEvent):
        return record
    fields = {k: v for k, v in record.items() if k not in _RESERVED}
    return make_event(record["kind"], record["instance"], record["step"], fields)


# ---- the engine (pdlab/engine/llm_engine.py) ---------------------------------------------
@event("add_request")
class AddRequest(TraceEvent):
    """A request queued on this instance."""

    req_id: str
    num_prompt_tokens: int
    prompt_token_ids: list[int]
    kv_transfer_params: dict[str, Any] | None


@event("step")
class Step(TraceEvent):
    """One engine step that scheduled work. Each row of ``scheduled`` holds ``req_id``,
    ``num_prompt_tokens``, ``num_tokens``, ``num_computed_tokens_before``/``_after``,
    ``num_scheduled_tokens``, ``spec_token_ids`` (the drafts counted among them; ``-1`` is
    a placeholder) and ``block_ids``."""

    scheduled: list[dict[str, Any]]
    total_num_scheduled_tokens: int
    kv_cache_usage: float


@event("request_error")
class RequestError(TraceEvent):
    """A request whose step raised; it ends with ``FINISHED_ERROR``."""

    req_id: str
    error: str


# ---- the model runner and the attention layer (engine/worker/gpu, engine/attention) ------------
@event("route")
class Route(TraceEvent):
    """Where one request of a step went (``path`` ``"decode"`` or ``"prefill"``, ``forward``
    ``"forward_mqa"`` or ``"forward_mha"``), with the values ``split_decodes_and_prefills``
    read, the rule in force, and what the model runner decided about the row and the step
    (``prefill_runs_as_decode`` is None where the runner computes none: V1, or V2 under
    PCP). ``query_len`` counts the row's drafts; ``uniform_decode_token_count`` is the
    step's ``1 + K`` when every row is a verifying decode of that width (else None)."""

    req_id: str
    query_len: int
    num_computed_tokens: int
    num_prompt_tokens: int
    is_prefilling: bool
    region: str
    decode_threshold: int
    require_uniform: bool
    treat_short_extends_as_decodes: bool
    prefill_context_parallel_size: int
    mla_backend: str
    model_runner: str
    prefill_len: int
    prefill_runs_as_decode: bool | None
    decode_graph_eligible: bool
    path: str
    forward: str
    num_draft_tokens: int = 0
    draft_token_ids: list[int] = dataclasses.field(default_factory=list)
    uniform_decode_token_count: int | None = None


@event("kernel")
class Kernel(TraceEvent):
    """One kernel call of one layer: its shapes and the bytes per value of the operands it
    is priced at (``elem_bytes``); the lab prices it (``pdlab/sim/kernel_costs.py``)."""

    name: str
    path: str
    layer: int
    backend: str
    shapes: dict[str, Any]
    elem_bytes: int


@event("sample")
class Sample(TraceEvent):
    """A token sampled for a request at ``position``, with its logit."""

    req_id: str
    token: int
    position: int
    logit: float


# ---- speculative decoding (engine/worker/gpu/spec_decode, in the model runner) -----------------
@event("verify")
class Verify(TraceEvent):
    """A row's drafts checked against the target (greedy): ``target_token_ids`` is its
    argmax after each verified position (one more than the drafts), ``sampled_token_ids``
    the accepted drafts and one more."""

    req_id: str
    draft_token_ids: list[int]
    num_placeholders: int
    target_token_ids: list[int]
    sampled_token_ids: list[int]
    num_accepted: int
    num_rejected: int


@event("draft")
class Draft(TraceEvent):
    """The drafter's proposal for a request's next step, fed the target's hidden state at
    ``hidden_position`` (-1 for n-gram, which reads none) and the token after it."""

    req_id: str
    method: str
    hidden_position: int
    next_token: int
    draft_token_ids: list[int]


# ---- the scheduler (engine/core/sched) ---------------------------------------------------------
@event("admit")
class Admit(TraceEvent):
    """A waiting (or preempted) request scheduled for the first time since it waited;
    ``spec_token_ids`` holds the ``-1`` placeholders when its one new token was padded to
    ``1 + K`` (speculative decoding), else is empty."""

    req_id: str
    num_computed_tokens: int
    num_cached_tokens: int
    num_new_tokens: int
    spec_token_ids: list[int]
    resumed: bool
    num_prompt_tokens: int
    num_tokens: int
    block_ids: list[int]


@event("spec_decode")
class SpecDecode(TraceEvent):
    """A verifying row's result: of the drafts scheduled (``-1``: a placeholder), how
    many the runner accepted and rejected, and ``num_computed_tokens`` after the rollback
    over the rejected ones."""

    req_id: str
    draft_token_ids: list[int]
    num_draft_tokens: int
    num_accepted_tokens: int
    num_rejected_tokens: int
    num_computed_tokens: int


@event("prefix_hit")
class PrefixHit(TraceEvent):
    """Tokens found in the local prefix cache (capped at ``num_tokens - 1``)."""

    req_id: str
    num_hit_tokens: int
    num_tokens: int
    block_ids: list[int]


@event("preempt")
class Preempt(TraceEvent):
    """A running request sent back to wait, its blocks freed (recomputed on resume)."""

    req_id: str
    num_computed_tokens: int
    num_output_tokens: int
    num_preemptions: int


@event("finish")
class Finish(TraceEvent):
    """A request finished; ``delay_free`` when the connector holds its blocks a while."""

    req_id: str
    status: str
    finish_reason: str | None
    delay_free: bool
    num_output_tokens: int
    kv_transfer_params: dict[str, Any] | None


@event("free")
class Free(TraceEvent):
    """A request's blocks given back to the pool."""

    req_id: str
    block_ids: list[int]


@event("waiting_for_remote_kvs")
class WaitingForRemoteKVs(TraceEvent):
    """D allocated blocks for K/V that another instance will send."""

    req_id: str
    num_external_tokens: int
    num_local_tokens: int
    num_computed_tokens: int
    block_ids: list[int]


@event("remote_kv_ready")
class RemoteKVReady(TraceEvent):
    """The K/V arrived; ``num_computed_tokens`` is after the ``- 1`` for the last token."""

    req_id: str
    num_computed_tokens_before_adjust: int
    num_computed_tokens: int
    num_tokens: int
    num_prompt_tokens: int
    block_ids: list[int]


@event("remote_kv_failed")
class RemoteKVFailed(TraceEvent):
    """The K/V did not arrive (or partly): the rest is computed locally."""

    req_id: str
    num_computed_tokens: int
    num_tokens: int
    block_ids: list[int]


# ---- the KV connector (engine/distributed/kv_transfer/pd_connector.py) -------------------------
@event("kv_transfer")
class KVTransfer(TraceEvent):
    """D's read of P's blocks landed (``ok``) or failed (``reason``)."""

    req_id: str
    ok: bool
    reason: str
    remote_engine_id: str
    remote_block_ids: list[int]
    local_block_ids: list[int]
    nbytes: int


@event("kv_release")
class KVRelease(TraceEvent):
    """D will not read this request's blocks: P may free them now."""

    req_id: str
    remote_request_id: str


@event("kv_prefill_backoff")
class KVPrefillBackoff(TraceEvent):
    """P cut the last ``num_tokens`` prompt tokens off a request it prefills for D
    (K - 1 with K MTP modules; ``engine/distributed/kv_transfer/pd_connector.py`` tells
    why)."""

    req_id: str
    num_tokens: int


@event("kv_send_timeout")
class KVSendTimeout(TraceEvent):
    """P freed blocks that D did not read within ``timeout_s``."""

    req_id: str
    timeout_s: float


@event("kv_send_aborted")
class KVSendAborted(TraceEvent):
    """P ended a hand-off because D is gone."""

    req_id: str
    reason: str


@event("kv_load_mismatch")
class KVLoadMismatch(TraceEvent):
    """D counted a different number of tokens as loaded than its worker wrote: the request
    ends with an error (its first token would not be the colocated one)."""

    req_id: str
    num_counted_tokens: int
    num_written_tokens: int
    num_local_tokens: int
    error: str


# ---- the first-token designs (pdlab/disagg/designs.py) -----------------------------------
@event("first_token")
class FirstToken(TraceEvent):
    """How one request's first output token was obtained under its design (``mode``):
    the bytes that crossed besides and with the K/V, where and at which step it was known,
    D's first scheduled step and how it was routed, and the bytes per value the pair ran
    at (``elem_bytes``). The lab prices it (``pdlab/sim/designs.py``)."""

    req_id: str
    mode: str
    num_prompt_tokens: int
    kv_bytes: int
    payload_bytes: int
    known_on: str
    known_step: int
    d_first_step: int
    d_first_forward: str
    d_first_is_prefilling: bool
    elem_bytes: int
