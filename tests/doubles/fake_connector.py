"""A pretend KV connector, both roles in one object, for scheduler tests.

It follows NixlConnector's protocol (``vllm/distributed/kv_transfer/kv_connector/v1/nixl/``,
a package in vLLM 0.33.0) but moves no data: a receive or a send simply completes after a set
number of steps (calls to ``get_finished``), or fails, as configured. The scheduler cannot
tell the difference, which is the point: it sees only the interface in
``pdlab/engine/distributed/kv_transfer/base.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pdlab.engine.core.block_pool import KVCacheBlock
from pdlab.engine.core.sched.output import SchedulerOutput
from pdlab.engine.distributed.kv_transfer.base import (
    KVConnector,
    KVConnectorMetadata,
    remote_prefill_params,
)
from pdlab.engine.request import Request, RequestStatus


@dataclass
class FakeRecv:
    req_id: str
    local_block_ids: list[int]
    remote_block_ids: list[int]
    load_async: bool


@dataclass
class FakeConnectorMetadata(KVConnectorMetadata):
    reqs_to_recv: dict[str, FakeRecv] = field(default_factory=dict)
    reqs_to_send: dict[str, list[int]] = field(default_factory=dict)


class FakeKVConnector(KVConnector):
    """Configurable fake.

    * ``num_matched_tokens``: external tokens offered for a ``do_remote_prefill`` request;
      None means NixlConnector's rule (every prompt token not cached locally; one fewer
      for a synchronous load, which must leave the last token to compute).
    * ``load_async``: receive asynchronously (``WAITING_FOR_REMOTE_KVS``) or in the step.
    * ``recv_delay_steps`` / ``send_delay_steps``: how many ``get_finished`` calls after
      the transfer starts it completes (0: in the same step). ``send_delay_steps=None``:
      D never reads, and the send is reported after ``send_timeout_steps`` as timed out.
    * ``fail_recv_req_ids``: these receives fail as a whole (``get_failed_recving``).
    * ``invalid_block_from``: ``{req_id: i}``, the receive completes but its local blocks
      from index ``i`` on failed to load (``get_block_ids_with_load_errors``).
    """

    def __init__(
        self,
        num_matched_tokens: int | None = None,
        load_async: bool = True,
        recv_delay_steps: int = 0,
        send_delay_steps: int | None = 0,
        send_timeout_steps: int = 8,
        fail_recv_req_ids: Iterable[str] = (),
        invalid_block_from: dict[str, int] | None = None,
        engine_id: str = "fake-engine",
    ) -> None:
        self.num_matched_tokens = num_matched_tokens
        self.load_async = load_async
        self.recv_delay_steps = recv_delay_steps
        self.send_delay_steps = send_delay_steps
        self.send_timeout_steps = send_timeout_steps
        self.fail_recv_req_ids = set(fail_recv_req_ids)
        self.invalid_block_from = dict(invalid_block_from or {})
        self.engine_id = engine_id
        self.kv_caches: list[Any] = []
        # Scheduler side, gathered until the next build_connector_meta.
        self._reqs_need_recv: dict[str, FakeRecv] = {}
        self._reqs_need_send: dict[str, list[int]] = {}
        # Worker side: steps left per transfer in flight, and what to report next.
        self._recving: dict[str, tuple[int, FakeRecv]] = {}
        self._sending: dict[str, tuple[int, bool]] = {}
        self._failed: set[str] = set()
        self._invalid: set[int] = set()
        # Records for tests.
        self.finished: list[tuple[str, RequestStatus]] = []
        self.loaded: list[FakeRecv] = []
        self.timed_out: set[str] = set()

    # ---- scheduler side ----------------------------------------------------------------
    def get_num_new_matched_tokens(
        self, request: Request, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        params = request.kv_transfer_params or {}
        if not params.get("do_remote_prefill"):
            return 0, False
        n = self.num_matched_tokens
        if n is None:
            n = request.num_prompt_tokens - num_computed_tokens - (0 if self.load_async else 1)
        n = max(n, 0)
        return n, self.load_async and n > 0

    def update_state_after_alloc(
        self, request: Request, blocks: list[KVCacheBlock], num_external_tokens: int
    ) -> None:
        params = request.kv_transfer_params
        if not params or not params.get("do_remote_prefill"):
            return
        if num_external_tokens > 0:
            self._reqs_need_recv[request.request_id] = FakeRecv(
                request.request_id,
                [b.block_id for b in blocks],
                list(params["remote_block_ids"]),
                self.load_async,
            )
        # Load once: a request recomputed after a failure or a preemption loads nothing.
        params["do_remote_prefill"] = False

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> FakeConnectorMetadata:
        meta = FakeConnectorMetadata(self._reqs_need_recv, self._reqs_need_send)
        self._reqs_need_recv, self._reqs_need_send = {}, {}
        return meta

    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        self.finished.append((request.request_id, request.status))
        params = request.kv_transfer_params or {}
        if not params.get("do_remote_decode") or request.status not in (
            RequestStatus.FINISHED_LENGTH_CAPPED,
            RequestStatus.FINISHED_STOPPED,
        ):
            return False, None
        delay_free = len(block_ids) > 0
        if delay_free:
            self._reqs_need_send[request.request_id] = list(block_ids)
        return delay_free, remote_prefill_params(block_ids, self.engine_id, request.request_id)

    # ---- worker side -------------------------------------------------------------------
    def start_load_kv(
        self, metadata: KVConnectorMetadata, kv_caches: Sequence[Any] | None = None
    ) -> None:
        assert isinstance(metadata, FakeConnectorMetadata)
        for rid, recv in metadata.reqs_to_recv.items():
            self.loaded.append(recv)
            if recv.load_async:
                self._recving[rid] = (self.recv_delay_steps, recv)
        for rid in metadata.reqs_to_send:
            if self.send_delay_steps is None:
                self._sending[rid] = (self.send_timeout_steps, True)
            else:
                self._sending[rid] = (self.send_delay_steps, False)

    def wait_for_save(self) -> None:
        """Nothing to save: as with NixlConnector, D reads P's blocks."""

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        done_recving: set[str] = set()
        for rid, (steps, recv) in list(self._recving.items()):
            if steps > 0:
                self._recving[rid] = (steps - 1, recv)
                continue
            del self._recving[rid]
            if rid in self.fail_recv_req_ids:
                self._failed.add(rid)
                continue
            if rid in self.invalid_block_from:
                self._invalid.update(recv.local_block_ids[self.invalid_block_from[rid] :])
            done_recving.add(rid)
        done_sending: set[str] = set()
        for rid, (steps, by_timeout) in list(self._sending.items()):
            if steps > 0:
                self._sending[rid] = (steps - 1, by_timeout)
                continue
            del self._sending[rid]
            if by_timeout:
                self.timed_out.add(rid)
            done_sending.add(rid)
        return done_sending or None, done_recving or None

    def get_failed_recving(self) -> set[str]:
        failed, self._failed = self._failed, set()
        return failed

    def get_block_ids_with_load_errors(self) -> set[int]:
        invalid, self._invalid = self._invalid, set()
        return invalid

    @property
    def num_transfers_in_flight(self) -> int:
        return len(self._recving) + len(self._sending)
