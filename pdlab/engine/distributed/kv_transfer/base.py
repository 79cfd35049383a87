"""The KV connector interface: how two engine instances hand a request's K/V to each other.

Mirrors ``vllm/distributed/kv_transfer/kv_connector/v1/base.py`` (``KVConnectorBase_V1``,
``KVConnectorMetadata``), with the P/D behaviour of NixlConnector
(``vllm/distributed/kv_transfer/kv_connector/v1/nixl/``) as the model.
In vLLM one class plays both roles (``KVConnectorRole.SCHEDULER`` in the scheduler process,
``KVConnectorRole.WORKER`` in each worker) and a concrete connector delegates to two halves
(``NixlConnectorScheduler``, ``NixlConnectorWorker``). pdlab writes the two halves as two
interfaces: :class:`KVConnectorBase`, which the ``Scheduler`` calls, and
:class:`KVConnectorWorkerBase`, which the model runner calls. :class:`KVConnector` is both in
one object, which is what an ``LLMEngine`` takes.

The prefill/decode hand-off, as with NixlConnector (D pulls the blocks from P)::

    P  request {"do_remote_decode": True}, max_tokens=1
       prefill, sample 1 token -> FINISHED_LENGTH_CAPPED
       request_finished -> (delay_free=True, {"do_remote_prefill": True,
                            "remote_block_ids": [...], "remote_engine_id": ..., ...})
       blocks held until the worker reports the request in finished_sending
       (D has read them, or the connector's timeout expired)
    D  request with those kv_transfer_params
       get_num_new_matched_tokens -> (prompt tokens not cached locally, load_async=True)
       blocks allocated, status WAITING_FOR_REMOTE_KVS, nothing scheduled
       update_state_after_alloc, build_connector_meta -> worker start_load_kv
       worker get_finished -> finished_recving
       scheduler: num_computed_tokens = N - 1, schedule the last prompt token
       (why: docs/reading-d-first-step.md, "D's scheduler: the N - 1").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pdlab.errors import PdlabError, Phrase, invalid, noted

if TYPE_CHECKING:
    from pdlab.engine.core.block_pool import KVCacheBlock
    from pdlab.engine.core.sched.output import SchedulerOutput
    from pdlab.engine.request import Request


@dataclass
class KVConnectorMetadata:
    """What the scheduler side tells the worker side for one step. Each connector
    subclasses it; the scheduler only passes it along in ``SchedulerOutput``."""


class KVConnectorBase(ABC):
    """Scheduler side of a KV connector."""

    @abstractmethod
    def get_num_new_matched_tokens(
        self, request: Request, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        """How many tokens past the ``num_computed_tokens`` found in the local prefix cache
        the connector can supply, and whether it loads them asynchronously.

        ``(n, True)``: the scheduler allocates blocks for the ``n`` external tokens and parks
        the request in ``WAITING_FOR_REMOTE_KVS`` until the worker reports it in
        ``finished_recving``. ``(n, False)``: the tokens are loaded during the next forward;
        a synchronous load must leave at least the last token to compute. ``(None, False)``:
        the connector cannot tell yet; the scheduler asks again next step.
        """

    def on_new_request(self, request: Request) -> None:  # noqa: B027 (a no-op hook)
        """Called when the scheduler queues ``request`` (upstream's ``on_new_request``);
        nothing by default."""

    @abstractmethod
    def update_state_after_alloc(
        self, request: Request, blocks: list[KVCacheBlock], num_external_tokens: int
    ) -> None:
        """Called once the request's blocks are allocated (``blocks`` are all of them),
        so the connector can note where the external tokens must be written."""

    @abstractmethod
    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata:
        """Package this step's loads and sends for the worker side, and reset the state
        gathered since the previous call."""

    @abstractmethod
    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        """Called when a request finishes (or is aborted), before its blocks are freed.

        Returns ``(delay_free, kv_transfer_params)``. With ``delay_free`` the scheduler
        keeps the blocks until the worker reports the request in ``finished_sending``;
        ``kv_transfer_params`` go back to the caller in the request's output (on P: where
        D can fetch the K/V).
        """


class KVConnectorWorkerBase(ABC):
    """Worker side of a KV connector: moves blocks between the paged caches."""

    kv_caches: list[Any]

    def register_kv_caches(self, kv_caches: Sequence[Any]) -> None:
        """The worker's paged caches, one tensor per layer."""
        self.kv_caches = list(kv_caches)

    @abstractmethod
    def start_load_kv(
        self, metadata: KVConnectorMetadata, kv_caches: Sequence[Any] | None = None
    ) -> None:
        """Start this step's loads (and note the blocks to send), before the forward.
        ``kv_caches`` defaults to the caches given to ``register_kv_caches``."""

    @abstractmethod
    def wait_for_save(self) -> None:
        """Block until this step's saves are written (P side); after the forward."""

    @abstractmethod
    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        """``(finished_sending, finished_recving)``: requests whose send (P: D has read
        the blocks, or the send timed out) or asynchronous receive (D) completed since the
        last call. ``finished_req_ids`` are the requests the scheduler finished."""

    def get_failed_recving(self) -> set[str]:
        """Requests whose asynchronous receive failed as a whole since the last call.
        The scheduler recomputes them locally (vLLM's "recompute" policy)."""
        return set()

    def get_block_ids_with_load_errors(self) -> set[int]:
        """Blocks whose asynchronous load failed since the last call (vLLM's name). The
        scheduler keeps the blocks before the first failed one and recomputes the rest."""
        return set()

    # ---- D's first token (pdlab/disagg/designs.py); no vLLM 0.33.0 counterpart ----------
    def wants_hidden_state(self, req_id: str) -> bool:
        """P side: whether the runner should hand over this request's last hidden state."""
        return False

    def save_hidden_state(self, req_id: str, hidden: Any) -> None:
        """P side: the last hidden state of ``req_id`` (the input of ``compute_logits``).
        A connector that never asks for one (``wants_hidden_state``) is never given one."""
        raise NotImplementedError(f"{type(self).__name__} asked for no hidden state")

    def take_first_tokens(self) -> dict[str, list[int]]:
        """D side: P's sampled tokens that arrived with the receives landed since the last
        call (the ``first_token`` design)."""
        return {}

    def take_hidden_states(self) -> dict[str, tuple[int, list[float]]]:
        """D side: ``(position, h)`` of P's last hidden state for each receive landed
        since the last call (the ``hidden_state`` design); ``position`` is N - 1."""
        return {}

    def take_loaded_tokens(self) -> dict[str, int]:
        """D side: how many tokens each receive landed since the last call wrote."""
        return {}


