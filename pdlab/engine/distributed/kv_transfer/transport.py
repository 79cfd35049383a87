"""How KV blocks travel from the prefill (P) instance to the decode (D) instance.

vLLM's ``NixlConnector`` (``vllm/distributed/kv_transfer/kv_connector/v1/nixl/``)
has D *read* P's registered cache memory: D asks for P's block ids, writes them into its own
block ids, then notifies P, which may free its blocks. pdlab keeps that protocol with two
transports:

* :class:`InProcessTransport`: two engines in one Python process; a read is a tensor copy
  from P's cache tensors to D's, block id by block id.
* :class:`DistTransport` (``dist.py``): P and D in separate processes, messages over
  ``torch.distributed`` (gloo on CPU).

Both verify what arrived with a checksum computed at the source; a mismatch or a failed read
is reported as failed, and D falls back to computing the prompt itself. Before serving, both
ask the source engine's ``claim`` callback (``PDConnector.claim_read``) whether it still holds
the blocks of that request and transfer id: a checksum alone cannot catch a late read, since
it is computed over whatever the reused blocks hold by then.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from pdlab.errors import PdlabValueError, Phrase, invalid, one_line


def blocks_checksum(kv_caches: list[torch.Tensor], block_ids: list[int]) -> float:
    """A cheap integrity check over the rows of ``block_ids`` in every layer. NaN (unused
    slots of a partial block) is zeroed so equal data gives equal sums."""
    idx = torch.tensor(block_ids, dtype=torch.long, device=kv_caches[0].device)
    total = 0.0
    for layer, cache in enumerate(kv_caches):
        rows = cache.index_select(0, idx).double().nan_to_num(0.0)
        weights = torch.arange(
            1, rows[0].numel() + 1, dtype=torch.float64, device=rows.device
        ).view(rows.shape[1:])
        total += float((rows * weights).sum()) * (layer + 1)
    return total


# claim(remote_request_id, transfer_id, block_ids) -> None to serve, or the reason not to.
Claim = Callable[[str, "str | None", Sequence[int]], "str | None"]


def check_block_ids(name: str, block_ids: Any, num_blocks: int) -> list[int]:
    """``block_ids`` as a list of ints in ``[0, num_blocks)``, or ``ValueError`` naming it."""
    if isinstance(block_ids, (str, bytes)) or not isinstance(block_ids, Sequence):
        raise invalid(name, block_ids, Phrase("err_x_block_ids"))
    for b in block_ids:
        if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b < num_blocks:
            allowed = Phrase("err_x_block_ids_in", span=f"[0, {num_blocks})")
            raise PdlabValueError("err_contains", name=name, value=b, allowed=allowed)
    return list(block_ids)


@dataclass
class ReadResult:
    req_id: str
    ok: bool
    num_blocks: int
    nbytes: int
    reason: str = ""


@runtime_checkable
class KVTransport(Protocol):
    """What ``PDConnector`` needs from a transport, the role NIXL plays for vLLM's
    ``NixlConnectorWorker``; the two above implement it (and say so by subclassing it)."""

    def register(
        self, engine_id: str, kv_caches: list[torch.Tensor], claim: Claim | None = None
    ) -> None:
        """Make ``engine_id``'s caches readable; ``claim`` vets each read before it is served."""

    def start_read(
        self, engine_id: str, req_id: str,
        remote_engine_id: str, remote_block_ids: list[int],
        local_caches: list[torch.Tensor], local_block_ids: list[int],
        remote_request_id: str | None = None, *, transfer_id: str | None = None,
    ) -> None:  # fmt: skip
        """D: begin copying the remote blocks into the local ones."""

    def poll_reads(self, engine_id: str) -> list[ReadResult]:
        """D: the reads that finished (or failed) since the last poll."""

    def release(
        self, remote_engine_id: str | None, remote_request_id: str, transfer_id: str | None = None
    ) -> None:
        """D will not read this hand-off: P may free its blocks."""

    def take_served(self, engine_id: str) -> list[tuple[str, str | None]]:
        """P: ``(request id, transfer id)`` of each hand-off read or released since the
        last call (NIXL's notification)."""


