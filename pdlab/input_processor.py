"""What ``LLMEngine.add_request`` checks before a request reaches the scheduler.

Mirrors ``vllm/v1/engine/input_processor.py`` (``InputProcessor._validate_params``,
``_validate_prompt_len``): every bad input is refused at the door with a ``TypeError`` or
``ValueError`` naming the argument, the value and what is allowed, so it can never fail a
batch inside ``step()``. ``check_kv_cache_fits`` does the same for the cache an engine is
about to allocate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from pdlab.config import CacheConfig, ModelConfig
from pdlab.request import SamplingParams


def process_prompt(
    prompt: Any, tokenizer: Any, model_config: ModelConfig, max_model_len: int
) -> list[int]:
    """The prompt as token ids, or ``TypeError``/``ValueError`` naming what is wrong: text
    or a list of ints, each a token id of the model, fewer than ``max_model_len`` of them."""
    if isinstance(prompt, str):
        if not prompt:
            raise ValueError("prompt='' is invalid: expected a non-empty string")
        ids = tokenizer.encode(prompt)
    elif isinstance(prompt, (bytes, bytearray)) or not isinstance(prompt, Sequence):
        raise TypeError(f"prompt={prompt!r} is invalid: expected a string or a list of token ids")
    else:
        ids = list(prompt)
    if not ids:
        raise ValueError("prompt=[] is invalid: expected at least one token id")
    vocab = model_config.vocab_size
    for i, t in enumerate(ids):
        if isinstance(t, bool) or not isinstance(t, int):
            raise TypeError(
                f"prompt[{i}]={t!r} is invalid: expected an integer token id in [0, {vocab})"
            )
        if not 0 <= t < vocab:
            raise ValueError(
                f"prompt[{i}]={t} is invalid: expected a token id in [0, {vocab}) "
                f"(vocab_size of model {model_config.name!r})"
            )
    if len(ids) >= max_model_len:
        # As vLLM's input processor: the prompt plus at least one output token must fit.
        raise ValueError(
            f"prompt has {len(ids)} tokens: expected fewer than max_model_len={max_model_len} "
            "(one position is left for the first output token)"
        )
    return ids


def validate_params(
    sampling_params: Any, request_id: Any, kv_transfer_params: Any, model_config: ModelConfig
) -> None:
    """The rest of ``add_request``'s arguments, checked before anything is queued."""
    if sampling_params is not None and not isinstance(sampling_params, SamplingParams):
        raise TypeError(
            f"sampling_params={sampling_params!r} is invalid: expected None or a SamplingParams"
        )
    vocab = model_config.vocab_size
    stops = [t for t in (sampling_params.stop_token_ids if sampling_params else ()) if t >= vocab]
    if stops:
        raise ValueError(
            f"sampling_params.stop_token_ids contains {stops[0]}: expected token ids "
            f"in [0, {vocab}) (vocab_size of model {model_config.name!r})"
        )
    if request_id is not None and (not isinstance(request_id, str) or not request_id):
        raise TypeError(f"request_id={request_id!r} is invalid: expected a non-empty string")
    if kv_transfer_params is not None and not isinstance(kv_transfer_params, dict):
        raise TypeError(
            f"kv_transfer_params={kv_transfer_params!r} is invalid: expected None or a dict"
        )


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
    cache = (
        cache_config.num_blocks
        * cache_config.block_size
        * model_config.kv_cache_dim
        * model_config.num_hidden_layers
        * p.element_size()
    )
    host = cache_config.num_blocks * _BLOCK_OBJECT_BYTES + (cache if p.device.type == "cpu" else 0)
    for device, need in ((p.device, cache), (torch.device("cpu"), host)):
        free = available_bytes(device)
        if free is not None and need > 0.9 * free:
            raise ValueError(
                f"CacheConfig(num_blocks={cache_config.num_blocks}, "
                f"block_size={cache_config.block_size}) is too large: it needs "
                f"{need / 2**30:.1f} GiB on {device.type} and {free / 2**30:.1f} GiB is "
                "available; expected fewer blocks or a smaller block_size"
            )
