"""The simulations the tour's chapter 7 shows, and when they start: ``pdlab sim``'s grid on the
H200 profile and the same under MTP. They do not depend on the prompt and import no torch, so
``pdlab tour`` starts them in a child process (:mod:`pdlab.sim.background`) before it imports
torch (:func:`before_imports`). vLLM has no counterpart.
"""

from __future__ import annotations

import argparse
from typing import Any

from pdlab.sim.background import BackgroundGrids, Grid
from pdlab.sim.simulator import SimConfig

MTP_BASE = SimConfig(num_speculative_tokens=1)
MTP_ROUTINGS = ("v2", "pcp")
MTP_DESIGNS = ("recompute",)  # the MTP rows the closing paragraph reads
SIM_GRIDS = (Grid(SimConfig()), Grid(MTP_BASE, designs=MTP_DESIGNS, routings=MTP_ROUTINGS))
_SIM_ROWS: list[list[dict[str, Any]]] = []
_STARTED: list[BackgroundGrids] = []  # started by before_imports, taken by take_started


def shows_chapter7(args: argparse.Namespace) -> bool:
    return getattr(args, "chapter", None) in (None, 7) and getattr(args, "plots", None) is None


def before_imports(args: argparse.Namespace) -> None:
    """What ``pdlab tour`` does before torch loads: start chapter 7's grids, if it shows
    them (with ``--plots`` the chapter runs them here, for the figures)."""
    if shows_chapter7(args) and not _STARTED:
        started = start_sims()
        if started is not None:
            _STARTED.append(started)


def take_started() -> BackgroundGrids | None:
    """The grids :func:`before_imports` started, if any (each is taken once)."""
    return _STARTED.pop() if _STARTED else None


def close_started() -> None:
    """Stop grids :func:`before_imports` started that the tour never took (it failed or
    was interrupted first): the CLI calls this when the command ends."""
    while _STARTED:
        _STARTED.pop().close()


def start_sims() -> BackgroundGrids | None:
    """Start the chapter's grids on another core, unless this process already has their
    rows; :func:`sim_rows` reads them."""
    return None if _SIM_ROWS else BackgroundGrids(SIM_GRIDS)


def sim_rows(pending: BackgroundGrids | None = None) -> list[list[dict[str, Any]]]:
    """The rows of :data:`SIM_GRIDS`: from ``pending``, or run here."""
    if not _SIM_ROWS:
        _SIM_ROWS.extend(pending.rows() if pending else [g.run() for g in SIM_GRIDS])
    return _SIM_ROWS
