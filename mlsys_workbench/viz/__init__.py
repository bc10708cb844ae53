"""Pictures shared by both kits: graph layout and drawing, lifetimes and memory timelines, IR
side by side and loop nests.

The kits hand these functions plain data (dicts of nodes and edges, lists of intervals, series of
numbers); nothing here knows TensorFlow or xDSL.  Every function returns a plotly figure, which
works in JupyterLab, in a plain Python process and in exported HTML alike; the IR side-by-side
view is self-contained HTML with a few lines of JS instead (plotly has no linked text panes).
The JupyterLab controls (`animation_widget`, `ScopeExplorer.widget`) are ipywidgets around a
plotly FigureWidget; without a front end they are inert objects whose figures still update.
"""

from .animation import animation_widget, frame_positions, frame_updates, lifetime_animation
from .explorer import ScopeExplorer, scope_explorer
from .graph import collapse_scopes, graph_figure, graph_layout, rewrite_figure
from .ir import IRSideBySide, ir_panes, ir_side_by_side
from .layout import layered_layout, levels
from .loopnest import loopnest_figure
from .memory import (
    compare_steps,
    human_bytes,
    lifetime_chart,
    lifetimes_and_memory,
    memory_timeline,
)

__all__ = [
    "collapse_scopes",
    "compare_steps",
    "graph_layout",
    "rewrite_figure",
    "ScopeExplorer",
    "scope_explorer",
    "animation_widget",
    "frame_positions",
    "frame_updates",
    "graph_figure",
    "IRSideBySide",
    "ir_panes",
    "ir_side_by_side",
    "layered_layout",
    "levels",
    "loopnest_figure",
    "human_bytes",
    "lifetime_animation",
    "lifetime_chart",
    "lifetimes_and_memory",
    "memory_timeline",
]
