"""The notebooks' widgets, in one import: ``from pdlab.ui.widgets import PDExplorer``.

* :class:`~pdlab.ui.block_pool_view.BlockPoolExplorer`: a live block pool and scheduler;
* :class:`~pdlab.ui.trace_views.StepPlayer` and :func:`~pdlab.ui.trace_views.trace_panels`:
  views of a trace;
* :class:`~pdlab.ui.pd_explorer.PDExplorer`: D's first step, rerun as the controls change;
* :class:`~pdlab.ui.sim_widget.SimExplorer`: ``pdlab sim`` rerun as the controls change.

Everything shown is read from a trace or from pdlab objects, never typed in. ``lang="zh"``
gives Chinese labels (:mod:`pdlab.catalog`); vLLM identifiers stay in English. Formatting
helpers live in :mod:`pdlab.ui.fmt`, the demonstration runner in :mod:`pdlab.demo`.
"""

from pdlab.ui.block_pool_view import BlockPoolExplorer, pool_state
from pdlab.ui.pd_explorer import PDExplorer, route_text
from pdlab.ui.sim_widget import SimExplorer
from pdlab.ui.trace_views import StepPlayer, trace_panels

__all__ = [
    "BlockPoolExplorer",
    "PDExplorer",
    "SimExplorer",
    "StepPlayer",
    "pool_state",
    "route_text",
    "trace_panels",
]