class KVConnector(KVConnectorBase, KVConnectorWorkerBase):
    """A connector that plays both roles in one object, as an ``LLMEngine`` takes it (its
    scheduler calls one side, its runner the other), like vLLM's ``KVConnectorBase_V1``."""


def remote_prefill_params(
    block_ids: list[int], engine_id: str, request_id: str,
    host: str = "localhost", port: int = 0,
    *, transfer_id: str | None = None, num_tokens: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The ``kv_transfer_params`` P returns for a finished prefill (NixlConnector's keys),
    which the proxy forwards to D. pdlab adds ``remote_transfer_id`` (D's read names it,
    and P serves only the transfer it still holds) and ``remote_num_tokens``, the tokens
    whose K/V P's blocks hold: D checks that it counts as loaded exactly the tokens its
    worker wrote (``pdlab/engine/core/sched/scheduler.py``)."""
    params = {
        "do_remote_prefill": True, "do_remote_decode": False,
        "remote_block_ids": list(block_ids), "remote_engine_id": engine_id,
        "remote_request_id": request_id, "remote_host": host, "remote_port": port,
    }  # fmt: skip
    if transfer_id is not None:
        params["remote_transfer_id"] = transfer_id
    if num_tokens is not None:
        params["remote_num_tokens"] = num_tokens
    return params


# How D gets its first output token (``pdlab/disagg/designs.py``); P's request names the
# mode in its ``kv_transfer_params["first_token"]``.
FIRST_TOKEN_MODES = ("recompute", "first_token", "append_prompt", "hidden_state")


def _is_index(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def validate_kv_transfer_params(params: Any) -> None:
    """Raise ``ValueError`` naming the key when ``kv_transfer_params`` is malformed."""
    if params is None:
        return
    if not isinstance(params, dict):
        raise invalid("kv_transfer_params", params, Phrase("err_x_none_or_dict"))

    def bad(key: str, allowed: Phrase) -> PdlabError:
        return invalid(f"kv_transfer_params[{key!r}]", params.get(key), allowed)

    prefilling = {"flag": "do_remote_prefill", "value": True}

    for key in ("do_remote_prefill", "do_remote_decode"):
        if key in params and not isinstance(params[key], bool):
            raise bad(key, Phrase("err_x_bool"))
    if params.get("do_remote_prefill") and params.get("do_remote_decode"):
        p_or_d = Phrase("err_n_p_or_d")
        raise bad("do_remote_decode", Phrase("err_x_when_note", x=False, note=p_or_d, **prefilling))
    mode = params.get("first_token", "recompute")
    if mode not in FIRST_TOKEN_MODES:
        raise bad("first_token", Phrase("err_x_one_of", choices=list(FIRST_TOKEN_MODES)))
    firsts = params.get("first_token_ids", [])
    if not isinstance(firsts, list) or not all(_is_index(t) for t in firsts):
        raise bad("first_token_ids", noted(Phrase("err_x_token_ids"), "err_n_ints_ge0"))
    hidden = params.get("hidden_state", [])
    if not isinstance(hidden, list) or not all(isinstance(x, float) for x in hidden):
        raise bad("hidden_state", noted(Phrase("err_x_floats"), "err_n_p_hidden"))
    if not params.get("do_remote_prefill"):
        return
    ids = params.get("remote_block_ids")
    if not isinstance(ids, (list, tuple)) or not ids or not all(_is_index(b) for b in ids):
        ids = noted(Phrase("err_x_nonempty_block_ids"), "err_n_ints_ge0")
        raise bad("remote_block_ids", Phrase("err_x_when", x=ids, **prefilling))
    if not isinstance(params.get("remote_engine_id"), str):
        named = Phrase("err_x_engine_name")
        raise bad("remote_engine_id", Phrase("err_x_when", x=named, **prefilling))
    for key in ("remote_host", "remote_request_id", "remote_transfer_id"):
        if key in params and not isinstance(params[key], str):
            raise bad(key, Phrase("err_x_str"))
    if "remote_num_tokens" in params and not (
        _is_index(params["remote_num_tokens"]) and params["remote_num_tokens"] > 0
    ):
        raise bad("remote_num_tokens", noted(Phrase("err_x_int_ge", n=1), "err_n_p_tokens"))
    port = params.get("remote_port", 0)
    if isinstance(port, bool) or not isinstance(port, int) or port < 0:
        raise bad("remote_port", Phrase("err_x_int_ge", n=0))
