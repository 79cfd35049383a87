"""Four ways for D to get its first output token, as modes of the P/D pair.

================  =========================================  ===========================
mode              what P sends beside the K/V of 0..N-1      D's first step
================  =========================================  ===========================
``recompute``     nothing (vLLM v1, the default)             position N-1 again over N-1
                                                             cached: ``is_prefilling``
``first_token``   its sampled token (SGLang, TensorRT-LLM)   that token as a decode over N
``append_prompt`` its token, appended to D's prompt (N+1)    one prompt token over N:
                                                             still ``is_prefilling``
``hidden_state``  ``h[N-1]`` after the final norm          none for token 1: D computes
                                                             ``lm_head(h)``, then decodes
================  =========================================  ===========================

The facts behind the engines' column: vLLM 0.33.0's scheduler subtracts one from
``num_computed_tokens`` once the K/V arrive (``_update_waiting_for_remote_kv``); SGLang's
decode side takes P's ``output_id`` into ``req.transferred_output_id`` and runs a
"prebuilt" extend batch (``python/sglang/srt/disaggregation/decode.py``); TensorRT-LLM's
generation side adds ``ContextPhaseParams::getFirstGenTokens()`` as the first new token
(``trtGptModelInflightBatching.cpp``). Appending P's token to the prompt was tried for
vLLM's toy proxy (vllm-project/vllm#50559, closed); vLLM V0's ``SimpleConnector`` sent the
hidden states of every prompt position (V0 is not in 0.33.0); ``hidden_state`` models the
smallest payload that spares D the recompute. The open upstream thread is
vllm-project/vllm#25373. What else engines send is told in the catalog's ``dz_note``.

``hidden_state`` is ``h[N-1]`` after the final ``norm``, so D runs ``lm_head`` alone for
token 1, in the step during which the K/V land. The token and the hidden state travel in
``kv_transfer_params`` (through the proxy).

What a mode cannot honour is refused up front (:func:`check_first_token_mode`): when P
samples a token D continues from, both must share one sampler state, and pdlab seeds each
runner's generator apart, so those modes are greedy only.

With speculative decoding every design works, as :data:`WITH_MTP` says: P runs the MTP
layer over its prompt too, so its cache entries travel with the K/V as one more layer (SGLang
also ships a hidden state, as its D verifies P's drafts in its first step; pdlab's D, as
vLLM 0.33.0's, pads that step with ``-1`` placeholders instead).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pdlab.engine.config import ModelConfig
from pdlab.engine.distributed.kv_transfer.base import FIRST_TOKEN_MODES
from pdlab.engine.request import SamplingParams
from pdlab.engine.trace import Tracer
from pdlab.engine.worker.gpu.spec_decode.rejection_sampler import sampling_params_error
from pdlab.errors import PdlabValueError, Phrase, invalid

MODES = FIRST_TOKEN_MODES
TOKEN_ID_BYTES = 4  # an int32 token id, as the engines' metadata buffers carry it

_GREEDY_ONLY = {  # why each mode cannot sample: a catalog key (pdlab/catalog/errors.py)
    "first_token": "err_n_two_samplers",
    "append_prompt": "err_n_two_samplers",
    "hidden_state": "err_n_before_seed",
}


# Each design under DeepSeek's MTP drafter on D: whether it works, what D's first step
# schedules and what feeds the drafter's first draft (checked by tests/lab/test_spec_decode_pd.py).
WITH_MTP: dict[str, tuple[bool, str]] = {
    "recompute": (
        True,
        "1 + K tokens over N - 1 cached (K placeholders); the drafter gets h[N-1] from "
        "the recomputed position",
    ),
    "first_token": (
        True,
        "P's token + K placeholders over N cached; P's MTP entry for N - 1 came with the "
        "K/V, the drafter gets h[N]",
    ),
    "append_prompt": (
        True,
        "the appended token + K placeholders over N cached; P's MTP entry for N - 1 came "
        "with the K/V, the drafter gets h[N]",
    ),
    "hidden_state": (
        True,
        "token 1 from P's h[N-1], then P's token + K placeholders over N cached; P's MTP "
        "entry for N - 1 came with the K/V, the drafter gets h[N]",
    ),
}


def check_first_token_mode(
    mode: Any, sampling_params: SamplingParams | None = None, speculative_config: Any = None
) -> str:
    """``mode`` if the pair can run it with these settings; else a one-line ``ValueError``."""
    if mode not in MODES:
        raise invalid("first_token", mode, Phrase("err_x_one_of", choices=list(MODES)))
    sp = sampling_params or SamplingParams()
    error = sampling_params_error(speculative_config, sp)
    if error is not None:
        raise error
    if mode in _GREEDY_ONLY and sp.temperature > 0:
        why = Phrase(_GREEDY_ONLY[mode])
        raise PdlabValueError(
            "err_greedy_only", mode=mode, temperature=sp.temperature, seed=sp.seed, why=why
        )
    return mode


def prefill_params(mode: str) -> dict[str, Any]:
    """P's ``kv_transfer_params`` for a request of this mode (step 1 of the proxy)."""
    return {"do_remote_decode": True, "first_token": mode}


