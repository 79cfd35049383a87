"""vLLM 0.33.0's scheduler with the NIXL connector's scheduler half, and pdlab's with
PDConnector(role="decode"), in lockstep on 500 seeded decode-side workloads (lockstep.py,
workload.py): K/V from a pretend P in whole blocks, with a partial last block, for prompts
shorter than a block, after a local hit for part of the prompt; receives that land, fail as
a whole or lose blocks, under both kv_load_failure_policy values; aborts while K/V arrive."""

from collections import Counter

import pytest
from lockstep import run

pytestmark = pytest.mark.upstream
NUM_WORKLOADS = 500


@pytest.mark.parametrize("seed", range(NUM_WORKLOADS))
def test_decode_workload(seed):
    run(seed, "decode")


def test_decode_workloads_reach_every_case():
    seen = sum((run(seed, "decode")[1] for seed in range(300)), start=Counter())
    cases = [
        "remote K/V in: one token over N - 1",
        "load of whole blocks",
        "load with a partial last block",
        "load of a prompt shorter than a block",
        "load after a local hit",
        "abort WAITING_FOR_REMOTE_KVS",
        "P told to let go",
        "finish error",
        "preemption",
    ]
    cases += [
        f"receive {how}, policy {policy}"
        for how in ("ok", "fail", "lost blocks")
        for policy in ("fail", "recompute")
    ]
    for case in cases:
        assert seen[case] > 0, f"no decode workload among the first 300 reached {case!r}"
