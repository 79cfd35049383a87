"""How the model runner keeps serving when one request's step fails: a pdlab addition.

vLLM lets an exception in ``execute_model`` kill the engine core (its runners in
``vllm/v1/worker/`` have no per-request isolation); pdlab instead leaves out a request
whose inputs are out of range and, if the batched forward still raises, runs each request
alone once to find the ones that fail. :class:`pdlab.model.runner.ModelRunner` mixes this in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pdlab.errors import one_line
from pdlab.math_utils import cdiv
from pdlab.sched.output import SchedulerOutput
from pdlab.spec_decode.rejection_sampler import check_sampling_params


class RunnerFaultsMixin:
    """Needs ``requests``, ``req_errors``, ``cache_config``, ``cfg``, ``speculative_config``
    and ``_run_batch``."""

    requests: dict[str, Any]
    speculative_config: Any
    req_errors: dict[str, str]
    cache_config: Any
    cfg: Any
    _run_batch: Callable[[SchedulerOutput, list[str]], dict[str, list[int]]]

    def _run_guarded(self, so: SchedulerOutput) -> dict[str, list[int]]:
        """Run the batch so that one bad request cannot take the others down.

        vLLM lets an exception in ``execute_model`` kill the engine core; pdlab keeps
        serving: a request whose inputs are out of range is left out before the forward,
        and if the batched forward still raises, each request runs alone once to find the
        ones that fail. Those land in ``req_errors``; the engine finishes them with
        ``FINISHED_ERROR`` and frees their blocks."""
        rids = [r for r, n in so.num_scheduled_tokens.items() if n > 0]
        spec = getattr(so, "scheduled_spec_decode_tokens", None) or {}
        for r in rids:
            why = self._input_error(r, so.num_scheduled_tokens[r], len(spec.get(r, ())))
            if why:
                self.req_errors[r] = why
        good = [r for r in rids if r not in self.req_errors]
        if not good:
            return {}
        try:
            return self._run_batch(so, good)
        except Exception as e:  # noqa: BLE001 - isolated below, reported per request
            if len(good) == 1:
                self.req_errors[good[0]] = one_line(e)
                return {}
        sampled: dict[str, list[int]] = {}
        for r in good:
            try:
                sampled.update(self._run_batch(so, [r]))
            except Exception as e:  # noqa: BLE001
                self.req_errors[r] = one_line(e)
        return sampled

    def _input_error(self, rid: str, n: int, num_drafts: int = 0) -> str | None:
        """Why this request's inputs cannot run (sampling under speculative decoding,
        token ids, positions, block ids), or None. ``n`` counts ``num_drafts`` drafts."""
        s = self.requests.get(rid)
        if s is None:
            return f"the runner has no state for request {rid!r}"
        why = check_sampling_params(self.speculative_config, s.sampling_params)
        if why:
            return why
        c, bs = s.num_computed_tokens, self.cache_config.block_size
        toks = s.all_token_ids[c : c + n - num_drafts]
        if num_drafts < 0 or len(toks) != n - num_drafts:
            return (
                f"scheduled {n - num_drafts} known tokens from {c} but only "
                f"{s.num_tokens} are known"
            )
        vocab = self.cfg.vocab_size
        bad = [t for t in toks if not 0 <= t < vocab]
        if bad:
            return f"token id {bad[0]} is out of range: expected [0, {vocab}) (vocab_size)"
        if c + n > self.cfg.max_position_embeddings:
            return (
                f"position {c + n - 1} is out of range: expected < "
                f"{self.cfg.max_position_embeddings} (max_position_embeddings)"
            )
        need = cdiv(c + n, bs)
        if len(s.block_ids) < need:
            return f"{len(s.block_ids)} blocks hold {c + n} tokens: expected {need}"
        nb = self.cache_config.num_blocks
        wild = [b for b in s.block_ids[:need] if not 0 <= b < nb]
        if wild:
            return f"block id {wild[0]} is out of range: expected [0, {nb}) (num_blocks)"
        return None
