"""When a request stops: ``check_stop``, as in ``vllm/v1/core/sched/utils.py``.

pdlab's ``SamplingParams`` has no ``eos_token_id``, ``min_tokens`` or repetition
detection, so only two of upstream's checks remain, in upstream's order: a stop token
first, then the length limits.
"""

from __future__ import annotations

from pdlab.engine.request import Request, RequestStatus


def check_stop(request: Request, max_model_len: int) -> bool:
    """Whether ``request`` stops after its last output token; if so, sets its finished
    status (and ``stop_reason`` for a stop token)."""
    last = request.output_token_ids[-1]
    if last in request.sampling_params.stop_token_ids:
        request.status = RequestStatus.FINISHED_STOPPED
        request.stop_reason = last
        return True
    if request.num_tokens >= max_model_len or request.num_output_tokens >= request.max_tokens:
        request.status = RequestStatus.FINISHED_LENGTH_CAPPED
        return True
    return False
