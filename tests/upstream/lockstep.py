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

With speculative decoding (the ``*_spec`` kinds) the reports also hold each step's
``scheduled_spec_decode_tokens`` (placeholders included), the pretend runner verifies
drafts greedily (accepted drafts, then one token: ``Workload.verify``), the state holds
every request's pending drafts, and after each step both twins get the same drafts
(``Workload.draft``, K per scheduled request) through ``update_draft_token_ids``.

The first difference raises :class:`Divergence`, whose message holds the seed, the step,
the phase, both sides' values, and one command that replays the workload with a report of
every step (``PDLAB_UPSTREAM_TRACE=1``).
"""

from __future__ import annotations

import os
import pprint
from collections import Counter

from twin_pdlab import PdlabTwin, pdlab_routing
from twin_vllm import VllmTwin, upstream_switches, vllm_routing
from workload import (
    KVReport,
    RoutingConfig,
    Scheduled,
    Workload,
    make_routing_batch,
    make_workload,
)

from pdlab.engine.config import MLA_BACKENDS
from pdlab.engine.math_utils import cdiv

MAX_STEPS = 1000  # every workload finishes before this (a test asserts it)
TEST_FILES = {
    "local": "test_sched_local.py",
    "decode": "test_sched_decode.py",
    "local_spec": "test_sched_spec.py",
    "decode_spec": "test_sched_spec.py",
}


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
        detail = "differing: " + ", ".join(map(str, keys)) + "\n"
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
    (``invalid_block_ids``).

    At most one receive ends per step. Where several end together, vLLM frees their
    blocks (an aborted request's, or a failed one's under "fail") in the iteration order
    of a ``set`` of request ids, which follows string hashing and so changes from one
    process to the next; pdlab does the same. One at a time, no outcome depends on it.
    """

    def __init__(self, w: Workload) -> None:
        self.w = w
        self.inflight: dict[str, list] = {}  # req_id -> [steps left, local block ids]

    def start(self, loads: dict) -> None:
        for rid, block_ids in loads.items():
            if block_ids is not None:
                self.inflight[rid] = [self.w.recv_outcome[rid][0], block_ids]

    def report(self) -> KVReport:
        done = [rid for rid, entry in self.inflight.items() if entry[0] == 0][:1]
        for entry in self.inflight.values():
            entry[0] = max(entry[0] - 1, 0)
        if not done:
            return KVReport()
        rid = done[0]
        _, block_ids = self.inflight.pop(rid)
        outcome = self.w.recv_outcome[rid][1]
        failed, invalid = frozenset(), frozenset()
        if outcome == "fail":
            failed = frozenset(done)
        elif outcome != "ok" and block_ids:
            invalid = frozenset(block_ids[min(outcome, len(block_ids) - 1) :])
        return KVReport(frozenset(done), failed, invalid)


def _pdlab(w: Workload, step: int, phase: str, twins: tuple, call, *args):
    """A pdlab call; an exception where vLLM went on is a divergence too."""
    try:
        return call(*args)
    except Exception as e:
        try:
            ours = twins[0].state()
        except Exception as again:
            ours = f"(its state cannot be read either: {again!r})"
        raise Divergence(
            f"pdlab raised where vLLM did not: {w.kind} workload seed={w.seed}, step {step}, "
            f"{phase}\nconfig: {w.config}\npdlab: {type(e).__name__}: {e}\n"
            f"pdlab's state: {pprint.pformat(ours, width=100, compact=True)}\n"
            f"vLLM's state:  {pprint.pformat(twins[1].state(), width=100, compact=True)}\n"
            f"replay: {replay_command(w)}"
        ) from e