@dataclass
class HandOff:
    """What the proxy does with P's finished request: send ``prompt`` with
    ``sampling_params`` and ``kv_transfer_params`` to D and put ``prefix`` before D's
    tokens, or, when ``done``, answer with ``prefix`` alone (P's token ended it)."""

    prompt: list[int]
    sampling_params: SamplingParams
    kv_transfer_params: dict[str, Any] | None
    prefix: list[int] = field(default_factory=list)
    done: bool = False
    finish_reason: str | None = None


def hand_off(
    mode: str,
    prompt: Sequence[int],
    sampling_params: SamplingParams,
    p_tokens: Sequence[int],
    kv_transfer_params: dict[str, Any] | None,
    p_step: int,
    max_model_len: int,
) -> HandOff:
    """Step 2 of the proxy, for each mode (see the module docstring)."""
    prompt, sp = list(prompt), sampling_params
    if kv_transfer_params is None or mode in ("recompute", "hidden_state") or not p_tokens:
        return HandOff(prompt, sp, kv_transfer_params)  # D computes token 1 itself
    t = p_tokens[0]
    if t in sp.stop_token_ids:
        return HandOff(prompt, sp, None, [t], True, "stop")
    if sp.max_tokens == 1 or len(prompt) + 1 >= max_model_len:
        return HandOff(prompt, sp, None, [t], True, "length")
    params = dict(kv_transfer_params, first_token_step=p_step)
    if mode == "first_token":
        return HandOff(prompt, sp, dict(params, first_token_ids=[t]))
    rest = dataclasses.replace(sp, max_tokens=sp.max_tokens - 1)
    return HandOff([*prompt, t], rest, params, [t])


def transfer_bytes(
    cfg: ModelConfig, mode: str, n: int, block_size: int, e: int = 2, kv_e: int | None = None
) -> int:
    """The bytes one hand-off of an ``n``-token prompt moves under ``mode``: P's blocks whole
    (``kv_e`` bytes per value, by default ``e``), plus the token id or the hidden state."""
    blocks = -(-n // block_size)
    kv = blocks * block_size * cfg.kv_cache_dim * cfg.num_hidden_layers * (kv_e or e)
    extra = {"first_token": TOKEN_ID_BYTES, "append_prompt": TOKEN_ID_BYTES}
    return kv + extra.get(mode, cfg.hidden_size * e if mode == "hidden_state" else 0)


def payload_bytes(cfg: ModelConfig, mode: str, kv_bytes: int, e: int) -> int:
    """What crosses beside the K/V for token 1 under ``mode`` (nothing where no K/V crossed:
    D computed it all)."""
    if not kv_bytes:
        return 0
    if mode in ("first_token", "append_prompt"):
        return TOKEN_ID_BYTES
    return cfg.hidden_size * e if mode == "hidden_state" else 0


def first_token_fields(tracer: Tracer, req_id: str, mode: str, cfg: ModelConfig) -> dict[str, Any]:
    """The ``first_token`` event of one request, read off the trace of its P/D run: facts,
    which the lab prices (``pdlab/sim/designs.py``)."""
    n = tracer.first("add_request", "P", req_id=req_id)["num_prompt_tokens"]
    p_samples = tracer.filter("sample", "P", req_id=req_id)  # none if P's step failed
    kv = sum(e["nbytes"] for e in tracer.filter("kv_transfer", "D", req_id=req_id) if e["ok"])
    routes = tracer.filter("route", "D", req_id=req_id)
    samples = tracer.filter("sample", "D", req_id=req_id)
    forward = routes[0]["forward"] if routes else ""
    e = {"float32": 4, "float64": 8}.get(str(tracer.meta.get("dtype", "bfloat16")), 2)
    if mode in ("first_token", "append_prompt") and p_samples and kv:
        known_on, known_step = "P", p_samples[0].step
    else:
        known_on, known_step = "D", samples[0].step if samples else -1
    return {
        "req_id": req_id,
        "mode": mode,
        "num_prompt_tokens": n,
        "kv_bytes": kv,
        "payload_bytes": payload_bytes(cfg, mode, kv, e),
        "known_on": known_on,
        "known_step": known_step,
        "d_first_step": routes[0].step if routes else -1,
        "d_first_forward": forward,
        "d_first_is_prefilling": bool(routes[0]["is_prefilling"]) if routes else False,
        "elem_bytes": e,
    }


def record_first_tokens(tracer: Tracer, modes: dict[str, str], cfg: ModelConfig) -> None:
    """One ``first_token`` event per request (``modes``: id to mode), as D's, at the step D
    first scheduled it (or P's step, if D never)."""
    for rid, mode in modes.items():
        f = first_token_fields(tracer, rid, mode, cfg)
        step = f["d_first_step"] if f["d_first_step"] >= 0 else f["known_step"]
        tracer.emit("first_token", "D", step, **f)
