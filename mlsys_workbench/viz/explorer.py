"""Explore a big graph (a ~9,000-op ResNet-50 step) by name scope: clusters that expand on demand.

`ScopeExplorer` keeps the full node and edge lists and draws them folded by `collapse_scopes`;
`figure(expand=...)` returns a plain plotly figure (works anywhere, also with no Jupyter), and
`widget()` wraps it in ipywidgets: a list of the scopes to open, a choice of what to do with
constants and variable reads (side column, hidden, inline), and an Output the figure is redrawn
into. Layouts are cached per expansion, and a new one starts from the previous positions (an
expanded cluster's members start where the cluster was), so the picture does not jump around.
"""

from __future__ import annotations

import plotly.graph_objects as go

from .graph import collapse_scopes, graph_figure, graph_layout


class ScopeExplorer:
    """A graph folded to `depth` name-scope parts, expandable scope by scope."""

    def __init__(self, nodes, edges, depth: int = 1, title: str = ""):
        self.nodes, self.edges, self.depth, self.title = list(nodes), list(edges), depth, title
        self._layouts: dict[frozenset, dict] = {}
        self._last: dict = {}

    def view(self, expand=()):
        """(nodes, edges) folded with the scopes in ``expand`` opened."""
        return collapse_scopes(self.nodes, self.edges, self.depth, expand=set(expand))

    def clusters(self, expand=()) -> list[str]:
        """Cluster ids shown for this expansion (the scopes that can be opened next)."""
        nodes, _ = self.view(expand)
        return sorted(n["id"] for n in nodes if n.get("cluster") and not n.get("aside"))

    def positions(self, nodes, edges, key) -> dict:
        if key not in self._layouts:
            seed = dict(self._last)
            for node in nodes:  # a member of a just-opened cluster starts where the cluster was
                if node["id"] not in seed:
                    parent = next((c for c in self._last
                                   if node.get("scope", node["id"]).startswith(c + "/")), None)
                    if parent:
                        seed[node["id"]] = self._last[parent]
            self._layouts[key] = graph_layout(nodes, edges, initial=seed or None)
        self._last = self._layouts[key]
        return self._last

    def figure(self, expand=(), aside: str = "column", highlight=None) -> go.Figure:
        nodes, edges = self.view(expand)
        if aside == "inline":
            nodes = [{**n, "aside": False} for n in nodes]
        pos = self.positions(nodes, edges, (frozenset(expand), aside == "inline"))
        count = sum(n.get("size", 1) for n in nodes)
        title = f"{self.title} — {len(nodes)} boxes for {count} ops" if self.title else ""
        return graph_figure(nodes, edges, title=title, highlight=highlight, positions=pos,
                            aside=aside)

    def widget(self, expand=(), aside: str = "column"):
        """An ipywidgets box: scopes to open, what to do with constants and reads, the figure.
        Needs ipywidgets; without a front end it is an inert object (nothing fails)."""
        import ipywidgets as widgets
        from IPython.display import display

        opened = sorted(expand)
        scopes = widgets.SelectMultiple(options=sorted(set(self.clusters(opened)) | set(opened)),
                                        value=opened, rows=8, description="open scopes")
        side = widgets.ToggleButtons(options=[("side column", "column"), ("hidden", "hide"),
                                              ("inline", "inline")], value=aside,
                                     description="constants, reads")
        out = widgets.Output()
        busy = {"now": False}
        box = widgets.VBox([widgets.HBox([scopes, side]), out])

        def redraw(_=None):
            if busy["now"]:
                return
            busy["now"] = True
            try:
                chosen = list(scopes.value)
                fig = self.figure(chosen, side.value)
                scopes.options = sorted(set(self.clusters(chosen)) | set(chosen))
                scopes.value = tuple(chosen)
                box.figure = fig
                with out:
                    out.clear_output(wait=True)
                    display(fig)
            finally:
                busy["now"] = False

        scopes.observe(redraw, names="value")
        side.observe(redraw, names="value")
        redraw()
        return box


def scope_explorer(nodes, edges, depth: int = 1, title: str = "", expand=()):
    """The ipywidgets explorer of a graph folded by name scope (see ScopeExplorer.widget)."""
    return ScopeExplorer(nodes, edges, depth, title).widget(expand)
