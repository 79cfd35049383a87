"""The notebooks' widgets, in one import: ``from pdlab.ui.widgets import PDExplorer``.
``lang="zh"`` gives Chinese labels; vLLM identifiers stay in English.
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
