"""Trace events: the single record of what an engine did, which every view renders.

The console tour, the widgets, the plots and the notebooks all read a :class:`Tracer`, so
what a learner sees is what the engine did. Each event is a flat dict with ``kind``,
``instance`` (``"P"``, ``"D"`` or ``"local"``) and ``step``, plus fields of its kind:

* ``step``: the requests scheduled, each with ``num_prompt_tokens``,
  ``num_computed_tokens`` before and after, and ``num_scheduled_tokens``;
* ``route``: per request the routing decision (``path`` is ``"decode"`` or ``"prefill"``),
  the rule in force and the values it read;
* ``kernel``: a kernel call with its layer, path, backend, shapes, modelled FLOPs and bytes;
* ``sample``: a sampled token; ``kv_transfer``: blocks moved from P to D;
* scheduler events (``admit``, ``waiting_for_remote_kvs``, ``remote_kv_ready``, ``preempt``,
  ``finish``, ``free``, ...) forwarded from the scheduler's event hook.

vLLM has no single equivalent; the closest are its ``SchedulerStats``/``IterationStats``
(``vllm/v1/metrics/stats.py``) and the profiler's kernel records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol


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
    """Where a component reports what it did: ``emit(kind, **fields)``. An engine passes its
    own sink (which adds the instance and the step) to its runner, its attention and its
    connector, so every event lands in one :class:`Tracer`."""

    def __call__(self, kind: str, **fields: Any) -> None: ...


class Tracer:
    """Collects events. One tracer may be shared by the P and D engines of a pair."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.events: list[dict[str, Any]] = []
        self.meta: dict[str, Any] = {}

    def emit(self, kind: str, instance: str, step: int, **fields: Any) -> None:
        if self.enabled:
            self.events.append(
                {
                    "kind": kind,
                    "instance": instance,
                    "step": step,
                    **{k: _jsonable(v) for k, v in fields.items()},
                }
            )

    def extend(self, events: Iterable[dict[str, Any]]) -> None:
        self.events.extend(events)

    # ---- queries the views use ---------------------------------------------------------
    def filter(
        self, kind: str | None = None, instance: str | None = None, **match: Any
    ) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events
            if (kind is None or e["kind"] == kind)
            and (instance is None or e["instance"] == instance)
            and all(e.get(k) == v for k, v in match.items())
        ]

    def first(self, kind: str, instance: str | None = None, **match: Any) -> dict[str, Any]:
        found = self.filter(kind, instance, **match)
        if not found:
            raise LookupError(f"no {kind!r} event for instance={instance!r} {match}")
        return found[0]

    def steps(self, instance: str, req_id: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """``(step event, the request's row in it)`` for every step that scheduled
        ``req_id`` on ``instance``, in order."""
        return [
            (e, r)
            for e in self.filter("step", instance)
            for r in e["scheduled"]
            if r["req_id"] == req_id
        ]

    def kernels(self, instance: str, step: int, layer: int | None = None) -> list[dict[str, Any]]:
        """The kernel calls of one step of one instance (of one layer, if given)."""
        return [
            e
            for e in self.filter("kernel", instance, step=step)
            if layer is None or e["layer"] == layer
        ]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    # ---- persistence ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"meta": _jsonable(self.meta), "events": self.events}

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False))
        return p

    @classmethod
    def load(cls, path: str | Path) -> Tracer:
        data = json.loads(Path(path).read_text())
        t = cls()
        t.meta, t.events = data.get("meta", {}), data["events"]
        return t