def run(seed: int, kind: str, pdlab_cls=PdlabTwin, vllm_twin=VllmTwin) -> tuple[int, Counter]:
    """Run one workload on both twins; raises :class:`Divergence` at the first
    difference. Returns the number of steps and what the workload exercised
    (:func:`features`)."""
    w = make_workload(seed, kind)
    trace = os.environ.get("PDLAB_UPSTREAM_TRACE") == "1"
    if trace:
        print(f"\n{kind} workload seed={seed}\nconfig: {w.config}")
    seen: Counter = Counter()
    ours, theirs = pdlab_cls(w.config), vllm_twin(w.config)
    twins = (ours, theirs)
    specs = {s.req_id: s for specs in w.arrivals.values() for s in specs}
    worker = Worker(w) if w.config.decode else None
    last_event = max([*w.arrivals, *w.aborts, 0])
    hits = 0
    for step in range(MAX_STEPS):
        for spec in w.arrivals.get(step, ()):
            _pdlab(w, step, f"add_request({spec.req_id!r})", twins, ours.add, spec)
            theirs.add(spec)
        for rid in w.aborts.get(step, ()):
            request = ours.sched.requests.get(rid)
            seen[f"abort {request.status.name if request else 'unknown or finished'}"] += 1
            mine = _pdlab(w, step, f"abort({rid!r})", twins, ours.abort, rid)
            _diff(w, step, f"abort({rid!r})", mine, theirs.abort(rid))
        if step > last_event and not ours.sched.has_requests() and not theirs.sched.has_requests():
            return step, seen
        so_ours, sched_ours = _pdlab(w, step, "schedule()", twins, ours.schedule)
        so_theirs, sched_theirs = theirs.schedule()
        _diff(w, step, "schedule()", sched_ours, sched_theirs)
        features(w, ours, sched_ours, seen)
        sampled = {}
        for rid in so_ours.num_scheduled_tokens:
            r = ours.request(rid)
            if r.num_computed_tokens >= r.num_tokens:
                drafts = so_ours.scheduled_spec_decode_tokens.get(rid, ())
                sampled[rid] = w.verify(specs[rid], r.num_tokens, drafts)
        # What the runner knows of each row after the step: the drafter's positions.
        known = {
            rid: ours.request(rid).num_tokens + len(sampled.get(rid, ()))
            for rid in so_ours.num_scheduled_tokens
        }
        kv = None
        if worker is not None:
            worker.start(sched_ours.loads)
            kv = worker.report()
            for rid in kv.finished_recving:
                outcome = w.recv_outcome[rid][1]
                kind_ = outcome if isinstance(outcome, str) else "lost blocks"
                seen[f"receive {kind_}, policy {w.config.policy}"] += 1
        phase = "update_from_output()"
        out_ours = _pdlab(w, step, phase, twins, ours.update, so_ours, sampled, kv)
        out_theirs = theirs.update(so_theirs, sampled, kv)
        _diff(w, step, f"{phase} outputs", out_ours, out_theirs)
        for _, _, reason in out_ours:
            seen[f"finish {reason}"] += reason is not None
        k = w.config.num_spec_tokens
        if k and known:
            drafts = {
                rid: [w.draft(specs[rid], n + j) for j in range(k)] for rid, n in known.items()
            }
            _pdlab(w, step, "update_draft_token_ids()", twins, ours.drafts, drafts)
            theirs.drafts(drafts)
        st_ours, st_theirs = ours.state(), theirs.state()
        _diff(w, step, "state after the step", st_ours, st_theirs)
        spec_features(so_ours, sampled, w, seen)
        seen["prefix-cache hit"] += st_ours["prefix_cache_stats"][2] > hits
        hits = st_ours["prefix_cache_stats"][2]
        if trace:
            print(f"step {step}: {sched_ours}\n  sampled {sampled} kv {kv}\n  outputs {out_ours}")
            print(f"  {pprint.pformat(st_ours, width=100, compact=True)}")
    raise Divergence(
        f"{kind} workload seed={seed} did not finish in {MAX_STEPS} steps on either side\n"
        f"replay: {replay_command(w)}"
    )


