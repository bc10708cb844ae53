"""Explore a big graph (a ~9,000-op ResNet-50 step) by name scope: clusters that expand on demand.

`ScopeExplorer` keeps the full node and edge lists and draws them folded by `collapse_scopes`;
`figure(expand=...)` returns a plain plotly figure (works anywhere, also with no Jupyter), and
`widget()` wraps it in ipywidgets: a list of the scopes to open, a choice of what to do with
constants and variable reads (side column, hidden, inline), and a plotly FigureWidget on which
clicking a cluster node opens it (and, in "click closes" mode, clicking a node folds its scope
back); the logic of a click is `open_scope` / `close_scope`, plain functions of the expansion.
Layouts are cached per expansion, and a new one starts from the previous positions (an expanded
cluster's members start where the cluster was), so the picture does not jump around.
"""

from __future__ import annotations

import plotly.graph_objects as go

from .graph import collapse_scopes, graph_figure, graph_layout

READS = " (reads)"  # collapse_scopes names a scope's cluster of constants and reads so


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

    # Clicking a node: what it opens or closes (pure functions of the expansion, tested alone).

    @staticmethod
    def scope_of(node_id: str) -> str:
        """The scope a drawn node stands for: a cluster "a/b" is scope "a/b", its constants and
        reads "a/b (reads)" belong to the same scope."""
        return node_id[: -len(READS)] if node_id.endswith(READS) else node_id

    def open_scope(self, expand, node_id: str) -> list[str]:
        """The expansion after clicking ``node_id`` to open it: a cluster (or its reads) opens
        one level; a single op changes nothing."""
        expand = set(expand)
        shown = {n["id"]: n for n in self.view(expand)[0]}
        node = shown.get(node_id)
        if node is not None and node.get("cluster"):
            expand.add(self.scope_of(node_id))
        return sorted(expand)

    def close_scope(self, expand, node_id: str) -> list[str]:
        """The expansion after clicking ``node_id`` to close: the innermost opened scope that
        holds the node folds back into its cluster (and the scopes opened inside it with it)."""
        expand = set(expand)
        scope = self.scope_of(node_id)
        holders = [e for e in expand if scope.startswith(e + "/")]
        if not holders:
            return sorted(expand)
        closed = max(holders, key=len)
        return sorted(e for e in expand if e != closed and not e.startswith(closed + "/"))

    def widget(self, expand=(), aside: str = "column"):
        """An ipywidgets box: scopes to open, what to do with constants and reads, what a click
        does, and the figure: a plotly FigureWidget on which clicking a cluster node opens it
        (or, with "click closes", clicking a node folds its scope back).

        The box has ``figure`` (the plain figure of the current view), ``plot`` (the
        FigureWidget, None without anywidget: then the figure is redrawn into an Output),
        ``expanded`` (the scopes open now) and ``on_click(trace, points, state)``, the click
        handler. Without a front end it is an inert object (nothing fails)."""
        import ipywidgets as widgets

        opened = sorted(expand)
        scopes = widgets.SelectMultiple(options=sorted(set(self.clusters(opened)) | set(opened)),
                                        value=opened, rows=8, description="open scopes")
        side = widgets.ToggleButtons(options=[("side column", "column"), ("hidden", "hide"),
                                              ("inline", "inline")], value=aside,
                                     description="constants, reads")
        mode = widgets.ToggleButtons(options=[("click opens", "open"), ("click closes", "close")],
                                     value="open", description="on click")
        # A FigureWidget updated in place, not an Output the figure is display()ed into: under
        # nbclient (the notebook tests) output captured by an Output widget makes nbclient send
        # comm messages on the shell channel while it waits there for the cell's reply, and now
        # and then that wait lasts the whole cell timeout (240 s in the suite) before going on
        # without an error. The Output stays only as the fallback where anywidget is missing.
        plot = _figure_widget()
        out = None if plot is not None else widgets.Output()
        busy = {"now": False}
        box = widgets.VBox([widgets.HBox([scopes, widgets.VBox([side, mode])]),
                            plot if plot is not None else out],
                           layout=widgets.Layout(width="100%"))
        box.plot, box.expanded = plot, opened

        def show(fig):
            if plot is None:
                from IPython.display import display

                with out:
                    out.clear_output(wait=True)
                    display(fig)
                return
            # Never fewer traces than before: plotly dispatches one click to every trace index
            # the figure had, and this may run from inside that loop.
            pad = [go.Scatter(x=[], y=[], showlegend=False, hoverinfo="skip")
                   for _ in range(len(plot.data) - len(fig.data))]
            plot.data = ()
            plot.add_traces(list(fig.data) + pad)
            plot.layout = fig.layout
            plot.layout.autosize = True  # fill the box (a FigureWidget is 700 px otherwise)
            for trace in plot.data:
                if trace.customdata is not None:
                    trace.on_click(on_click)

        def redraw(chosen):
            if busy["now"]:
                return
            busy["now"] = True
            try:
                chosen = sorted(chosen)
                fig = self.figure(chosen, side.value)
                scopes.options = sorted(set(self.clusters(chosen)) | set(chosen))
                scopes.value = tuple(chosen)
                box.figure, box.expanded = fig, chosen
                show(fig)
            finally:
                busy["now"] = False

        def on_click(trace, points, state=None):
            if not points.point_inds or trace.customdata is None:
                return  # plotly calls every trace's handler; only the clicked one has points
            node_id = trace.customdata[points.point_inds[0]]
            act = self.open_scope if mode.value == "open" else self.close_scope
            chosen = act(box.expanded, node_id)
            if chosen != box.expanded:
                redraw(chosen)

        scopes.observe(lambda change: redraw(change["new"]), names="value")
        side.observe(lambda _: redraw(box.expanded), names="value")
        box.on_click = on_click
        redraw(opened)
        return box


def _figure_widget():
    """An empty plotly FigureWidget, or None where it cannot be made (no anywidget)."""
    try:
        return go.FigureWidget()
    except ImportError:
        return None


def scope_explorer(nodes, edges, depth: int = 1, title: str = "", expand=()):
    """The ipywidgets explorer of a graph folded by name scope (see ScopeExplorer.widget)."""
    return ScopeExplorer(nodes, edges, depth, title).widget(expand)
