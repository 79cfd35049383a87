"""Request, RequestStatus and SamplingParams (pdlab/engine/request.py)."""

import pytest

from pdlab.engine.request import Request, RequestStatus, SamplingParams


def test_sampling_params_defaults_are_greedy():
    sp = SamplingParams()
    assert sp.temperature == 0.0 and sp.max_tokens == 16 and sp.stop_token_ids == ()
    assert SamplingParams(stop_token_ids=[3, 4]).stop_token_ids == (3, 4)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 2.5}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"stop_token_ids": [1, -2]}, "stop_token_ids"),
        ({"stop_token_ids": "ab"}, "stop_token_ids"),
        ({"seed": 1.5}, "seed"),
    ],
)
def test_sampling_params_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=f"SamplingParams.{field}=.*expected"):
        SamplingParams(**kwargs)


@pytest.mark.parametrize(
    "args, field",
    [
        (("", [1]), "request_id"),
        ((7, [1]), "request_id"),
        (("r", []), "prompt_token_ids"),
        (("r", "hello"), "prompt_token_ids"),
        (("r", [1, -1]), "prompt_token_ids"),
        (("r", [1, 2.0]), "prompt_token_ids"),
    ],
)
def test_request_rejects_bad_arguments(args, field):
    with pytest.raises(ValueError, match=f"{field}=.*expected"):
        Request(*args)


def test_request_rejects_bad_sampling_and_kv_params():
    with pytest.raises(ValueError, match="sampling_params=.*SamplingParams"):
        Request("r", [1], sampling_params={"max_tokens": 3})
    with pytest.raises(ValueError, match="kv_transfer_params=.*dict"):
        Request("r", [1], kv_transfer_params=["do_remote_decode"])


def test_request_token_bookkeeping():
    r = Request("r", [5, 6, 7], SamplingParams(max_tokens=4))
    assert (r.num_prompt_tokens, r.num_tokens, r.num_output_tokens) == (3, 3, 0)
    assert r.status == RequestStatus.WAITING and r.num_computed_tokens == 0
    assert r.num_cached_tokens == -1 and r.num_preemptions == 0
    r.append_output_token_ids(8)
    r.append_output_token_ids([9, 10])
    assert r.output_token_ids == [8, 9, 10]
    assert r.all_token_ids == [5, 6, 7, 8, 9, 10]
    assert r.prompt_token_ids == [5, 6, 7]
    assert (r.num_tokens, r.num_output_tokens, r.max_tokens) == (6, 3, 4)


def test_request_copies_its_inputs():
    prompt = [1, 2]
    params = {"do_remote_decode": True}
    r = Request("r", prompt, SamplingParams(max_tokens=9), kv_transfer_params=params)
    prompt.append(3)
    r.kv_transfer_params["do_remote_decode"] = False
    assert r.prompt_token_ids == [1, 2] and params == {"do_remote_decode": True}


def test_prefill_instance_request_stops_after_one_token():
    r = Request(
        "r", [1, 2], SamplingParams(max_tokens=9), kv_transfer_params={"do_remote_decode": True}
    )
    assert r.max_tokens == 1
    assert Request("s", [1], SamplingParams(max_tokens=9)).max_tokens == 9


def test_status_order_and_finish_reasons():
    unfinished = [
        RequestStatus.WAITING,
        RequestStatus.WAITING_FOR_REMOTE_KVS,
        RequestStatus.RUNNING,
        RequestStatus.PREEMPTED,
    ]
    for s in RequestStatus:
        assert RequestStatus.is_finished(s) == (s not in unfinished)
    reasons = {s: RequestStatus.get_finished_reason(s) for s in RequestStatus}
    assert reasons[RequestStatus.FINISHED_STOPPED] == "stop"
    assert reasons[RequestStatus.FINISHED_LENGTH_CAPPED] == "length"
    assert reasons[RequestStatus.FINISHED_ABORTED] == "abort"
    assert reasons[RequestStatus.FINISHED_IGNORED] == "length"
    assert all(reasons[s] is None for s in unfinished)
    r = Request("r", [1])
    r.status = RequestStatus.FINISHED_ABORTED
    assert r.is_finished() and r.get_finished_reason() == "abort"
