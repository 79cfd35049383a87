"""The scheduler benchmark (pdlab/tools/bench_sched.py) and the fake runner it drives."""

import pytest

from pdlab.tools.bench_sched import bench_scheduler


def test_bench_scheduler_small():
    r = bench_scheduler(num_requests=8, steps=5, block_size=4, prompt_len=6)
    assert (r["num_requests"], r["steps"], r["block_size"], r["prompt_len"]) == (8, 5, 4, 6)
    assert 0 < r["min_us"] <= r["median_us"] and r["mean_us"] > 0
    assert r["us_per_request"] == pytest.approx(r["median_us"] / 8)


@pytest.mark.parametrize(
    "kwargs", [{"num_requests": 0}, {"steps": -1}, {"block_size": 1.5}, {"prompt_len": True}]
)
def test_bench_scheduler_rejects_bad_arguments(kwargs):
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=f"{name}=.*integer >= 1"):
        bench_scheduler(**kwargs)
