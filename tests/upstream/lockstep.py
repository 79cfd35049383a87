"""Drive vLLM's scheduler and pdlab's side by side on one workload and compare every step.

Each step: the workload's arrivals and aborts go to both twins; both ``schedule()``; the
two reports (which requests, how many tokens, computed counts, block ids, preemptions,
the connector's receives) must be equal; one pretend model runner samples for both (a
request whose known tokens are all computed gets one token, from the workload's seeded
sampler) and, on the decode side, one pretend connector worker ends each receive as the
workload says; both ``update_from_output``; their outputs (new tokens, finish reasons)
and then their whole state (every request's status, computed count, tokens, preemptions
and blocks; the queues; the free block count, the free queue in eviction order, which
blocks are cached, every reference count; the prefix-cache counters; what each
connector's ``request_finished`` was given) must be equal.

The first difference raises :class:`Divergence`, whose message holds the seed, the step,
the phase, both sides' values, and one command that replays the workload with a report of
every step (``PDLAB_UPSTREAM_TRACE=1``).
"""

from __future__ import annotations

import os
import pprint

from twin_pdlab import PdlabTwin
from twin_vllm import VllmTwin
from workload import KVReport, Workload, make_workload

MAX_STEPS = 400  # every workload finishes well before this (a test asserts it)
TEST_FILES = {"local": "test_sched_local.py", "decode": "test_sched_decode.py"}


class Divergence(AssertionError):
    pass


def replay_command(w: Workload) -> str:
    test = f"tests/upstream/{TEST_FILES[w.kind]}::test_{w.kind}_workload[{w.seed}]"
    return f"PDLAB_UPSTREAM_TRACE=1 .venv-upstream/bin/python -m pytest -m upstream -s '{test}'"


def _diff(w: Workload, step: int, phase: str, ours, theirs) -> None:
    if ours == theirs:
        return
    detail = ""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        keys = [k for k in ours if ours.get(k) != theirs.get(k)]
        detail = "differing keys: " + ", ".join(map(str, keys)) + "\n"
        if all(not isinstance(ours.get(k), dict) for k in keys):
            ours = {k: ours.get(k) for k in keys}
            theirs = {k: theirs.get(k) for k in keys}
        else:
            ours, theirs = {k: ours.get(k) for k in keys}, {k: theirs.get(k) for k in keys}
    raise Divergence(
        f"pdlab and vLLM differ: {w.kind} workload seed={w.seed}, step {step}, {phase}\n"
        f"config: {w.config}\n{detail}"
        f"pdlab: {pprint.pformat(ours, width=100, compact=True)}\n"
        f"vLLM:  {pprint.pformat(theirs, width=100, compact=True)}\n"
        f"replay: {replay_command(w)}"
    )


class Worker:
    """The connector's worker half for both twins: a receive started by ``schedule()``
    ends after the workload's delay, landed, failed as a whole (reported in
    ``failed_recving``, and in ``finished_recving`` as vLLM's output aggregator reports
    every failed receive), or with its blocks from some index on lost
    (``invalid_block_ids``)."""

    def __init__(self, w: Workload) -> None:
        self.w = w
        self.inflight: dict[str, list] = {}  # req_id -> [steps left, local block ids]

    def start(self, loads: dict) -> None:
        for rid, block_ids in loads.items():
            if block_ids is not None:
                self.inflight[rid] = [self.w.recv_outcome[rid][0], block_ids]

    def report(self) -> KVReport:
        done, failed, invalid = set(), set(), set()
        for rid, entry in list(self.inflight.items()):
            if entry[0] > 0:
                entry[0] -= 1
                continue
            del self.inflight[rid]
            done.add(rid)
            outcome = self.w.recv_outcome[rid][1]
            if outcome == "fail":
                failed.add(rid)
            elif outcome != "ok" and entry[1]:
                invalid.update(entry[1][min(outcome, len(entry[1]) - 1) :])
        return KVReport(frozenset(done), frozenset(failed), frozenset(invalid))


def run(seed: int, kind: str, pdlab_cls=PdlabTwin) -> int:
    """Run one workload on both twins; raises :class:`Divergence` at the first
    difference. Returns the number of steps."""
    w = make_workload(seed, kind)
    trace = os.environ.get("PDLAB_UPSTREAM_TRACE") == "1"
    if trace:
        print(f"\n{kind} workload seed={seed}\nconfig: {w.config}")
    ours, theirs = pdlab_cls(w.config), VllmTwin(w.config)
    specs = {s.req_id: s for specs in w.arrivals.values() for s in specs}
    worker = Worker(w) if w.config.decode else None
    last_event = max([*w.arrivals, *w.aborts, 0])
    for step in range(MAX_STEPS):
        for spec in w.arrivals.get(step, ()):
            ours.add(spec)
            theirs.add(spec)
        for rid in w.aborts.get(step, ()):
            _diff(w, step, f"abort({rid!r})", ours.abort(rid), theirs.abort(rid))
        if step > last_event and not ours.sched.has_requests() and not theirs.sched.has_requests():
            return step
        so_ours, sched_ours = ours.schedule()
        so_theirs, sched_theirs = theirs.schedule()
        _diff(w, step, "schedule()", sched_ours, sched_theirs)
        sampled = {}
        for rid in so_ours.num_scheduled_tokens:
            r = ours.request(rid)
            if r.num_computed_tokens >= r.num_tokens:
                sampled[rid] = w.sample(specs[rid], r.num_tokens)
        kv = None
        if worker is not None:
            worker.start(sched_ours.loads)
            kv = worker.report()
        out_ours, out_theirs = ours.update(so_ours, sampled, kv), theirs.update(so_theirs, sampled, kv)
        _diff(w, step, "update_from_output() outputs", out_ours, out_theirs)
        st_ours, st_theirs = ours.state(), theirs.state()
        _diff(w, step, "state after the step", st_ours, st_theirs)
        if trace:
            print(f"step {step}: {sched_ours}\n  sampled {sampled} kv {kv}\n  outputs {out_ours}")
            print(f"  {pprint.pformat(st_ours, width=100)}")
    raise Divergence(
        f"{kind} workload seed={seed} did not finish in {MAX_STEPS} steps on either side\n"
        f"replay: {replay_command(w)}"
    )
