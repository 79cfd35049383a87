"""The cross-process transport: P and D talk over ``torch.distributed`` (gloo on CPU).

Rank 0 is P, rank 1 is D. Every message is a 4-value int64 header ``[type, key, numel,
extra]`` followed by a payload of ``numel`` values. On each side a receiver thread sits in a
blocking ``recv`` (the next header, then its payload) and queues what arrives; the engine
thread pumps that queue between steps, as NIXL's progress thread does, and sends with a
plain ``send``, which completes at once because the peer's receiver is always waiting.
(gloo's ``irecv`` cannot be polled: ``is_completed`` stays False until ``wait``.) Messages:

* ``REQUEST`` P -> D: a request to decode, with P's ``kv_transfer_params`` (JSON);
* ``READ`` D -> P: "send me these block ids" (JSON: key, remote request id, block ids);
* ``BLOCKS`` P -> D: the rows of those blocks for every layer; ``extra`` carries P's
  checksum, which D checks after writing them into its own blocks;
* ``FAILED`` P -> D: the answer to a READ that P refuses (JSON: why); P serves a READ only
  if its connector's ``claim`` accepts the request, transfer id and block ids;
* ``HELLO`` either way, once, first: what each side must share with the other (block size,
  KV dtype, speculative method, K and drafter, model), compared before any request
  (:meth:`DistTransport.handshake`);
* ``RESULT`` D -> P: a finished request's output (JSON); ``SHUTDOWN`` either way.

Serving a READ is what tells P that D has its blocks, so P frees them then (vLLM: NIXL's
notification), or after ``kv_transfer_timeout_s`` if no READ ever comes. A dead peer ends
the receiver's ``recv`` with an error at once; ``peer_failed`` says so, and the engine loop
in ``pdlab/disagg/procs.py`` stops and frees what it held.
"""

from __future__ import annotations

import json
import queue
import re
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from pdlab.engine.distributed.kv_transfer.transport import (
    Claim,
    KVTransport,
    ReadResult,
    blocks_checksum,
    check_block_ids,
)
from pdlab.errors import PdlabRuntimeError, PdlabValueError, either, invalid, noted, one_line

REQUEST, READ, BLOCKS, RESULT, SHUTDOWN, FAILED, HELLO = 1, 2, 3, 4, 5, 6, 7