class InProcessTransport(KVTransport):
    """A registry of engines living in this process, addressed by ``engine_id``.

    ``fault`` injects failures for tests and demos: ``"fail"`` (the read errors),
    ``"corrupt"`` (data changes in flight, caught by the checksum) or ``None``. It applies
    to every read while set; ``fault_once`` to the next read only. ``delay_polls`` keeps
    each read in flight for that many polls, as a slow network would.
    """

    def __init__(self) -> None:
        self._engines: dict[str, list[torch.Tensor]] = {}
        self._claims: dict[str, Claim | None] = {}
        self._served: dict[str, list[tuple[str, str | None]]] = {}
        self.fault: str | None = None
        self.fault_once: str | None = None
        self.delay_polls = 0
        self._in_flight: dict[str, list[list[Any]]] = {}

    def register(
        self, engine_id: str, kv_caches: list[torch.Tensor], claim: Claim | None = None
    ) -> None:
        self._engines[engine_id] = kv_caches
        self._claims[engine_id] = claim
        self._served.setdefault(engine_id, [])

    def unregister(self, engine_id: str) -> None:
        self._engines.pop(engine_id, None)
        self._claims.pop(engine_id, None)

    def start_read(
        self, engine_id: str, req_id: str,
        remote_engine_id: str, remote_block_ids: list[int],
        local_caches: list[torch.Tensor], local_block_ids: list[int],
        remote_request_id: str | None = None, *, transfer_id: str | None = None,
    ) -> None:  # fmt: skip
        """Begin D's read; it lands after ``delay_polls`` calls of :meth:`poll_reads`."""
        read = (req_id, remote_engine_id, remote_block_ids, local_caches, local_block_ids,
                remote_request_id or req_id, transfer_id)  # fmt: skip
        self._in_flight.setdefault(engine_id, []).append([self.delay_polls, read])

    def poll_reads(self, engine_id: str) -> list[ReadResult]:
        done, waiting = [], []
        for item in self._in_flight.get(engine_id, []):
            if item[0] > 0:
                item[0] -= 1
                waiting.append(item)
                continue
            # Any problem (P no longer holds the blocks, bad ids, mismatched caches, an
            # injected fault) is a failed read, reported once; nothing raises into the engine.
            try:
                done.append(self._read(*item[1]))
            except Exception as e:  # noqa: BLE001 - a failed read, never a failed step
                local = item[1][4]
                n = len(local) if isinstance(local, Sequence) else 0
                done.append(ReadResult(item[1][0], False, n, 0, one_line(e)))
        self._in_flight[engine_id] = waiting
        return done

    def _read(
        self, req_id: str,
        remote_engine_id: str, remote_block_ids: list[int],
        local_caches: list[torch.Tensor], local_block_ids: list[int],
        remote_request_id: str, transfer_id: str | None,
    ) -> ReadResult:  # fmt: skip
        """Copy ``remote_block_ids`` of P's caches into ``local_block_ids`` of D's."""
        fault, self.fault_once = self.fault_once or self.fault, None
        src = self._engines.get(remote_engine_id)
        n = len(local_block_ids)
        if src is None or fault == "fail":
            why = "injected failure" if fault == "fail" else f"unknown engine {remote_engine_id}"
            return ReadResult(req_id, False, n, 0, why)
        if len(remote_block_ids) != n:
            return ReadResult(
                req_id, False, n, 0, f"{len(remote_block_ids)} remote blocks for {n} local blocks"
            )
        check_block_ids("remote_block_ids", remote_block_ids, src[0].shape[0])
        check_block_ids("local_block_ids", local_block_ids, local_caches[0].shape[0])
        if [c.shape[1:] for c in src] != [c.shape[1:] for c in local_caches]:
            return ReadResult(req_id, False, n, 0, "P's and D's caches differ in shape")
        claim = self._claims.get(remote_engine_id)
        why = claim(remote_request_id, transfer_id, remote_block_ids) if claim else None
        if why:
            return ReadResult(req_id, False, n, 0, why)
        expected = blocks_checksum(src, remote_block_ids)
        s_idx = torch.tensor(remote_block_ids, dtype=torch.long)
        d_idx = torch.tensor(local_block_ids, dtype=torch.long)
        nbytes = 0
        for s, d in zip(src, local_caches):
            rows = s.index_select(0, s_idx.to(s.device))
            if fault == "corrupt":
                rows = rows.clone()
                rows.view(-1)[:8] = 12345.0  # a flipped range of values
            d.index_copy_(0, d_idx.to(d.device), rows.to(d.device, d.dtype))
            nbytes += rows.numel() * rows.element_size()
        self._served[remote_engine_id].append((remote_request_id, transfer_id))
        if n and blocks_checksum(local_caches, local_block_ids) != expected:
            return ReadResult(req_id, False, n, nbytes, "checksum mismatch")
        return ReadResult(req_id, True, n, nbytes)

    def release(
        self, remote_engine_id: str | None, remote_request_id: str, transfer_id: str | None = None
    ) -> None:
        if remote_engine_id in self._served:
            self._served[remote_engine_id].append((remote_request_id, transfer_id))

    def take_served(self, engine_id: str) -> list[tuple[str, str | None]]:
        served, self._served[engine_id] = self._served.get(engine_id, []), []
        return served
