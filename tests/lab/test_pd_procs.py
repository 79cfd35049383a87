"""P and D as two processes over torch.distributed (gloo): same tokens as colocated, bounded
time, nothing left behind when D dies."""

import time

import psutil
import pytest
from conftest import cmdline

from pdlab.disagg.launch import run_pd_procs
from pdlab.engine.config import CacheConfig, ModelConfig, ParallelConfig, SchedulerConfig
from pdlab.engine.model_executor.models import DeepseekV2ForCausalLM
from pdlab.engine.request import SamplingParams

CFG = ModelConfig.tiny()
# 36 tokens (9 blocks of 4), exactly one block, below one block, two blocks plus one
PROMPTS = [
    list(b"Why does D recompute the last token?"),
    list(b"abcd"),
    [5, 6, 7],
    list(range(60, 69)),
]


def _no_children_left():
    # multiprocessing's resource tracker and forkserver (the exercises' sandbox starts one in
    # this worker) live as long as this interpreter; they are not ours.
    kids = [
        k
        for k in psutil.Process().children(recursive=True)
        if not any(s in cmdline(k) for s in ("resource_tracker", "forkserver"))
    ]
    gone, alive = psutil.wait_procs(kids, timeout=10)
    assert not alive, f"processes left behind: {alive}"


@pytest.mark.parametrize("pcp", [1, 2])
def test_two_processes_equal_colocated(pcp):
    t0 = time.monotonic()
    r = run_pd_procs(
        PROMPTS,
        CFG,
        CacheConfig(block_size=4, num_blocks=64),
        SchedulerConfig(),
        SamplingParams(max_tokens=4),
        timeout_s=60,
        parallel_config=ParallelConfig(prefill_context_parallel_size=pcp),
    )
    assert time.monotonic() - t0 < 90
    assert r.errors == {} and r.exitcodes == {"prefill": 0, "decode": 0}
    model = DeepseekV2ForCausalLM(CFG)
    for i, p in enumerate(PROMPTS):
        assert r.prefill.outputs[f"req-{i}"]["output_token_ids"] == model.greedy_generate(p, 4)
    assert r.prefill.num_free_blocks == r.prefill.num_blocks
    assert r.decode.num_free_blocks == r.decode.num_blocks
    routes = r.tracer.filter("route", "D")
    firsts = {e["req_id"]: e for e in reversed(routes)}
    for i, p in enumerate(PROMPTS):
        e = firsts[f"req-{i}"]
        assert (e["query_len"], e["num_computed_tokens"]) == (1, len(p) - 1)
        assert e["forward"] == ("forward_mha" if pcp > 1 else "forward_mqa")
    moved = r.tracer.filter("kv_transfer", "D")
    assert len(moved) == len(PROMPTS) and all(m["ok"] for m in moved)
    _no_children_left()


def test_local_prefix_hit_on_d_over_two_processes():
    """The second prompt extends the first; sent one at a time, D already caches the shared
    blocks and reads only the tail from P."""
    first = list(range(100, 109))  # 9 tokens: 2 full blocks + 1
    second = first[:8] + list(range(200, 207))  # shares the 2 full blocks, 15 tokens
    r = run_pd_procs(
        [first, second],
        CFG,
        CacheConfig(block_size=4, num_blocks=64),
        SchedulerConfig(),
        SamplingParams(max_tokens=3),
        timeout_s=60,
        max_in_flight=1,
    )
    assert r.errors == {}
    model = DeepseekV2ForCausalLM(CFG)
    for i, p in enumerate((first, second)):
        assert r.prefill.outputs[f"req-{i}"]["output_token_ids"] == model.greedy_generate(p, 3)
    hit = r.tracer.first("prefix_hit", "D", req_id="req-1")
    assert hit["num_hit_tokens"] == 8
    moved = r.tracer.first("kv_transfer", "D", req_id="req-1")
    assert len(moved["remote_block_ids"]) == 2  # blocks 2 and 3 of 4
    assert r.decode.num_free_blocks == r.decode.num_blocks
    _no_children_left()


