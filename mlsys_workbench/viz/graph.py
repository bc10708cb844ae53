"""Draw a DAG (a training graph, an ONNX model, an IR module) as a layered plotly figure.

Input is plain data:
  nodes: dicts with "id" and optionally "label", "group" (colour: a phase such as forward /
         backward / update / swap-out / swap-in, or an op kind), "hover" (HTML text), "scope"
         (a "/"-separated name scope used for collapsing).
  edges: dicts with "source", "target" and optionally "kind" ("data" or "control") and "hover"
         (e.g. the tensor's shape, shown when hovering the edge's midpoint).
Above `WEBGL_ABOVE` nodes the traces switch to WebGL (scattergl) so ~7,000-node graphs stay
usable; `collapse_scopes` folds name scopes into cluster nodes first.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import networkx as nx
import plotly.graph_objects as go

from .layout import layered_layout

WEBGL_ABOVE = 1000
PHASE_COLOURS = {
    "forward": "#4e79a7",
    "backward": "#e15759",
    "update": "#59a14f",
    "swap-out": "#f28e2b",
    "swap-in": "#b07aa1",
    "input": "#9c755f",
    "constant": "#bab0ac",
    "variable": "#76b7b2",
}
PALETTE = ["#edc948", "#ff9da7", "#86bcb6", "#d37295", "#a0cbe8", "#8cd17d", "#b6992d"]


def _check(nodes, edges):
    ids = [node["id"] for node in nodes]
    if len(set(ids)) != len(ids):
        twice = sorted(n for n, c in Counter(ids).items() if c > 1)[:5]
        raise ValueError(f"node ids must be unique; repeated: {twice}")
    known = set(ids)
    for edge in edges:
        for end in ("source", "target"):
            if edge[end] not in known:
                raise ValueError(f"edge {edge['source']!r} -> {edge['target']!r}: "
                                 f"unknown {end} node {edge[end]!r}")


def collapse_scopes(nodes, edges, depth: int = 1, expand=()):
    """Fold every name scope at ``depth`` into one cluster node, except scopes in ``expand``.

    A node named "a/b/c" with depth=1 joins cluster "a" unless "a" is expanded, in which case it
    joins "a/b" (expanding one level at a time) or stays itself. Returns (nodes, edges) in the
    same plain format; a cluster's hover lists its size and most common groups.
    """
    expand = set(expand)

    def owner(node):
        parts = node.get("scope", node["id"]).split("/")
        level = depth
        while level < len(parts) and "/".join(parts[:level]) in expand:
            level += 1
        return "/".join(parts[:level]) if level < len(parts) else node["id"]

    members = defaultdict(list)
    for node in nodes:
        members[owner(node)].append(node)
    new_nodes, where = [], {}
    for name, group in members.items():
        for node in group:
            where[node["id"]] = name
        if len(group) == 1 and group[0]["id"] == name:
            new_nodes.append(group[0])
            continue
        kinds = Counter(node.get("group", "op") for node in group)
        top = ", ".join(f"{k} {c}" for k, c in kinds.most_common(3))
        new_nodes.append({
            "id": name, "label": f"{name.rsplit('/', 1)[-1]} ({len(group)})",
            "group": kinds.most_common(1)[0][0], "scope": name, "cluster": True,
            "size": len(group), "hover": f"<b>{name}</b><br>{len(group)} ops: {top}",
        })
    seen, new_edges = set(), []
    for edge in edges:
        source, target = where[edge["source"]], where[edge["target"]]
        key = (source, target, edge.get("kind", "data"))
        if source != target and key not in seen:
            seen.add(key)
            new_edges.append({**edge, "source": source, "target": target})
    return new_nodes, new_edges


def _colour_map(groups):
    colours, spare = {}, iter(PALETTE * (1 + len(groups) // len(PALETTE)))
    for group in groups:
        colours[group] = PHASE_COLOURS.get(group) or next(spare)
    return colours


def _edge_trace(edges, pos, kind, scatter, dimmed):
    xs, ys = [], []
    for edge in edges:
        (x0, y0), (x1, y1) = pos[edge["source"]], pos[edge["target"]]
        xs += [x0, x1, None]
        ys += [y0, y1, None]
    colour = "#c7c7c7" if dimmed else ("#f28e2b" if kind == "control" else "#999")
    return scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", name=f"{kind} edges",
                   line={"width": 1, "color": colour,
                         "dash": "dash" if kind == "control" else "solid"},
                   showlegend=kind == "control")


def graph_figure(nodes, edges, *, title: str = "", highlight=None, height: int | None = None,
                 positions: dict | None = None) -> go.Figure:
    """A layered top-to-bottom drawing; nodes coloured by "group", one legend entry per group.

    ``highlight``: ids to emphasise (e.g. inserted swap nodes); everything else is dimmed.
    ``positions``: a precomputed layout (id -> (x, y)) to reuse between redraws.
    """
    _check(nodes, edges)
    graph = nx.DiGraph()
    graph.add_nodes_from(node["id"] for node in nodes)
    graph.add_edges_from((e["source"], e["target"]) for e in edges)
    pos = positions or layered_layout(graph)
    scatter = go.Scattergl if len(nodes) > WEBGL_ABOVE else go.Scatter
    highlight = set(highlight or ())
    fig = go.Figure()
    for kind in ("data", "control"):
        chosen = [e for e in edges if e.get("kind", "data") == kind]
        if not chosen:
            continue
        lit = [e for e in chosen if e["source"] in highlight or e["target"] in highlight]
        rest = [e for e in chosen if not (e["source"] in highlight or e["target"] in highlight)]
        fig.add_trace(_edge_trace(rest, pos, kind, scatter, dimmed=bool(highlight)))
        if lit:
            fig.add_trace(_edge_trace(lit, pos, kind, scatter, dimmed=False))
    hover_edges = [e for e in edges if e.get("hover")]
    if hover_edges:  # invisible midpoints carry the edge hover (tensor shapes)
        mid = [((pos[e["source"]][0] + pos[e["target"]][0]) / 2,
                (pos[e["source"]][1] + pos[e["target"]][1]) / 2) for e in hover_edges]
        fig.add_trace(scatter(x=[m[0] for m in mid], y=[m[1] for m in mid], mode="markers",
                              marker={"size": 6, "color": "rgba(0,0,0,0)"}, name="tensors",
                              hovertext=[e["hover"] for e in hover_edges], hoverinfo="text",
                              showlegend=False))
    groups = list(dict.fromkeys(node.get("group", "op") for node in nodes))
    colours = _colour_map(groups)
    for group in groups:
        members = [node for node in nodes if node.get("group", "op") == group]
        opacity = [1.0 if not highlight or n["id"] in highlight else 0.25 for n in members]
        fig.add_trace(scatter(
            x=[pos[n["id"]][0] for n in members], y=[pos[n["id"]][1] for n in members],
            mode="markers", name=group, customdata=[n["id"] for n in members],
            marker={"size": [14 if n.get("cluster") else 9 for n in members],
                    "color": colours[group], "opacity": opacity,
                    "symbol": ["square" if n.get("cluster") else "circle" for n in members],
                    "line": {"width": 0.5, "color": "#333"}},
            hovertext=[n.get("hover") or n.get("label") or n["id"] for n in members],
            hoverinfo="text",
        ))
    depth = 1 + max((-y for _, y in pos.values()), default=0)
    fig.update_layout(
        title=title, showlegend=True, plot_bgcolor="white", hovermode="closest",
        height=height or int(min(2400, max(400, 28 * depth))),
        xaxis={"visible": False}, yaxis={"visible": False},
        margin={"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
    )
    return fig
