"""The trace: typed events (one type per kind, checked at emit time), read as mappings,
saved and loaded in their types; the per-instance sink; the queries views use."""

from __future__ import annotations

import dataclasses
import pickle
import re
from pathlib import Path

import pytest

from pdlab.disagg.pair import PDPair
from pdlab.engine.config import CacheConfig, ModelConfig, SchedulerConfig
from pdlab.engine.distributed.kv_transfer.dist import DistTransport
from pdlab.engine.distributed.kv_transfer.transport import InProcessTransport, KVTransport
from pdlab.engine.events import EVENT_TYPES, TraceEvent, make_event
from pdlab.engine.llm_engine import LLMEngine, one_thread
from pdlab.engine.request import SamplingParams
from pdlab.engine.trace import Tracer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pair() -> PDPair:
    """A P/D pair over two prompts (the second shares a block-sized prefix with the first)."""
    with one_thread():
        p = PDPair(
            ModelConfig.tiny(), CacheConfig(block_size=4), SchedulerConfig(), backend="torch"
        )
        p.generate(["a short prompt", "a short story about"], SamplingParams(max_tokens=3))
    return p


def test_every_kind_emitted_in_the_source_has_one_type() -> None:
    emitted = set()
    for path in [*(ROOT / "pdlab").rglob("*.py"), *(ROOT / "kernels").rglob("*.py")]:
        emitted |= set(re.findall(r"\b_?emit\(\s*\"(\w+)\"", path.read_text()))
    # No kind goes untyped, and no type waits for a kind nobody emits.
    assert emitted == set(EVENT_TYPES), emitted ^ set(EVENT_TYPES)


def test_a_typo_fails_at_emit_in_one_line() -> None:
    t = Tracer()
    with pytest.raises(ValueError, match=r"kind='fre' is unknown") as e:
        t.emit("fre", "P", 1, req_id="a", block_ids=[1])
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"'free' event: field 'block_id' is unknown"):
        t.emit("free", "P", 1, req_id="a", block_id=[1])
    with pytest.raises(ValueError, match=r"'free' event: field 'block_ids' is missing"):
        t.emit("free", "P", 1, req_id="a")
    assert len(t) == 0
    t.emit("free", "P", 1, req_id="a", block_ids=(1, 2))
    assert dict(t.events[0]) == {
        "kind": "free",
        "instance": "P",
        "step": 1,
        "req_id": "a",
        "block_ids": [1, 2],
    }


def test_events_are_typed_read_only_mappings(pair: PDPair) -> None:
    events = pair.tracer.events
    assert {e.kind for e in events} >= {"step", "route", "kernel", "sample", "kv_transfer"}
    for e in events:
        assert type(e) is EVENT_TYPES[e["kind"]]
        fields = [f.name for f in dataclasses.fields(e)]
        assert list(e) == ["kind", *fields] and fields[:2] == ["instance", "step"]
        assert e.get("no such field") is None and "kind" in e
        assert e == dict(e) and len(e) == len(dict(e))
    e = events[0]
    with pytest.raises(TypeError):
        e["step"] = 5  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.step = 5  # type: ignore[misc]


def test_save_load_and_pickle_keep_the_types(pair: PDPair, tmp_path: Path) -> None:
    loaded = Tracer.load(pair.tracer.save(tmp_path / "t.json"))
    assert [type(e) for e in loaded] == [type(e) for e in pair.tracer]
    assert [dict(e) for e in loaded] == [dict(e) for e in pair.tracer]
    assert loaded.meta["block_size"] == 4
    # Across processes (pdlab/disagg/procs.py sends its events through a pipe).
    again = Tracer()
    again.extend(pickle.loads(pickle.dumps(pair.tracer.events)))
    again.extend([dict(e) for e in pair.tracer.events[:3]])
    assert again.events[-3:] == pair.tracer.events[:3]
    assert all(isinstance(e, TraceEvent) for e in again)


