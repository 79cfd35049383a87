"""What travels with the K/V for D's first token, and what D checks when they land: the
part of :class:`pdlab.engine.distributed.kv_transfer.pd_connector.PDConnector` that the
first-token designs (``pdlab/disagg/designs.py``) and the loaded-tokens invariant add. No vLLM
0.33.0 counterpart: its P/D connectors move K/V. ``ExampleHiddenStatesConnector``
(``vllm/distributed/kv_transfer/kv_connector/v1/example_hidden_states_connector.py``)
writes hidden states to disk for the ``extract_hidden_states`` speculative method, and the
auxiliary-output connector (``vllm/distributed/aux_output_connector/``) moves outputs such
as the routed experts; neither feeds D's first token. P keeps the last hidden state of each
``hidden_state`` request for its ``kv_transfer_params``; D reports, for each receive that
lands, what it wrote and what came with it (the hooks of ``KVConnectorWorkerBase``).
"""

from __future__ import annotations

from typing import Any

import torch


class FirstTokenMixin:
    """The first-token state of a connector (``_init_first_token_state`` sets it) and the
    hooks of ``KVConnectorWorkerBase`` that read it (documented there)."""

    def _init_first_token_state(self) -> None:
        # P: requests of the hidden_state design and the last hidden state of each.
        self._want_hidden: set[str] = set()
        self._hidden: dict[str, Any] = {}
        # D: what landed with each receive, until the runner takes it.
        self._loaded: dict[str, int] = {}
        self._first_tokens: dict[str, list[int]] = {}
        self._hidden_in: dict[str, tuple[int, list[float]]] = {}

    def wants_hidden_state(self, req_id: str) -> bool:
        return req_id in self._want_hidden

    def save_hidden_state(self, req_id: str, hidden: Any) -> None:
        self._hidden[req_id] = hidden.detach().float().cpu()

    def take_first_tokens(self) -> dict[str, list[int]]:
        out, self._first_tokens = self._first_tokens, {}
        return out

    def take_hidden_states(self) -> dict[str, tuple[int, list[float]]]:
        out, self._hidden_in = self._hidden_in, {}
        return out

    def take_loaded_tokens(self) -> dict[str, int]:
        out, self._loaded = self._loaded, {}
        return out


def tokens_from_hidden_states(
    model: Any, hidden: dict[str, tuple[int, list[float]]], emit: Any = None
) -> dict[str, list[int]]:
    """D side, the hidden_state design, in the runner: the first token of each request
    whose K/V landed with P's last hidden state, from ``compute_logits`` alone (greedy:
    the pair refuses this design for sampled requests), each recorded as a ``sample``."""
    out: dict[str, list[int]] = {}
    p = next(model.parameters())
    for rid, (position, h) in hidden.items():
        row = model.compute_logits(torch.tensor([h], dtype=p.dtype, device=p.device))[0]
        tok = int(torch.argmax(row))
        out[rid] = [tok]
        if emit is not None:
            emit("sample", req_id=rid, token=tok, position=position, logit=float(row[tok]))
    return out