def _f2i(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", x))[0]


def _i2f(x: int) -> float:
    return struct.unpack("<d", struct.pack("<q", x))[0]


def peer_failure(e: BaseException) -> str:
    """One readable line from gloo's error (which starts with its source path)."""
    text = re.sub(r"^\[[^\]]*\]\s*", "", str(e).strip().splitlines()[0] if str(e).strip() else "")
    return f"peer failed: {text.split('. This is typically')[0] or type(e).__name__}"[:200]


@dataclass
class Message:
    type: int
    key: int
    payload: Any


class DistTransport(KVTransport):
    """One side of a P/D pair of processes. ``rank`` 0 is P, 1 is D."""

    def __init__(self, rank: int, kv_dtype: torch.dtype) -> None:
        if rank not in (0, 1):
            raise invalid("rank", rank, either(noted(0, "err_n_p"), noted(1, "err_n_d")))
        self.rank, self.peer, self.kv_dtype = rank, 1 - rank, kv_dtype
        self.inbox: list[Message] = []
        self._arrived: queue.Queue[tuple[int, int, torch.Tensor, int] | str] = queue.Queue()
        self._caches: list[torch.Tensor] = []
        self._claim: Claim | None = None
        self._served: list[tuple[str, str | None]] = []
        self._pending: dict[int, tuple[str, list[int]]] = {}
        self._results: list[ReadResult] = []
        self._next_key, self.bytes_sent = 0, 0
        self.peer_failed: str | None = None
        self._news = threading.Event()
        self._receiver = threading.Thread(
            target=self._receive_loop, name="pdlab-kv-recv", daemon=True
        )
        self._receiver.start()

    # ---- the engine side -------------------------------------------------------------
    def register(
        self, engine_id: str, kv_caches: list[torch.Tensor], claim: Claim | None = None
    ) -> None:
        self._caches, self._claim = kv_caches, claim

    def handshake(self, info: dict[str, Any], timeout_s: float) -> None:
        """Exchange ``info`` (what both sides must share: ``pdlab/disagg/procs.py``'s
        ``pair_identity``) with the peer before any request; raise ``ValueError`` naming
        the first field where the two sides differ (both sides raise the same), or
        ``RuntimeError`` if the peer does not answer within ``timeout_s``."""
        me, peer = ("P", "D") if self.rank == 0 else ("D", "P")
        self.send_json(HELLO, info)
        deadline = time.monotonic() + timeout_s
        while True:
            self.pump()
            hello = next((m for m in self.inbox if m.type == HELLO), None)
            if hello is not None:
                self.inbox.remove(hello)
                break
            if self.peer_failed:
                raise PdlabRuntimeError("err_handshake_failed", peer=peer, why=self.peer_failed)
            left = deadline - time.monotonic()
            if left <= 0:
                raise PdlabRuntimeError("err_handshake_timeout", peer=peer, timeout=timeout_s)
            self.wait(min(left, 0.5))
        theirs = hello.payload or {}
        for key in [*info, *(k for k in theirs if k not in info)]:  # in the order given
            if info.get(key) != theirs.get(key):
                raise PdlabValueError(
                    "err_kv_differs", key=key, me=me,
                    mine=info.get(key), peer=peer, theirs=theirs.get(key),
                )  # fmt: skip

    def wait(self, timeout_s: float) -> None:
        """Block until a message arrives (or the peer fails), at most ``timeout_s``: the
        engine loops wait on this event instead of sleeping."""
        if self._arrived.empty():
            self._news.wait(max(timeout_s, 0.0))
        self._news.clear()  # anything that came meanwhile is in the queue for pump()

    def start_read(
        self, engine_id: str, req_id: str,
        remote_engine_id: str, remote_block_ids: list[int],
        local_caches: list[torch.Tensor], local_block_ids: list[int],
        remote_request_id: str | None = None, *, transfer_id: str | None = None,
    ) -> None:  # fmt: skip
        key = self._next_key
        self._next_key += 1
        self._pending[key] = (req_id, list(local_block_ids))
        if not remote_block_ids or len(remote_block_ids) != len(local_block_ids):
            # Nothing P could answer correctly: fail here, once, without asking P.
            why = f"{len(remote_block_ids)} remote blocks for {len(local_block_ids)} local blocks"
            self._results.append(ReadResult(req_id, False, len(local_block_ids), 0, why))
            del self._pending[key]
            return
        self._send_read(remote_request_id or req_id, list(remote_block_ids), transfer_id, key)

    def release(
        self, remote_engine_id: str | None, remote_request_id: str, transfer_id: str | None = None
    ) -> None:
        """D will not read this request: an empty READ lets P free its blocks now."""
        self._send_read(remote_request_id, [], transfer_id, -1)

    def _send_read(self, rid: str, block_ids: list[int], tid: str | None, key: int) -> None:
        msg = {"remote_request_id": rid, "remote_block_ids": block_ids, "transfer_id": tid}
        self.send_json(READ, msg, key)

    def poll_reads(self, engine_id: str) -> list[ReadResult]:
        self.pump()
        done, self._results = self._results, []
        if self.peer_failed:
            done += [
                ReadResult(r, False, len(b), 0, self.peer_failed) for r, b in self._pending.values()
            ]
            self._pending.clear()
        return done

    def take_served(self, engine_id: str) -> list[tuple[str, str | None]]:
        self.pump()
        served, self._served = self._served, []
        return served

    # ---- messages --------------------------------------------------------------------
    def send_json(self, type_: int, obj: Any, key: int = 0) -> None:
        data = torch.frombuffer(bytearray(json.dumps(obj).encode()), dtype=torch.uint8)
        self._send(type_, key, data)

    def _send(self, type_: int, key: int, payload: torch.Tensor, extra: int = 0) -> None:
        if self.peer_failed:
            return
        hdr = torch.tensor([type_, key, payload.numel(), extra], dtype=torch.int64)
        try:
            dist.send(hdr, self.peer)
            if payload.numel():
                dist.send(payload.contiguous(), self.peer)
                self.bytes_sent += payload.numel() * payload.element_size()
        except RuntimeError as e:
            self._fail(e)

    def _fail(self, e: BaseException) -> None:
        self.peer_failed = peer_failure(e)
        self._news.set()  # wake a wait()

    def _receive_loop(self) -> None:
        """Receiver thread: header, then payload, forever; a dead peer ends it."""
        hdr = torch.zeros(4, dtype=torch.int64)
        while True:
            try:
                dist.recv(hdr, self.peer)
                type_, key, numel, extra = (int(x) for x in hdr.tolist())
                dtype = self.kv_dtype if type_ == BLOCKS else torch.uint8
                payload = torch.empty(numel, dtype=dtype)
                if numel:
                    dist.recv(payload, self.peer)
            except Exception as e:  # noqa: BLE001 - any failure here means the peer is gone
                if "timed out" in str(e).lower() or "timeout" in str(e).lower():
                    continue  # an idle peer is not a dead one
                self._arrived.put(peer_failure(e))
                self._news.set()
                return
            self._arrived.put((type_, key, payload, extra))
            self._news.set()
            if type_ == SHUTDOWN:
                return

    def pump(self) -> None:
        """Handle whatever has arrived: serve READs (on P), land BLOCKS (on D)."""
        while True:
            try:
                item = self._arrived.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, str):
                self.peer_failed = item
                return
            self._dispatch(*item)

    def _dispatch(self, type_: int, key: int, payload: torch.Tensor, extra: int) -> None:
        if type_ == READ:
            self._serve(key, json.loads(bytes(payload.tolist()).decode()))
        elif type_ in (BLOCKS, FAILED):
            if key not in self._pending:  # the answer to a release
                return
            req_id, local = self._pending.pop(key)
            nbytes = payload.numel() * payload.element_size()
            if type_ == FAILED:
                why = json.loads(bytes(payload.tolist()).decode())["reason"]
                self._results.append(ReadResult(req_id, False, len(local), nbytes, why))
                return
            try:
                ok, why = self._land(local, payload, _i2f(extra)), ""
            except Exception as e:  # noqa: BLE001 - a failed read, never a failed step
                ok, why = False, one_line(e)
            if not ok and not why:
                why = "checksum mismatch"
            self._results.append(ReadResult(req_id, ok, len(local), nbytes, why))
        else:
            obj = json.loads(bytes(payload.tolist()).decode()) if payload.numel() else None
            self.inbox.append(Message(type_, key, obj))

    def _serve(self, key: int, req: dict[str, Any]) -> None:
        """P: answer a READ with the rows of its blocks, or FAILED with why not."""
        rid, tid, ids = req["remote_request_id"], req.get("transfer_id"), req["remote_block_ids"]
        if not ids:  # a release: D will not read
            self._served.append((rid, tid))
            return
        try:
            check_block_ids("remote_block_ids", ids, self._caches[0].shape[0])
            why = self._claim(rid, tid, ids) if self._claim is not None else None
        except Exception as e:  # noqa: BLE001
            why = one_line(e)
        if why:
            self.send_json(FAILED, {"reason": why}, key)
            return
        idx = torch.tensor(ids, dtype=torch.long)
        # Staged through host memory: gloo sends CPU tensors (NCCL would send device
        # memory directly, as NIXL reads it).
        rows = torch.stack([c.index_select(0, idx.to(c.device)).cpu() for c in self._caches])
        checksum = blocks_checksum(self._caches, ids)
        self._send(BLOCKS, key, rows.reshape(-1), _f2i(checksum))
        self._served.append((rid, tid))

    def _land(self, local: Sequence[int], payload: torch.Tensor, checksum: float) -> bool:
        """D: write the rows into ``local`` blocks; whether they match P's checksum."""
        if not local:
            return True
        check_block_ids("local_block_ids", local, self._caches[0].shape[0])
        shape = (len(self._caches), len(local), *self._caches[0].shape[1:])
        if payload.numel() != torch.Size(shape).numel():
            raise PdlabValueError("err_payload_size", n=payload.numel(), shape=list(shape))
        idx = torch.tensor(list(local), dtype=torch.long)
        rows = payload.view(shape)
        for layer, c in enumerate(self._caches):
            c.index_copy_(0, idx.to(c.device), rows[layer].to(c.device))
        return blocks_checksum(self._caches, list(local)) == checksum
