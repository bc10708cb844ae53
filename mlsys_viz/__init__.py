"""The floor: pictures and units shared by the kits, importing neither kit.

Pictures: graph layout and drawing, lifetimes and memory timelines, IR side by side, loop nests
and volumes. The kits hand these functions plain data (dicts of nodes and edges, lists of
intervals, series of numbers, arrays); nothing here knows TensorFlow, xDSL or a kit. Every
drawing function returns a plotly figure, which works in JupyterLab, in a plain Python process
and in exported HTML alike; the IR side-by-side view is self-contained HTML with a few lines of JS
instead (plotly has no linked text panes). The JupyterLab controls (`animation_widget`,
`ScopeExplorer.widget`) are ipywidgets around a plotly FigureWidget; without a front end they are
inert objects whose figures still update.

Units (`mlsys_viz.units`): numbers as people read them, for the kits' plain-data views.

The names below load their module on first use (module `__getattr__`), so `import mlsys_viz`
and `import mlsys_viz.units` pull in no plotting library: a kit can use the units at import
time and draw only when asked.
"""

import importlib

# public name -> the submodule defining it
_HOME = {
    "animation_widget": "animation", "frame_positions": "animation",
    "frame_updates": "animation", "lifetime_animation": "animation",
    "ScopeExplorer": "explorer", "scope_explorer": "explorer",
    "collapse_scopes": "graph", "graph_figure": "graph", "graph_layout": "graph",
    "rewrite_figure": "graph",
    "IRSideBySide": "ir", "ir_panes": "ir", "ir_side_by_side": "ir",
    "layered_layout": "layout", "levels": "layout",
    "loopnest_figure": "loopnest",
    "compare_steps": "memory", "lifetime_chart": "memory", "lifetimes_and_memory": "memory",
    "memory_timeline": "memory",
    "human_bytes": "units",
}

__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name in _HOME:
        value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
        globals()[name] = value          # later look-ups skip __getattr__
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_HOME))
