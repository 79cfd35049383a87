"""Joining the two-process group of a P/D pair: a free port, a port check, and the join
itself, each failure one line.

Mirrors ``get_open_port`` (``vllm/utils/network_utils.py``) and the process-group setup of
``vllm/distributed/utils.py`` (``stateless_init_torch_distributed_process_group``), cut down
to the two ranks pdlab needs: P is rank 0, D rank 1 (``pdlab/disagg/procs.py``).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import socket
import sys
import time
from collections.abc import Iterator

import torch.distributed as dist

from pdlab.errors import PdlabValueError, os_reason


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that is free now (the OS picks it; vLLM's ``get_open_port``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def check_port_free(host: str, port: int) -> None:
    """Raise ``ValueError`` when P could not listen on ``host:port`` (one line, before any
    work)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            why = os_reason(e)
            raise PdlabValueError("err_port_busy", port=port, host=host, why=why) from None


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 while joining: torch's C++ store logs every retry with a
    stack trace, and the failure is reported as one line anyway."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class PeerUnreachable(RuntimeError):
    """The other side never joined: one line for the launcher and the CLI."""

    one_line = True  # the message is the whole story; the CLI prints it as it is


def _wait_for_listener(host: str, port: int, deadline: float) -> bool:
    """True once something listens at ``host:port``, before ``deadline`` (``time.monotonic``).
    D waits here rather than in torch, whose store client retries after a random back-off of
    up to about the timeout again."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            with socket.create_connection((host, port), timeout=min(left, 1.0)):
                return True
        except OSError:
            time.sleep(min(0.05, max(deadline - time.monotonic(), 0)))


def join_group(rank: int, host: str, port: int, timeout_s: float) -> None:
    """Join the gloo group of two at ``host:port`` as ``rank`` (0 is P, which listens there),
    or raise ``PeerUnreachable`` within ``timeout_s`` (``ValueError`` if P's port is taken)."""
    peer = "decode" if rank == 0 else "prefill"
    unreachable = PeerUnreachable(
        f"could not reach the {peer} peer at {host}:{port} within {timeout_s:g} s"
    )
    deadline = time.monotonic() + timeout_s
    if rank == 0:
        check_port_free(host, port)
    elif not _wait_for_listener(host, port, deadline):
        raise unreachable
    try:
        with _quiet_stderr():
            dist.init_process_group(
                "gloo",
                init_method=f"tcp://{host}:{port}",
                rank=rank,
                world_size=2,
                timeout=datetime.timedelta(seconds=max(deadline - time.monotonic(), 1.0)),
            )
    except Exception:  # noqa: BLE001 - torch's DistNetworkError and friends: one line
        raise unreachable from None