def test_one_sink_per_instance_shared_by_engine_and_connector(pair: PDPair) -> None:
    t = pair.tracer
    assert t.sink("P") is pair.prefill._emit is pair.p_connector.emit
    assert t.sink("D") is pair.decode._emit is pair.d_connector.emit
    assert t.sink("D") is not t.sink("P")
    # The connector's events carry the step D was in: after D allocated the blocks, no
    # later than D's first computing step, which needed the K/V.
    for x in t.filter("kv_transfer", "D"):
        wait = t.first("waiting_for_remote_kvs", "D", req_id=x["req_id"])
        assert wait.step <= x.step <= t.first_step("D", x["req_id"])
    assert pair.decode.step_count == t.sink("D").step


def test_queries_agree_with_the_events(pair: PDPair) -> None:
    t = pair.tracer
    added = [e["req_id"] for e in t.events if e.kind == "add_request" and e.instance == "P"]
    assert t.requests("P") == added == [PDPair.request_id(0), PDPair.request_id(1)]
    assert t.instances() == ["P", "D"]
    for inst in ("P", "D"):
        steps = [e for e in t.events if e.kind == "step" and e.instance == inst]
        assert t.step_numbers(inst) == [e.step for e in steps]
        rows = t.step_rows(inst)
        assert len(rows) == sum(len(e["scheduled"]) for e in steps)
        for r in rows:
            route = next(
                e
                for e in t.events
                if e.kind == "route"
                and (e.instance, e.step, e["req_id"]) == (inst, r["step"], r["req_id"])
            )
            assert (r["forward"], r["path"], r["query_len"]) == (
                route["forward"],
                route["path"],
                route["query_len"],
            )
            samples = [
                e["token"]
                for e in t.events
                if e.kind == "sample"
                and (e.instance, e.step, e["req_id"]) == (inst, r["step"], r["req_id"])
            ]
            assert r["sampled"] == (samples[0] if samples else None)
        assert t.num_layers(inst) == ModelConfig.tiny().num_hidden_layers
    rid = PDPair.request_id(0)
    route = t.route_of("D", rid)
    assert route.step == t.first_step("D", rid) == t.steps("D", rid)[0][0].step
    assert route["num_computed_tokens"] == route["num_prompt_tokens"] - 1
    # D's first computing step is the one whose schedule() found the K/V arrived.
    lifecycle = {e.kind for e in t.lifecycle_events("D", route.step)}
    assert "remote_kv_ready" in lifecycle
    assert not lifecycle & {"step", "route", "kernel", "sample"}


def test_a_disabled_tracer_records_nothing() -> None:
    with one_thread():
        eng = LLMEngine(ModelConfig.tiny(), tracer=Tracer(enabled=False), backend="torch")
        out = eng.generate("hi", SamplingParams(max_tokens=2))[0]
    assert len(out.output_token_ids) == 2 and len(eng.tracer) == 0


def test_make_event_builds_the_registered_type() -> None:
    e = make_event("sample", "local", 3, {"req_id": "r", "token": 7, "position": 4, "logit": 0.5})
    assert type(e).__name__ == "Sample" and e["token"] == 7 and e.step == 3


def test_the_two_transports_share_one_protocol() -> None:
    assert isinstance(InProcessTransport(), KVTransport)
    assert issubclass(DistTransport, KVTransport)


def test_an_engine_on_a_used_tracer_counts_its_own_steps() -> None:
    t = Tracer()
    with one_thread():
        LLMEngine(ModelConfig.tiny(), tracer=t, backend="torch").generate(
            "hi", SamplingParams(max_tokens=2)
        )
        used = t.sink("local").step
        eng = LLMEngine(ModelConfig.tiny(), tracer=t, backend="torch")
        eng.add_request("hey")
    assert used > 0 and t.events[-1].kind == "add_request"
    assert t.events[-1].step == eng.step_count == 0
