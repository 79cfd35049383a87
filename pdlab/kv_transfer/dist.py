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
* ``RESULT`` D -> P: a finished request's output (JSON); ``SHUTDOWN`` either way.

Serving a READ is what tells P that D has its blocks, so P frees them then (vLLM: NIXL's
notification), or after ``kv_transfer_timeout_s`` if no READ ever comes.
"""

from __future__ import annotations

import json
import queue
import struct
import threading
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from pdlab.kv_transfer.transport import ReadResult, blocks_checksum

REQUEST, READ, BLOCKS, RESULT, SHUTDOWN = 1, 2, 3, 4, 5


def _f2i(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", x))[0]


def _i2f(x: int) -> float:
    return struct.unpack("<d", struct.pack("<q", x))[0]


@dataclass
class Message:
    type: int
    key: int
    payload: Any


class DistTransport:
    """One side of a P/D pair of processes. ``rank`` 0 is P, 1 is D."""

    def __init__(self, rank: int, kv_dtype: torch.dtype) -> None:
        if rank not in (0, 1):
            raise ValueError(f"rank={rank} is invalid: expected 0 (P) or 1 (D)")
        self.rank, self.peer = rank, 1 - rank
        self.kv_dtype = kv_dtype
        self.inbox: list[Message] = []
        self._arrived: queue.Queue[tuple[int, int, torch.Tensor, int] | str] = queue.Queue()
        self._caches: list[torch.Tensor] = []
        self._served: list[str] = []
        self._pending: dict[int, tuple[str, list[int]]] = {}
        self._results: list[ReadResult] = []
        self._next_key = 0
        self.bytes_sent = 0
        self.peer_failed: str | None = None
        self._receiver = threading.Thread(
            target=self._receive_loop, name="pdlab-kv-recv", daemon=True
        )
        self._receiver.start()

    # ---- the engine side -------------------------------------------------------------
    def register(self, engine_id: str, kv_caches: list[torch.Tensor]) -> None:
        self._caches = kv_caches

    def start_read(
        self,
        engine_id: str,
        req_id: str,
        remote_engine_id: str,
        remote_block_ids: list[int],
        local_caches: list[torch.Tensor],
        local_block_ids: list[int],
        remote_request_id: str | None = None,
    ) -> None:
        key = self._next_key
        self._next_key += 1
        self._pending[key] = (req_id, list(local_block_ids))
        self.send_json(
            READ,
            {
                "remote_request_id": remote_request_id or req_id,
                "remote_block_ids": list(remote_block_ids),
            },
            key,
        )

    def release(self, remote_engine_id: str | None, remote_request_id: str) -> None:
        """D will not read this request: an empty READ lets P free its blocks now."""
        self.send_json(READ, {"remote_request_id": remote_request_id, "remote_block_ids": []}, -1)

    def poll_reads(self, engine_id: str) -> list[ReadResult]:
        self.pump()
        done, self._results = self._results, []
        if self.peer_failed:
            done += [
                ReadResult(r, False, len(b), 0, self.peer_failed) for r, b in self._pending.values()
            ]
            self._pending.clear()
        return done

    def take_served(self, engine_id: str) -> list[str]:
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
        self.peer_failed = f"peer failed: {e}".splitlines()[0][:200]

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
            except RuntimeError as e:
                if "timed out" in str(e).lower() or "timeout" in str(e).lower():
                    continue  # an idle peer is not a dead one
                self._arrived.put(f"peer failed: {e}".splitlines()[0][:200])
                return
            self._arrived.put((type_, key, payload, extra))
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
            req = json.loads(bytes(payload.tolist()).decode())
            ids = req["remote_block_ids"]
            idx = torch.tensor(ids, dtype=torch.long)
            # Staged through host memory: gloo sends CPU tensors (NCCL would send device
            # memory directly, as NIXL reads it).
            rows = (
                torch.stack([c.index_select(0, idx.to(c.device)).cpu() for c in self._caches])
                if ids
                else torch.empty(0, dtype=self.kv_dtype)
            )
            checksum = blocks_checksum(self._caches, ids) if ids else 0.0
            self._send(BLOCKS, key, rows.reshape(-1), _f2i(checksum))
            self._served.append(req["remote_request_id"])
        elif type_ == BLOCKS:
            if key not in self._pending:  # the answer to a release
                return
            req_id, local = self._pending.pop(key)
            ok, why = True, ""
            if local:
                idx = torch.tensor(local, dtype=torch.long)
                rows = payload.view(len(self._caches), len(local), *self._caches[0].shape[1:])
                for layer, c in enumerate(self._caches):
                    c.index_copy_(0, idx.to(c.device), rows[layer].to(c.device))
                if blocks_checksum(self._caches, local) != _i2f(extra):
                    ok, why = False, "checksum mismatch"
            self._results.append(
                ReadResult(req_id, ok, len(local), payload.numel() * payload.element_size(), why)
            )
        else:
            obj = json.loads(bytes(payload.tolist()).decode()) if payload.numel() else None
            self.inbox.append(Message(type_, key, obj))

    def describe(self) -> dict[str, Any]:
        return {"transport": "torch.distributed", "backend": dist.get_backend(), "rank": self.rank}
