"""Pictures shared by both kits: graph layout and drawing, lifetimes and memory timelines.

The kits hand these functions plain data (dicts of nodes and edges, lists of intervals, series of
numbers); nothing here knows TensorFlow or xDSL.  Every function returns a plotly figure, which
works in JupyterLab, in a plain Python process and in exported HTML alike.
"""

from .animation import frame_positions, lifetime_animation
from .graph import collapse_scopes, graph_figure
from .layout import layered_layout, levels
from .memory import human_bytes, lifetime_chart, lifetimes_and_memory, memory_timeline

__all__ = [
    "collapse_scopes",
    "frame_positions",
    "graph_figure",
    "layered_layout",
    "levels",
    "human_bytes",
    "lifetime_animation",
    "lifetime_chart",
    "lifetimes_and_memory",
    "memory_timeline",
]
