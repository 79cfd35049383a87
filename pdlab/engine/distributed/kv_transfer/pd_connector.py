"""PDConnector: the KV connector of a prefill (P) or decode (D) instance.

Mirrors ``NixlConnector`` (``vllm/distributed/kv_transfer/kv_connector/v1/nixl/``:
``connector.py``, ``pull_scheduler.py``, ``worker.py``) with one object for both halves
(its scheduler and worker sides):

* **D, scheduler side.** ``get_num_new_matched_tokens`` offers every prompt token not
  cached locally but the last ``_prefill_backoff()``, loaded asynchronously;
  ``update_state_after_alloc`` notes which local blocks receive which of P's blocks (only
  the tail P has and D lacks, so a local prefix hit on D is not read again).
* **D, worker side.** ``start_load_kv`` starts the reads; ``get_finished`` reports those
  that landed (``finished_recving``) and ``get_failed_recving`` those that failed or did not
  match P's checksum, which the scheduler recomputes locally.
* **The backoff** (``_prefill_backoff``, NIXL's ``base_scheduler.py``). With K > 1 MTP
  modules (``num_prefill_lookahead_tokens``) P must not prefill the last ``K - 1`` prompt
  tokens: its drafter would leave its own unverified drafts in the MTP modules' K/V there,
  which D never rewrites. So P cuts them off the prompt (``on_new_request``) and D computes
  them itself. With one module the backoff is 0. (Upstream also backs off 1 for Mamba
  layers or a bounded-replay sliding window; pdlab has neither.)
* **P, scheduler side.** ``request_finished`` for a ``do_remote_decode`` request that ended
  by its length cap or a stop token holds its blocks (``delay_free=True``) and returns the
  ``kv_transfer_params`` D needs.
* **P, worker side.** ``get_finished`` reports a request in ``finished_sending`` when D has
  read its blocks, or when ``timeout_s`` passed without a read (vLLM's
  ``VLLM_NIXL_ABORT_REQUEST_TIMEOUT``), so P's blocks always come back. Each hand-off gets
  a transfer id (``remote_transfer_id``), and :meth:`PDConnector.claim_read` refuses a read
  whose request, transfer id or block ids P no longer holds (why: ``transport.py``); NIXL
  lets D read P's memory unchecked.
* **D's first token** (``pdlab/disagg/designs.py``): what P's params carry for it and what
  D reports when a receive lands is ``first_token.py``.

The transport (``transport.py`` in one process, ``dist.py`` across two) moves the bytes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pdlab.engine.core.block_pool import KVCacheBlock
from pdlab.engine.core.sched.output import SchedulerOutput
from pdlab.engine.distributed.kv_transfer.base import (
    KVConnector,
    KVConnectorMetadata,
    remote_prefill_params,
)
from pdlab.engine.distributed.kv_transfer.first_token import FirstTokenMixin
from pdlab.engine.distributed.kv_transfer.transport import KVTransport
from pdlab.engine.math_utils import cdiv
from pdlab.engine.request import Request, RequestStatus
from pdlab.engine.trace import EventSink
from pdlab.errors import Phrase, invalid

ROLES = ("prefill", "decode")
# P hands its blocks to D when its one token ended the request normally: by the length
# cap (max_tokens=1) or by a stop token, as NixlConnector accepts both. D then samples
# the same first token itself and stops on it too; an aborted or failed P hands nothing.
_HANDS_OFF = (RequestStatus.FINISHED_LENGTH_CAPPED, RequestStatus.FINISHED_STOPPED)


@dataclass
class ReqToRecv:
    req_id: str
    local_block_ids: list[int]
    remote_block_ids: list[int]
    remote_engine_id: str
    remote_request_id: str
    transfer_id: str | None = None
    # Tokens whose K/V the blocks read hold (None: P did not say), and what P sent with
    # them for D's first token.
    num_tokens: int | None = None
    first_block: int = 0  # index in P's block list of the first block read
    first_token_ids: list[int] = field(default_factory=list)
    hidden_state: list[float] = field(default_factory=list)


@dataclass
class PDConnectorMetadata(KVConnectorMetadata):
    reqs_to_recv: dict[str, ReqToRecv] = field(default_factory=dict)
    reqs_to_send: dict[str, float] = field(default_factory=dict)  # req_id -> deadline


class PDConnector(FirstTokenMixin, KVConnector):
    def __init__(
        self, role: str, engine_id: str, transport: KVTransport, block_size: int,
        timeout_s: float = 30.0, host: str = "localhost", port: int = 0,
        *, emit: EventSink | None = None, num_prefill_lookahead_tokens: int = 0,
    ) -> None:  # fmt: skip
        """``num_prefill_lookahead_tokens``: the engine's
        ``SpeculativeConfig.num_prefill_lookahead_tokens`` (0 without one)."""
        if role not in ROLES:
            raise invalid("role", role, Phrase("err_x_one_of", choices=ROLES))
        self.num_prefill_lookahead_tokens = num_prefill_lookahead_tokens
        self.role, self.engine_id, self.transport = role, engine_id, transport
        self.block_size, self.timeout_s = block_size, timeout_s
        self.host, self.port = host, port
        # The owning engine's sink (Tracer.sink of its instance), given before the engine
        # exists: the engine advances its step.
        self.emit = emit
        self.kv_caches: list[Any] = []
        self._need_recv: dict[str, ReqToRecv] = {}
        self._need_send: dict[str, float] = {}
        self._recving: dict[str, ReqToRecv] = {}
        self._sending: dict[str, float] = {}
        self._failed: set[str] = set()
        self._released: set[str] = set()
        # P: req_id -> (transfer id, block ids) of each hand-off not yet finished_sending;
        # a read is served at most once, while its entry is here and not expired.
        self._transfers: dict[str, tuple[str, frozenset[int]]] = {}
        self._claimed: set[str] = set()
        self._num_transfers = 0
        self._init_first_token_state()
        self.clock = time.monotonic  # tests drive time through this

    def _emit(self, kind: str, **fields: Any) -> None:
        if self.emit is not None:
            self.emit(kind, **fields)

    # ---- scheduler side --------------------------------------------------------------
    def _prefill_backoff(self) -> int:
        """Trailing prompt tokens P leaves to D: ``K - 1`` with K MTP modules, else 0."""
        return max(0, self.num_prefill_lookahead_tokens - 1)

    def _get_remote_prefill_token_count(self, num_prompt_tokens: int) -> int:
        """D: the prompt tokens to load from P, short of the backoff D computes."""
        backoff = self._prefill_backoff()
        if backoff and num_prompt_tokens > backoff:
            return num_prompt_tokens - backoff
        return num_prompt_tokens

    def on_new_request(self, request: Request) -> None:
        params = request.kv_transfer_params
        if self.role == "prefill" and params and params.get("do_remote_decode"):
            self._truncate_request_for_prefill(request)

    def _truncate_request_for_prefill(self, request: Request) -> None:
        """P: cut the backoff off the prompt (once, even if the request is preempted)."""
        backoff, params = self._prefill_backoff(), request.kv_transfer_params
        if not backoff or params is None or params.get("_p_side_truncated"):
            return
        if request.num_prompt_tokens > backoff:
            del request.prompt_token_ids[-backoff:]
            del request._all_token_ids[-backoff:]
            request.num_prompt_tokens -= backoff
            request.max_tokens = 1
            params["_p_side_truncated"] = True
            self._emit("kv_prefill_backoff", req_id=request.request_id, num_tokens=backoff)

    def get_num_new_matched_tokens(
        self, request: Request, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        params = request.kv_transfer_params
        if self.role == "prefill" and params and params.get("first_token") == "hidden_state":
            self._want_hidden.add(request.request_id)
        if self.role == "decode" and params and params.get("do_remote_prefill"):
            # The prompt tokens P holds: all of them but the backoff, or, when P's token
            # was appended to the prompt (append_prompt), the N before it.
            held = self._get_remote_prefill_token_count(request.num_prompt_tokens)
            count = min(held, params.get("remote_num_tokens", 1 << 62)) - num_computed_tokens
            if count > 0:
                return count, True
        return 0, False

    def update_state_after_alloc(
        self, request: Request, blocks: list[KVCacheBlock], num_external_tokens: int
    ) -> None:
        params = request.kv_transfer_params
        if not (self.role == "decode" and params and params.get("do_remote_prefill")):
            return
        params["do_remote_prefill"] = False  # load once, even if asked again
        if num_external_tokens == 0:
            self._release(request)  # a full local hit: P's blocks are not needed
            return
        n = cdiv(num_external_tokens, self.block_size)
        remote = list(params["remote_block_ids"])
        first = len(remote) - n  # blocks before it are D's local prefix-cache hit
        # The blocks past D's local hit (none of them cached yet), as NIXL takes them.
        local = [b.block_id for b in blocks if b.block_hash is None]
        recv = ReqToRecv(
            request.request_id, local, remote[max(first, 0) :],
            params["remote_engine_id"],
            params.get("remote_request_id", request.request_id), params.get("remote_transfer_id"),
            first_token_ids=list(params.get("first_token_ids", [])),
            hidden_state=list(params.get("hidden_state", [])),
        )  # fmt: skip
        if "remote_num_tokens" in params:
            recv.num_tokens = params["remote_num_tokens"] - max(first, 0) * self.block_size
            recv.first_block = max(first, 0)
        if first < 0:
            # More tokens than P's block ids cover: fail this receive once, cleanly.
            recv.remote_block_ids = []
        self._need_recv[request.request_id] = recv

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> PDConnectorMetadata:
        meta = PDConnectorMetadata(self._need_recv, self._need_send)
        self._need_recv, self._need_send = {}, {}
        return meta

    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        params = request.kv_transfer_params or {}
        rid = request.request_id
        if self.role == "prefill":
            if params.get("do_remote_decode") and request.status in _HANDS_OFF and block_ids:
                self._need_send[rid] = self.clock() + self.timeout_s
                self._num_transfers += 1
                tid = f"{self.engine_id}-{self._num_transfers}"
                self._transfers[rid] = (tid, frozenset(block_ids))
                self._claimed.discard(rid)
                out = remote_prefill_params(
                    block_ids, self.engine_id, rid, self.host, self.port,
                    transfer_id=tid, num_tokens=request.num_computed_tokens,
                )  # fmt: skip
                mode = params.get("first_token", "recompute")
                out["first_token"] = mode
                if mode == "hidden_state" and rid in self._hidden:
                    out["hidden_state"] = [float(x) for x in self._hidden.pop(rid).tolist()]
                self._want_hidden.discard(rid)
                return True, out
            self._want_hidden.discard(rid)
            self._hidden.pop(rid, None)
            return False, None
        # D: a read in flight still writes into these blocks; keep them until it lands.
        if rid in self._recving:
            return True, None
        if rid in self._need_recv:  # allocated, read not started: drop it
            self._release(request)
            del self._need_recv[rid]
        elif params.get("do_remote_prefill"):  # never reached allocation
            self._release(request)
        return False, None

    def _release(self, request: Request) -> None:
        """Tell P that D will not read this request's blocks, so P frees them now."""
        params = request.kv_transfer_params or {}
        remote_rid = params.get("remote_request_id", request.request_id)
        self.transport.release(
            params.get("remote_engine_id"), remote_rid, params.get("remote_transfer_id")
        )
        self._emit("kv_release", req_id=request.request_id, remote_request_id=remote_rid)

    # ---- worker side -----------------------------------------------------------------
    def register_kv_caches(self, kv_caches: Sequence[Any]) -> None:
        self.kv_caches = list(kv_caches)
        self.transport.register(self.engine_id, self.kv_caches, claim=self.claim_read)

    def claim_read(
        self, remote_request_id: str, transfer_id: str | None, block_ids: Sequence[int]
    ) -> str | None:
        """P side, called by the transport before it serves a read: None to serve it, else
        why not (a catalog message's English). A read is served once, only while P still
        holds the request's blocks for that transfer, and only for those blocks (D may read
        a tail of them)."""
        held = self._transfers.get(remote_request_id)
        if held is None:
            return str(Phrase("err_claim_no_blocks", req=remote_request_id))
        tid, ids = held
        if transfer_id != tid:
            stale = Phrase("err_claim_stale", tid=transfer_id, req=remote_request_id, current=tid)
            return str(stale)
        if remote_request_id in self._claimed:
            return str(Phrase("err_claim_read", tid=tid))
        deadline = self._need_send.get(remote_request_id, self._sending.get(remote_request_id))
        if deadline is not None and self.clock() > deadline:
            return str(Phrase("err_claim_expired", tid=tid, timeout=self.timeout_s))
        foreign = [b for b in block_ids if b not in ids]
        if foreign:
            return str(Phrase("err_claim_foreign", block=foreign[0], tid=tid))
        self._claimed.add(remote_request_id)
        return None

    def start_load_kv(
        self, metadata: KVConnectorMetadata | None, kv_caches: Sequence[Any] | None = None
    ) -> None:
        if not isinstance(metadata, PDConnectorMetadata):
            return
        caches = list(kv_caches) if kv_caches is not None else self.kv_caches
        self._sending.update(metadata.reqs_to_send)
        for rid, r in metadata.reqs_to_recv.items():
            self._recving[rid] = r
            self.transport.start_read(
                self.engine_id, rid, r.remote_engine_id, r.remote_block_ids,
                caches, r.local_block_ids, r.remote_request_id, transfer_id=r.transfer_id,
            )  # fmt: skip

    def wait_for_save(self) -> None:
        """P's K/V is written by the forward itself; nothing to flush."""

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        recving: set[str] = set()
        for res in self.transport.poll_reads(self.engine_id):
            r = self._recving.pop(res.req_id, None)
            if r is None:
                continue
            self._emit(
                "kv_transfer", req_id=res.req_id, ok=res.ok, reason=res.reason,
                remote_engine_id=r.remote_engine_id, remote_block_ids=r.remote_block_ids,
                local_block_ids=r.local_block_ids, nbytes=res.nbytes,
            )  # fmt: skip
            if res.ok:
                recving.add(res.req_id)
                if r.num_tokens is not None:
                    # Whole blocks were copied; the tokens they hold are P's count.
                    copied = len(r.local_block_ids) * self.block_size
                    self._loaded[res.req_id] = min(r.num_tokens, copied)
                if r.first_token_ids:
                    self._first_tokens[res.req_id] = r.first_token_ids
                if r.hidden_state and r.num_tokens is not None:
                    last = r.num_tokens + r.first_block * self.block_size - 1
                    self._hidden_in[res.req_id] = (last, r.hidden_state)
            else:
                # D will recompute; tell P it can free the blocks instead of waiting.
                self.transport.release(r.remote_engine_id, r.remote_request_id, r.transfer_id)
                self._failed.add(res.req_id)
        sending: set[str] = set()
        # A notice names a transfer; one for an older transfer of a reused request id
        # must not free the blocks of the current one.
        served = {
            rid for rid, tid in self.transport.take_served(self.engine_id)
            if tid is None or tid == self._transfers.get(rid, ("",))[0]
        }  # fmt: skip
        now = self.clock()
        for rid, deadline in list(self._sending.items()):
            if rid in served or now > deadline:
                sending.add(rid)
                del self._sending[rid]
                # A timeout, unless it was ended by fail_all_sends (-inf, traced there).
                if rid not in served and deadline != float("-inf"):
                    self._emit("kv_send_timeout", req_id=rid, timeout_s=self.timeout_s)
        for rid in sending:
            # From here the scheduler frees the blocks: no read may be served any more.
            self._transfers.pop(rid, None)
            self._claimed.discard(rid)
        return sending, recving

    def fail_all_sends(self, reason: str) -> set[str]:
        """P side, when D is gone: every held hand-off ends now, so the scheduler frees
        the blocks at once instead of after ``timeout_s``. Returns the request ids."""
        ended = set(self._sending) | set(self._need_send)
        for rid in ended:
            self.end_send(rid, reason)
        return ended

    def is_sending(self, req_id: str) -> bool:
        """P side: whether blocks are held for D's read of ``req_id``."""
        return req_id in self._sending or req_id in self._need_send

    def end_send(self, req_id: str, reason: str) -> None:
        """P side: end one hand-off now (D will not read it), so the scheduler frees its
        blocks with the next step's report."""
        self._sending[req_id] = float("-inf")  # reported by the next get_finished
        self._need_send.pop(req_id, None)
        self._transfers.pop(req_id, None)
        self._emit("kv_send_aborted", req_id=req_id, reason=reason)

    def get_failed_recving(self) -> set[str]:
        failed, self._failed = self._failed, set()
        return failed

    @property
    def num_pending(self) -> int:
        """Sends and receives not yet reported finished."""
        return len(self._sending) + len(self._recving) + len(self._need_send)
