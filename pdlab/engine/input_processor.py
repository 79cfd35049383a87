"""What ``LLMEngine.add_request`` checks before a request reaches the scheduler.

Mirrors ``vllm/v1/engine/input_processor.py`` (``InputProcessor._validate_params``,
``_validate_prompt_len``): every bad input is refused at the door, in one line, so it can
never fail a batch inside ``step()``; ``check_kv_cache_fits`` does the same for the cache
an engine is about to allocate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from pdlab.engine.config import CacheConfig, ModelConfig
from pdlab.engine.request import SamplingParams
from pdlab.errors import PdlabTypeError, PdlabValueError, Phrase, invalid, none_or, noted


def process_prompt(
    prompt: Any, tokenizer: Any, model_config: ModelConfig, max_model_len: int
) -> list[int]:
    """The prompt as token ids, or ``TypeError``/``ValueError`` naming what is wrong: text
    or a list of ints, each a token id of the model, fewer than ``max_model_len`` of them."""
    if isinstance(prompt, str):
        if not prompt:
            raise invalid("prompt", "", Phrase("err_x_nonempty_str"))
        ids = tokenizer.encode(prompt)
    elif isinstance(prompt, (bytes, bytearray)) or not isinstance(prompt, Sequence):
        raise invalid("prompt", prompt, Phrase("err_x_str_or_ids"), PdlabTypeError)
    else:
        ids = list(prompt)
    if not ids:
        raise invalid("prompt", [], Phrase("err_x_one_token_id"))
    vocab = model_config.vocab_size
    for i, t in enumerate(ids):
        if isinstance(t, bool) or not isinstance(t, int):
            span = Phrase("err_x_int_token_id_in", span=f"[0, {vocab})")
            raise invalid(f"prompt[{i}]", t, span, PdlabTypeError)
        if not 0 <= t < vocab:
            span = Phrase("err_x_token_id_in", span=f"[0, {vocab})")
            of_model = noted(span, "err_n_vocab_of", model=model_config.name)
            raise PdlabValueError("err_invalid_str", name=f"prompt[{i}]", value=t, allowed=of_model)
    if len(ids) >= max_model_len:
        # As vLLM's input processor: the prompt plus at least one output token must fit.
        raise PdlabValueError("err_prompt_too_long", n=len(ids), limit=max_model_len)
    return ids


def validate_params(
    sampling_params: Any, request_id: Any, kv_transfer_params: Any, model_config: ModelConfig
) -> None:
    """The rest of ``add_request``'s arguments, checked before anything is queued."""
    none_or("sampling_params", sampling_params, SamplingParams, PdlabTypeError)
    vocab = model_config.vocab_size
    stops = [t for t in (sampling_params.stop_token_ids if sampling_params else ()) if t >= vocab]
    if stops:
        span = Phrase("err_x_token_ids_in", span=f"[0, {vocab})")
        allowed = noted(span, "err_n_vocab_of", model=model_config.name)
        raise PdlabValueError(
            "err_contains", name="sampling_params.stop_token_ids", value=stops[0], allowed=allowed
        )
    if request_id is not None and (not isinstance(request_id, str) or not request_id):
        raise invalid("request_id", request_id, Phrase("err_x_nonempty_str"), PdlabTypeError)
    if kv_transfer_params is not None and not isinstance(kv_transfer_params, dict):
        allowed = Phrase("err_x_none_or_dict")
        raise invalid("kv_transfer_params", kv_transfer_params, allowed, PdlabTypeError)


# Python bookkeeping per block (a KVCacheBlock in the pool), measured with tracemalloc.
_BLOCK_OBJECT_BYTES = 250


def available_bytes(device: torch.device) -> int | None:
    """Memory free for new allocations on ``device``, or None where it cannot be told."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_kv_cache_fits(model_config: ModelConfig, cache_config: CacheConfig, model: Any) -> None:
    """Refuse a cache that cannot fit, before allocating it: the OS would grant a huge
    ``torch.full`` lazily and then kill the process while NaN is written into it, and a
    pool of 10**12 block objects exhausts memory before any tensor is made."""
    p = next(model.parameters())
    cache = cache_config.num_blocks * cache_config.block_size * model_config.kv_cache_dim
    cache *= model_config.num_hidden_layers * p.element_size()
    host = cache_config.num_blocks * _BLOCK_OBJECT_BYTES + (cache if p.device.type == "cpu" else 0)
    for device, need in ((p.device, cache), (torch.device("cpu"), host)):
        free = available_bytes(device)
        if free is not None and need > 0.9 * free:
            raise PdlabValueError(
                "err_cache_too_large", num_blocks=cache_config.num_blocks,
                block_size=cache_config.block_size, need=need / 2**30, device=device.type,
                free=free / 2**30,
            )  # fmt: skip
