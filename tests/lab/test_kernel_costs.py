"""The lab prices the engine's kernel events (``pdlab/sim/kernel_costs.py``).

The engine records each kernel call's shapes, split count and bytes per value; the lab
prices them. The price read from the shapes must be the path model's, derived from the
model's configuration alone: D's first step over ``N - 1`` cached tokens costs, on every
layer, ``decode_path_cost`` with the split count the kernel ran (the default route) or
``prefill_path_cost`` as pdlab's kernels run it (under PCP)."""

from __future__ import annotations

import pytest

from pdlab.demo import run_demo
from pdlab.sim.kernel_costs import (
    decode_path_cost,
    kernel_event_cost,
    prefill_path_cost,
    traced_cost,
)

PROMPT = 11  # tokens: D's step sees 10 cached ones


@pytest.mark.parametrize("pcp", [1, 2])
def test_traced_step_priced_from_shapes_is_the_path_model(pcp: int) -> None:
    demo = run_demo(PROMPT, block_size=4, max_tokens=2, pcp=pcp)
    cfg, step = demo.cfg, demo.trace.first_step("D", demo.request_id)
    events = demo.trace.kernels("D", step)
    assert {e["elem_bytes"] for e in events} == {4}  # the tiny model runs in fp32
    context = len(demo.prompt_ids) - 1
    if pcp == 1:
        (splits,) = {e["shapes"]["num_kv_splits"] for e in events if e["name"] == "mla_decode"}
        layer = decode_path_cost(cfg, context, e=4, num_kv_splits=splits)
    else:
        layer = prefill_path_cost(cfg, context, 1, e=4, prefill_backend="pdlab")
    priced = traced_cost(events)
    assert priced.flops == pytest.approx(cfg.num_hidden_layers * layer.flops, rel=1e-12)
    assert priced.bytes == pytest.approx(cfg.num_hidden_layers * layer.bytes, rel=1e-12)
    assert demo.traced_cost("D").flops == priced.flops


def test_an_event_the_model_does_not_know_is_named() -> None:
    event = {"name": "softmax", "shapes": {}, "elem_bytes": 2, "layer": 0}
    with pytest.raises(ValueError, match="name='softmax' is not a kernel this model prices"):
        kernel_event_cost(event)