def spec_features(so, sampled: dict, w: Workload, seen: Counter) -> None:
    """Count what speculative decoding exercised in this step."""
    k = w.config.num_spec_tokens
    for rid, drafts in so.scheduled_spec_decode_tokens.items():
        if all(d == -1 for d in drafts):
            seen["padded new row"] += 1
            if w.config.decode and so.num_scheduled_tokens[rid] == 1 + k:
                seen["D: 1 + K over N - 1, placeholders"] += any(
                    r.req_id == rid and r.num_computed_tokens > 0 for r in so.scheduled_new_reqs
                )
        elif len(drafts) < k:
            seen["drafts cut"] += 1
        tokens = sampled.get(rid, ())
        if tokens and len(tokens) < 1 + len(drafts):
            seen["draft rejected"] += 1
        elif tokens:
            seen["every draft accepted"] += any(d != -1 for d in drafts)


def features(w: Workload, ours: PdlabTwin, s: Scheduled, seen: Counter) -> None:
    """Count what this ``schedule()`` exercised, so that tests can check the workloads
    reach every case they are meant to (seen from pdlab's side; both sides agreed)."""
    cfg = w.config
    seen["preemption"] += len(s.preempted)
    seen["multi-module MTP"] += cfg.mtp_modules > 1
    for rid, n, kind, computed, _ in s.rows:
        r = ours.request(rid)
        if computed + n < r.num_tokens:
            seen["chunked prefill"] += 1
            if cfg.threshold and n == cfg.threshold:
                seen["long_prefill_token_threshold cut"] += 1
        if kind == "new" and r.num_preemptions:
            seen["resumed after preemption"] += 1
        if kind == "new" and r.kv_transfer_params and computed == r.num_tokens - 1:
            seen["remote K/V in: one token over N - 1"] += 1
    for rid, ids in s.loads.items():
        if ids is None:
            seen["P told to let go"] += 1
            continue
        r = ours.request(rid)
        n, bs = r.num_prompt_tokens, cfg.block_size
        seen["load of whole blocks" if n % bs == 0 else "load with a partial last block"] += 1
        seen["load of a prompt shorter than a block"] += n < bs
        seen["load after a local hit"] += len(ids) < cdiv(n, bs)


# ---- routing: every decision on one batch, across configurations ----------------------
ROUTING_TEST = "tests/upstream/test_batch_routing.py::test_routing_grid_matches_upstream"
_SWITCHES: dict = {}


def run_routing(rc: RoutingConfig, seed: int) -> dict:
    """One seeded batch (``make_routing_batch``) under one grid point: pdlab's decisions
    (``twin_pdlab.pdlab_routing``) against vLLM's (``twin_vllm.vllm_routing``): the
    interleave, the threshold, the order, ``is_prefilling``, V2's
    ``prefill_runs_as_decode`` and ``decode_graph_eligible``, the uniform decode token
    count and the graph flag, the split and each row's forward. Raises
    :class:`Divergence` naming the grid point, the seed, what differs, and a replay
    command; returns vLLM's report."""
    profile = MLA_BACKENDS[rc.backend]
    switches = _SWITCHES.get(rc.backend)
    if switches is None:
        switches = _SWITCHES[rc.backend] = upstream_switches(profile.name, profile.upstream)
    batch = make_routing_batch(seed, rc)
    theirs = vllm_routing(rc, switches, batch)
    try:
        ours = pdlab_routing(rc, batch)
    except Exception as e:
        ours = {"raised": f"{type(e).__name__}: {e}"}
    if ours != theirs:
        keys = [k for k in theirs if ours.get(k) != theirs.get(k)] or ["raised"]
        raise Divergence(
            f"pdlab and vLLM differ: routing {rc.label} batch seed={seed}\n"
            f"config: {rc}\nbatch: {batch}\ndiffering: {', '.join(keys)}\n"
            f"pdlab: {pprint.pformat({k: ours.get(k) for k in keys}, width=100)}\n"
            f"vLLM:  {pprint.pformat({k: theirs.get(k) for k in keys}, width=100)}\n"
            f"replay: .venv-upstream/bin/python -m pytest -n 0 -m upstream "
            f"'{ROUTING_TEST}[{rc.label}]'"
        )
    return theirs
