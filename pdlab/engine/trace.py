"""Trace events: the single record of what an engine did, which every view renders.

The console tour, the widgets, the plots and the notebooks all read a :class:`Tracer`, so
what a learner sees is what the engine did, and they ask it through its query methods
(:meth:`Tracer.step_rows`, :meth:`Tracer.route_of`, ...), not by walking the events. Each
event is a typed, read-only record of one kind (:mod:`pdlab.engine.events` lists the kinds
and their fields, and names vLLM's closest equivalents).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from pdlab.engine.events import TraceEvent, event_from_dict, make_event
from pdlab.errors import PdlabLookupError


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if hasattr(v, "tolist"):
        return v.tolist()
    if hasattr(v, "name"):
        return v.name
    return str(v)


class EventSink(Protocol):
    """Where a component reports what it did: ``emit(kind, **fields)``. Each component
    takes one at construction; an engine's is :meth:`Tracer.sink`, shared with its
    runner, its attention and its connector, so every event lands in one tracer."""

    def __call__(self, kind: str, **fields: Any) -> None: ...


class InstanceSink:
    """The :class:`EventSink` of one instance of a tracer: records each event with the
    instance and ``step``, which the instance's engine advances as it steps."""

    def __init__(self, tracer: Tracer, instance: str) -> None:
        self.tracer, self.instance, self.step = tracer, instance, 0

    def __call__(self, kind: str, **fields: Any) -> None:
        self.tracer.emit(kind, self.instance, self.step, **fields)


# Kinds that make up a step's schedule and compute; the rest are a request's lifecycle.
_COMPUTE_KINDS = ("step", "route", "kernel", "sample")


class Tracer:
    """Collects events. One tracer may be shared by the P and D engines of a pair."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.events: list[TraceEvent] = []
        self.meta: dict[str, Any] = {}
        self._sinks: dict[str, InstanceSink] = {}

    def sink(self, instance: str) -> InstanceSink:
        """The sink of ``instance``: one object per instance, so a connector built before
        its engine (as :class:`~pdlab.disagg.pair.PDPair` does) shares the engine's step."""
        return self._sinks.setdefault(instance, InstanceSink(self, instance))

    def emit(self, kind: str, instance: str, step: int, **fields: Any) -> None:
        """Record one event; ``ValueError`` names an unknown kind or a missing or unknown
        field (see :func:`pdlab.engine.events.make_event`)."""
        if self.enabled:
            jsonable = {k: _jsonable(v) for k, v in fields.items()}
            self.events.append(make_event(kind, instance, step, jsonable))

    def extend(self, events: Iterable[Mapping[str, Any]]) -> None:
        """Append events (typed, or their flat records) from another tracer or process."""
        self.events.extend(event_from_dict(e) for e in events)

    # ---- queries the views use ---------------------------------------------------------
    def filter(
        self, kind: str | None = None, instance: str | None = None, **match: Any
    ) -> list[TraceEvent]:
        return [
            e
            for e in self.events
            if (kind is None or e.kind == kind)
            and (instance is None or e.instance == instance)
            and all(e.get(k) == v for k, v in match.items())
        ]

    def first(self, kind: str, instance: str | None = None, **match: Any) -> TraceEvent:
        found = self.filter(kind, instance, **match)
        if not found:
            raise PdlabLookupError("err_no_events", kind=kind, instance=instance, match=match)
        return found[0]

    def instances(self, kind: str | None = None) -> list[str]:
        """The instances with events (of ``kind``, if given), in order of appearance."""
        return list(dict.fromkeys(e.instance for e in self.filter(kind)))

    def requests(self, instance: str | None = None) -> list[str]:
        """The request ids added (on ``instance``, if given), in order, each once."""
        return list(dict.fromkeys(e["req_id"] for e in self.filter("add_request", instance)))

    def step_numbers(self, instance: str | None = None) -> list[int]:
        """The steps that scheduled work (on ``instance``, if given), in order."""
        return [e.step for e in self.filter("step", instance) if e["scheduled"]]

    def steps(self, instance: str, req_id: str) -> list[tuple[TraceEvent, dict[str, Any]]]:
        """``(step event, the request's row in it)`` for every step that scheduled
        ``req_id`` on ``instance``, in order."""
        return [
            (e, r)
            for e in self.filter("step", instance)
            for r in e["scheduled"]
            if r["req_id"] == req_id
        ]

    def step_rows(
        self, instance: str | None = None, step: int | None = None
    ) -> list[dict[str, Any]]:
        """One row per (step, request scheduled in it), on ``instance`` and at ``step`` if
        given: the step event's row (``num_computed_tokens_before``, ...) plus its
        ``instance`` and ``step``, where attention sent it (``path`` and ``forward``, empty
        when no route was recorded), its ``query_len``, the token ``sampled`` (or None)
        and every token the step sampled for it (``sampled_tokens``: the accepted drafts
        and one more, under speculative decoding)."""
        at = {} if step is None else {"step": step}
        routes = {
            (e.instance, e.step, e["req_id"]): e for e in self.filter("route", instance, **at)
        }
        # A verifying row (speculative decoding) samples up to 1 + K tokens in one step.
        samples: dict[tuple[str, int, str], list[int]] = {}
        for e in self.filter("sample", instance, **at):
            samples.setdefault((e.instance, e.step, e["req_id"]), []).append(e["token"])
        rows = []
        for ev in self.filter("step", instance, **at):
            for r in ev["scheduled"]:
                key = (ev.instance, ev.step, r["req_id"])
                route = routes.get(key, {})
                rows.append({
                    **r, "instance": ev.instance, "step": ev.step,
                    "path": route.get("path", ""), "forward": route.get("forward", ""),
                    "query_len": route.get("query_len", r["num_scheduled_tokens"]),
                    "sampled": samples[key][0] if key in samples else None,
                    "sampled_tokens": samples.get(key, []),
                })  # fmt: skip
        return rows

    def lifecycle_events(self, instance: str, step: int) -> list[TraceEvent]:
        """The scheduler's and connector's events of one step (add_request, admit,
        preempt, finish, free, kv_transfer, ...): all but its schedule and compute."""
        return [e for e in self.filter(None, instance, step=step) if e.kind not in _COMPUTE_KINDS]

    def route_of(self, instance: str, req_id: str, step: int | None = None) -> TraceEvent:
        """The routing decision for ``req_id`` at ``step`` (default: its first computing
        step) on ``instance``."""
        at = {} if step is None else {"step": step}
        return self.first("route", instance, req_id=req_id, **at)

    def first_step(self, instance: str, req_id: str) -> int:
        """The step in which ``instance`` first computed tokens of ``req_id``."""
        return self.route_of(instance, req_id).step

    def kernels(self, instance: str, step: int, layer: int | None = None) -> list[TraceEvent]:
        """The kernel calls of one step of one instance (of one layer, if given)."""
        return [
            e
            for e in self.filter("kernel", instance, step=step)
            if layer is None or e["layer"] == layer
        ]

    def num_layers(self, instance: str) -> int:
        """How many layers called kernels on ``instance``."""
        return len({e["layer"] for e in self.filter("kernel", instance)})

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    # ---- persistence ----------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        data = {"meta": _jsonable(self.meta), "events": [dict(e) for e in self.events]}
        p.write_text(json.dumps(data, indent=1, ensure_ascii=False))
        return p

    @classmethod
    def load(cls, path: str | Path) -> Tracer:
        """A saved trace, its events back in their types."""
        data = json.loads(Path(path).read_text())
        t = cls()
        t.meta = data.get("meta", {})
        t.extend(data["events"])
        return t
