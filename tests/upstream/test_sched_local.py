"""vLLM 0.33.0's scheduler and pdlab's, in lockstep on 1000 seeded local workloads
(lockstep.py, workload.py): shared prefixes, chunked prefill, long_prefill_token_threshold,
preemption, aborts, stop tokens, prefix caching on and off."""

from collections import Counter

import pytest
from lockstep import run

pytestmark = pytest.mark.upstream
NUM_WORKLOADS = 1000


@pytest.mark.parametrize("seed", range(NUM_WORKLOADS))
def test_local_workload(seed):
    run(seed, "local")


def test_local_workloads_reach_every_case():
    """The workloads are a check only if they reach what they are meant to: counted over
    the first 300 (both sides agreed on each)."""
    seen = sum((run(seed, "local")[1] for seed in range(300)), start=Counter())
    for case in (
        "preemption",
        "resumed after preemption",
        "prefix-cache hit",
        "chunked prefill",
        "long_prefill_token_threshold cut",
        "abort RUNNING",
        "abort WAITING",
        "abort PREEMPTED",
        "finish stop",
        "finish length",
    ):
        assert seen[case] > 0, f"no local workload among the first 300 reached {case!r}"
