"""Greedy verification of draft tokens against the target model.

Mirrors, in vLLM 0.33.0's Model Runner V2 (``vllm/v1/worker/gpu/spec_decode/``):

* ``rejection_sampler.py``, ``gather_draft_sampled``: the draft of each logits row, set to
  ``-1`` where it is a placeholder. Upstream's rule: "drafts are only proposed after sampling
  past the prefill, so any draft slots in a step starting within the prefill are
  placeholders (e.g. the padded first step after a P/D remote KV load)". A placeholder
  never equals a token id, so it is always rejected.
* ``rejection_sampler_utils.py``, ``rejection_sample`` with temperature 0: accept drafts
  while each equals the target's argmax at the position before it; the first mismatch is
  replaced by the target's argmax (the recovered token); if every draft is accepted, the
  argmax after the last one is the bonus token. So a row with ``d`` drafts returns 1 to
  ``d + 1`` tokens and ``num_rejected = d + 1 - num_sampled`` positions are rolled back
  (``get_num_sampled_and_rejected``).

Temperature above 0 is refused (:func:`sampling_params_error`): upstream's probabilistic
rejection sampling, which needs the drafter's probabilities, is not built here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pdlab.errors import PdlabValueError

PLACEHOLDER_TOKEN_ID = -1


def gather_draft_sampled(
    draft_token_ids: Sequence[int], num_computed_tokens: int, prefill_len: int
) -> list[int]:
    """The drafts a row verifies, with every placeholder as ``-1``: all of them when the
    row's step starts inside the prefill (``num_computed_tokens < prefill_len``, upstream's
    rule), and any the scheduler sent as ``-1``."""
    if num_computed_tokens < prefill_len:
        return [PLACEHOLDER_TOKEN_ID] * len(draft_token_ids)
    return [t if t >= 0 else PLACEHOLDER_TOKEN_ID for t in draft_token_ids]


def rejection_sample_greedy(
    target_argmax: Sequence[int], draft_token_ids: Sequence[int]
) -> list[int]:
    """The tokens a row produces: ``target_argmax[i]`` is the target's greedy token after
    the row's ``i``-th verified position (``len(draft_token_ids) + 1`` of them)."""
    if len(target_argmax) != len(draft_token_ids) + 1:
        raise PdlabValueError("err_argmax_len", n=len(target_argmax), drafts=len(draft_token_ids))
    out: list[int] = []
    for target, draft in zip(target_argmax, draft_token_ids):
        out.append(int(target))
        if target != draft:
            return out
    out.append(int(target_argmax[-1]))
    return out


def sampling_params_error(speculative_config: Any, sampling_params: Any) -> PdlabValueError | None:
    """The error a request that cannot run under this speculative config raises, or None."""
    t = float(getattr(sampling_params, "temperature", 0.0) or 0.0)
    if speculative_config is None or t == 0.0:
        return None
    k = speculative_config.num_speculative_tokens
    return PdlabValueError("err_spec_temperature", t=t, k=k)