def _run_until_one_side_dies(**die: int):
    """Two prompts over two processes, one side killed as ``die`` says. The transfer
    timeout is an hour, so blocks that come back can only come back through the death
    being noticed; no clock is read."""
    return run_pd_procs(
        PROMPTS[:2],
        CFG,
        CacheConfig(block_size=4, num_blocks=32),
        SchedulerConfig(kv_transfer_timeout_s=3600.0),
        SamplingParams(max_tokens=4),
        timeout_s=120,
        **die,
    )


def test_dead_decode_frees_prefill_blocks_at_once_not_by_timeout():
    """D dies on its first request. P's receive fails at once: it ends its hand-offs, frees
    every block it held and stops. The transfer timeout is an hour, so blocks that came
    back can only have come back through the death being noticed; no clock is read."""
    r = _run_until_one_side_dies(die_after_requests=0)
    assert r.exitcodes["decode"] == 17 and "exited with code 17" in r.errors["decode"]
    assert "prefill" not in r.errors and r.exitcodes["prefill"] == 0
    assert r.prefill.peer_failed and "decode" in r.died_at
    assert r.prefill.num_free_blocks == r.prefill.num_blocks
    assert r.tracer.filter("kv_send_aborted", "P")
    assert not r.tracer.filter("kv_send_timeout", "P")
    assert r.prefill.peer_failed_at <= r.prefill.blocks_freed_at
    _no_children_left()


def test_dead_prefill_frees_decode_blocks_and_decode_stops():
    """P dies right after handing its first request to D, which has allocated blocks and
    sent its read to a P that is gone: the read fails, D frees everything and stops."""
    r = _run_until_one_side_dies(die_after_handoffs=1)
    assert r.exitcodes["prefill"] == 17 and "exited with code 17" in r.errors["prefill"]
    assert "decode" not in r.errors and r.exitcodes["decode"] == 0
    assert r.decode.peer_failed and r.decode.num_free_blocks == r.decode.num_blocks
    _no_children_left()


def test_port_in_use_is_one_line_before_any_process_starts():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ValueError, match=f"port={port} on 127.0.0.1 is not available"):
            run_pd_procs(PROMPTS[:1], CFG, port=port)
    _no_children_left()


def test_a_request_d_cannot_hold_is_refused_alone_and_p_frees_its_blocks():
    """D's cache (6 blocks of 4) cannot hold the first request's 27 tokens (prompt 20,
    max_tokens 8): D answers it with its one-line reason and serves the next one; P frees
    the blocks it held for D's read at once (the transfer timeout is an hour)."""
    big, small = list(range(1, 21)), [5, 6, 7]
    r = run_pd_procs(
        [big, small],
        CFG,
        CacheConfig(block_size=4, num_blocks=6),
        SchedulerConfig(kv_transfer_timeout_s=3600.0),
        SamplingParams(max_tokens=8),
        timeout_s=60,
        max_in_flight=1,
    )
    assert r.errors == {} and r.exitcodes == {"prefill": 0, "decode": 0}
    refused, served = r.prefill.outputs["req-0"], r.prefill.outputs["req-1"]
    assert refused["finish_reason"] == "error" and refused["output_token_ids"] == []
    assert "num_blocks=6" in refused["error"] and refused["error"].startswith("ValueError: ")
    assert served["output_token_ids"] == DeepseekV2ForCausalLM(CFG).greedy_generate(small, 8)
    aborted = r.tracer.filter("kv_send_aborted", "P")
    assert [e["req_id"] for e in aborted] == ["req-0"]
    assert not r.tracer.filter("kv_send_timeout", "P")
    assert r.prefill.num_free_blocks == r.prefill.num_blocks
    assert r.decode.num_free_blocks == r.decode.num_blocks
    _no_children_left()
