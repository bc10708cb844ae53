"""Draw a DAG (a training graph, an ONNX model, an IR module) as a layered plotly figure.

Input is plain data:
  nodes: dicts with "id" and optionally "label", "group" (colour: a phase such as forward /
         backward / update / swap-out / swap-in, or an op kind), "hover" (HTML text), "scope"
         (a "/"-separated name scope used for collapsing), "aside" (true for constants and
         variable reads: drawn in a side column beside the consumer, or hidden).
  edges: dicts with "source", "target" and optionally "kind" ("data" or "control"), "hover"
         (e.g. the tensor's shape, shown when hovering the edge's midpoint), and "shape" (a
         list of dimensions) or "label" (text) written beside the edge.
As Netron and Model Explorer do, a drawing of up to `LABEL_MAX_NODES` nodes writes each node's
"label" (its op type) beside it and each edge's shape beside the edge, so a projected graph
reads without hovering; larger graphs keep the text for hovering (labels="always" forces it).
Above `WEBGL_ABOVE` nodes the traces switch to WebGL (scattergl) so ~7,000-node graphs stay
usable; `collapse_scopes` folds name scopes into cluster nodes first.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import networkx as nx
import plotly.graph_objects as go

from .layout import layered_layout
from .theme import OKABE_ITO, apply

WEBGL_ABOVE = 1000
# Above this many drawn nodes the op-type and shape labels would overlap: hover only.
LABEL_MAX_NODES = 150
LABEL_PX = 14
EDGE_LABEL_PX = 12
# Vertical room per layer: a marker, its label and an edge label between two layers.
ROW_PX, LABELLED_ROW_PX = 28, 46
# Okabe-Ito colours (colour-blind safe); greys for what is read, not computed.
_BLUE, _ORANGE, _GREEN, _VERMILLION, _PURPLE, _SKY, _BLACK, _YELLOW = OKABE_ITO
PHASE_COLOURS = {
    "forward": _BLUE,
    "backward": _VERMILLION,
    "update": _GREEN,
    "swap-out": _ORANGE,
    "swap-in": _PURPLE,
    "input": _BLACK,
    "constant": "#bbbbbb",
    "variable": "#888888",
    # op kinds (compilerkit's ONNX views); never drawn together with the phases above
    "conv / matmul": _VERMILLION,
    "elementwise": _BLUE,
    "pool / normalise": _GREEN,
    "shape": _ORANGE,
}
PALETTE = [_SKY, _PURPLE, _YELLOW, _GREEN, _ORANGE, _BLUE, _VERMILLION]


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
        name = owner(node)
        if node.get("aside") and name != node["id"]:
            name += " (reads)"  # constants and variable reads of a scope: a cluster aside
        members[name].append(node)
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
            "aside": all(node.get("aside") for node in group),
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


def _edge_trace(edges, pos, kind, scatter, dimmed, name=None):
    xs, ys = [], []
    for edge in edges:
        (x0, y0), (x1, y1) = pos[edge["source"]], pos[edge["target"]]
        xs += [x0, x1, None]
        ys += [y0, y1, None]
    colour = "#c7c7c7" if dimmed else ("#f28e2b" if kind == "control" else "#999")
    return scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", name=name or f"{kind} edges",
                   line={"width": 1 if dimmed or kind == "control" else 1.2, "color": colour,
                         "dash": "dash" if kind == "control" else "solid"},
                   showlegend=kind == "control" or name is not None)


def place_aside(graph: nx.DiGraph, aside, pos: dict) -> dict:
    """Positions for the aside nodes (constants, variable reads): a side column left of the
    drawing, each at the height of its first consumer (the highest one), so its edge is short
    and the layered drawing of the computation stays as it was. An aside node that only feeds
    other aside nodes (a weight's shape feeding a ConstantOfShape) sits just above them."""
    left = min((x for x, _ in pos.values()), default=0) - 2
    taken: dict[float, int] = defaultdict(int)
    out, placed = {}, dict(pos)
    try:  # consumers first, so a chain of aside nodes stacks up beside its consumer
        order = list(reversed(list(nx.topological_sort(graph.subgraph(aside)))))
    except nx.NetworkXUnfeasible:
        order = list(aside)
    for node in order:
        heights = [placed[c][1] for c in graph.successors(node) if c in placed]
        y = max(heights, default=0) + 0.3
        out[node] = placed[node] = (left - 0.6 * taken[y], y)
        taken[y] += 1
    return out


def graph_layout(nodes, edges, initial: dict | None = None) -> dict:
    """id -> (x, y): the layered layout of the non-aside nodes, aside nodes in a side column.
    ``initial``: earlier positions (by id) to start the layer order from (see layered_layout)."""
    aside = [n["id"] for n in nodes if n.get("aside")]
    main = nx.DiGraph()
    main.add_nodes_from(n["id"] for n in nodes if not n.get("aside"))
    main.add_edges_from((e["source"], e["target"]) for e in edges
                        if e["source"] in main and e["target"] in main)
    pos = layered_layout(main, initial=initial)
    if aside:
        full = nx.DiGraph()
        full.add_edges_from((e["source"], e["target"]) for e in edges)
        full.add_nodes_from(aside)
        pos.update(place_aside(full, aside, pos))
    return pos


def _shape_text(edge) -> str:
    if edge.get("label"):
        return str(edge["label"])
    shape = edge.get("shape")
    if shape is None:
        return ""
    return "\u00d7".join(str(d) for d in shape) if len(shape) else "scalar"


def _label_point(start, end):
    """Where an edge's shape goes: half a layer below its source, on the edge. A long edge's
    midpoint would sit beside some node in between, on top of that node's label."""
    (x0, y0), (x1, y1) = start, end
    drop = y0 - y1
    t = 0.5 if abs(drop) <= 1 else 0.5 / abs(drop)
    return x0 + (x1 - x0) * t, y0 + (y1 - y0) * t


# Text widths for the fit test: about 0.55 em per character in a sans-serif font, plus a gap.
_CHAR_PX = {LABEL_PX: 8.0, EDGE_LABEL_PX: 7.0}
# Plot widths (pixels) the fit test assumes: a notebook's output area less the legend.
PLOT_PX, PANEL_PX = 780, 380


def _fits(points, texts, side: str, px_per_unit: float, size: int) -> list[bool]:
    """Which labels fit beside their point without running into the next point on the same
    row on that side (``side`` "left" or "right"): a crowded layer keeps its text for hovering
    instead of printing words over each other."""
    rows = defaultdict(list)
    for index, (x, y) in enumerate(points):
        rows[round(y, 6)].append((x, index))
    fits = [True] * len(points)
    for row in rows.values():
        row.sort()
        for k, (x, index) in enumerate(row):
            near = row[k - 1] if side == "left" and k > 0 else (
                row[k + 1] if side == "right" and k + 1 < len(row) else None)
            if near is None:
                continue
            need = _CHAR_PX[size] * len(texts[index]) + 14
            fits[index] = abs(x - near[0]) * px_per_unit >= need
    return fits


def _place_node_labels(points, texts, px_per_unit: float) -> list[str | None]:
    """Per node, "middle left", "middle right" or None (no room): along each layer from the
    left, a label goes left of its node if it clears the previous node and label, else right
    if it clears the next node, else it is left to the hover text."""
    rows = defaultdict(list)
    for index, (x, y) in enumerate(points):
        rows[round(y, 6)].append((x * px_per_unit, index))
    side: list[str | None] = [None] * len(points)
    marker = 8.0   # half a marker and a little air, in pixels
    # The plot ends a little right of the rightmost node: a label must not run off it.
    right_edge = max((x * px_per_unit for x, _ in points), default=0.0) + 40
    for row in rows.values():
        row.sort()
        free_from = float("-inf")   # everything left of this pixel is taken
        for k, (x, index) in enumerate(row):
            if not texts[index]:
                free_from = x + marker
                continue
            need = _CHAR_PX[LABEL_PX] * len(texts[index]) + 6
            next_x = row[k + 1][0] if k + 1 < len(row) else right_edge + marker
            if x - marker - need >= free_from:
                side[index], free_from = "middle left", x + marker
            elif x + marker + need <= next_x - marker:
                side[index], free_from = "middle right", x + marker + need
            else:
                free_from = x + marker
    return side


def _px_per_unit(pos, plot_px: int) -> float:
    xs = [x for x, _ in pos.values()] or [0.0]
    return plot_px / (max(xs) - min(xs) + 1.0)


def _use_labels(labels, nodes) -> bool:
    if labels not in ("auto", "always", "never"):
        raise ValueError(f"labels must be 'auto', 'always' or 'never', got {labels!r}")
    shown = sum(not n.get("aside") for n in nodes)
    return labels == "always" or (labels == "auto" and shown <= LABEL_MAX_NODES)


def graph_traces(nodes, edges, pos, *, highlight=None, scatter=None, showlegend=True,
                 labels: bool = False, plot_px: int = PLOT_PX):
    """The traces of a graph drawing at positions ``pos`` (edges first, then one node trace per
    group). Edges touching an aside node form their own trace, hidden until its legend entry
    is clicked (a toggle that works in the browser without a kernel). ``labels``: write the
    nodes' labels (op types) and the edges' shapes beside them, where they fit in a plot
    ``plot_px`` pixels wide."""
    px_per_unit = _px_per_unit(pos, plot_px)
    scatter = scatter or (go.Scattergl if len(nodes) > WEBGL_ABOVE else go.Scatter)
    highlight = set(highlight or ())
    aside = {n["id"] for n in nodes if n.get("aside")}
    traces = []
    side = [e for e in edges if e["source"] in aside or e["target"] in aside]
    edges = [e for e in edges if not (e["source"] in aside or e["target"] in aside)]
    for kind in ("data", "control"):
        chosen = [e for e in edges if e.get("kind", "data") == kind]
        if not chosen:
            continue
        lit = [e for e in chosen if e["source"] in highlight or e["target"] in highlight]
        rest = [e for e in chosen if not (e["source"] in highlight or e["target"] in highlight)]
        traces.append(_edge_trace(rest, pos, kind, scatter, dimmed=bool(highlight)))
        if lit:
            lit_trace = _edge_trace(lit, pos, kind, scatter, dimmed=False,
                                    name=f"changed {kind} edges")
            lit_trace.line.width = 2.5
            traces.append(lit_trace)
    if side:
        trace = _edge_trace(side, pos, "data", scatter, dimmed=True,
                            name="constant / variable-read edges")
        trace.visible = "legendonly"
        traces.append(trace)
    hover_edges = [e for e in edges if e.get("hover") or (labels and _shape_text(e))]
    if hover_edges:  # midpoints carry the edge hover and, when labelled, the tensor's shape
        mid = [_label_point(pos[e["source"]], pos[e["target"]]) for e in hover_edges]
        shapes = [_shape_text(e) for e in hover_edges]
        fit = _fits(mid, shapes, "right", px_per_unit, EDGE_LABEL_PX)
        shapes = [text if ok else "" for text, ok in zip(shapes, fit, strict=True)]
        traces.append(scatter(x=[m[0] for m in mid], y=[m[1] for m in mid],
                              mode="markers+text" if labels else "markers",
                              marker={"size": 6, "color": "rgba(0,0,0,0)"}, name="tensors",
                              text=shapes if labels else None,
                              textposition="middle right",
                              textfont={"size": EDGE_LABEL_PX, "color": "#555555"},
                              hovertext=[e.get("hover") or _shape_text(e) for e in hover_edges],
                              hoverinfo="text", showlegend=False))
    # Aside nodes (weights, variable reads) stay unlabelled: their names are hover detail.
    names = [("" if n.get("aside") else str(n.get("label", n["id"]))) for n in nodes]
    where = _place_node_labels([pos[n["id"]] for n in nodes], names, px_per_unit)
    label_of = {n["id"]: (name if side else "", side or "middle left")
                for n, name, side in zip(nodes, names, where, strict=True)}
    groups = list(dict.fromkeys(node.get("group", "op") for node in nodes))
    colours = _colour_map(groups)
    by_group = defaultdict(list)
    for node in nodes:
        by_group[node.get("group", "op")].append(node)
    for group in groups:
        members = by_group[group]
        opacity = [1.0 if not highlight or n["id"] in highlight else 0.2 for n in members]
        text = [label_of[n["id"]][0] for n in members]
        traces.append(scatter(
            x=[pos[n["id"]][0] for n in members], y=[pos[n["id"]][1] for n in members],
            mode="markers+text" if labels else "markers", name=group,
            customdata=[n["id"] for n in members],
            legendgroup=group, showlegend=showlegend,
            text=text if labels else None,
            textposition=[label_of[n["id"]][1] for n in members],
            textfont={"size": LABEL_PX, "color": "#222222"},
            marker={"size": [16 if n.get("cluster") else 12 for n in members],
                    "color": colours[group], "opacity": opacity,
                    "symbol": ["square" if n.get("cluster") else "circle" for n in members],
                    "line": {"width": 0.5, "color": "#333"}},
            hovertext=[n.get("hover") or n.get("label") or n["id"] for n in members],
            hoverinfo="text",
        ))
    return traces


def _hide_aside(nodes, edges):
    shown = [n for n in nodes if not n.get("aside")]
    ids = {n["id"] for n in shown}
    return shown, [e for e in edges if e["source"] in ids and e["target"] in ids]


def graph_figure(nodes, edges, *, title: str = "", highlight=None, height: int | None = None,
                 positions: dict | None = None, aside: str = "column",
                 labels: str = "auto") -> go.Figure:
    """A layered top-to-bottom drawing; nodes coloured by "group", one legend entry per group.

    ``highlight``: ids to emphasise (e.g. inserted swap nodes); everything else is dimmed, and
    the edges touching a highlighted node are drawn bold in their own trace.
    ``positions``: a precomputed layout (id -> (x, y)) to reuse between redraws; nodes it lacks
    are laid out afresh, starting from it.
    ``aside``: what to do with nodes marked "aside" (constants, variable reads): "column" draws
    them in a side column, "hide" leaves them out, "inline" lays them out like any other node.
    ``labels``: "auto" writes op types beside the nodes and shapes beside the edges when at
    most `LABEL_MAX_NODES` nodes are drawn, "always" or "never" decide it outright.
    """
    _check(nodes, edges)
    if aside not in ("column", "hide", "inline"):
        raise ValueError(f"aside must be 'column', 'hide' or 'inline', got {aside!r}")
    if aside == "hide":
        nodes, edges = _hide_aside(nodes, edges)
    elif aside == "inline":
        nodes = [{**n, "aside": False} for n in nodes]
    ids = {n["id"] for n in nodes}
    if positions and ids <= set(positions):
        pos = positions
    else:
        pos = graph_layout(nodes, edges, initial=positions)
    labelled = _use_labels(labels, nodes)
    fig = go.Figure(graph_traces(nodes, edges, pos, highlight=highlight, labels=labelled))
    depth = 1 + max((-y for _, y in pos.values()), default=0)
    row = LABELLED_ROW_PX if labelled else ROW_PX
    apply(fig)
    fig.update_layout(
        title=title, showlegend=True, hovermode="closest",
        height=height or int(min(2400, max(400, row * depth + 80))),
        xaxis=_HIDDEN_AXIS, yaxis=_HIDDEN_AXIS,
        margin={"l": 10, "r": 10, "t": 60 if title else 10, "b": 10},
        meta={"nodes": len(nodes), "edges": len(edges), "labelled": labelled},
    )
    return fig


# A graph drawing has no quantity on its axes (x is the place in a layer, y the depth).
_HIDDEN_AXIS = {"visible": False, "showline": False, "showgrid": False, "zeroline": False}


def rewrite_figure(before, after, highlight=(), *, title: str = "Before and after the rewrite",
                   height: int | None = None, labels: str = "auto") -> go.Figure:
    """Two graphs side by side, ``before`` and ``after`` each a (nodes, edges) pair, drawn at
    the same positions (the after graph's layout; a node that exists in both sits at the same
    place in both panels). ``highlight``: the ids the rewrite touched (inserted swap nodes,
    triggers, producers, readers); they stay bright with their edges (trigger control edges
    among them) bold, everything else is dimmed. Inserted nodes only appear on the right."""
    (bn, be), (an, ae) = before, after
    _check(bn, be)
    _check(an, ae)
    pos = graph_layout(an, ae)
    missing = [n for n in bn if n["id"] not in pos]
    if missing:  # ops the rewrite removed: lay the before graph out on its own
        pos.update({k: v for k, v in graph_layout(bn, be, initial=pos).items() if k not in pos})
    highlight = set(highlight)
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.02,
                        subplot_titles=(f"before: {len(bn)} ops", f"after: {len(an)} ops"))
    scatter = go.Scattergl if len(an) > WEBGL_ABOVE else go.Scatter
    labelled = _use_labels(labels, an)
    for trace in graph_traces(bn, be, pos, highlight=highlight & {n["id"] for n in bn},
                              scatter=scatter, showlegend=False, labels=labelled,
                              plot_px=PANEL_PX):
        trace.showlegend = False
        fig.add_trace(trace, row=1, col=1)
    for trace in graph_traces(an, ae, pos, highlight=highlight, scatter=scatter, labels=labelled,
                              plot_px=PANEL_PX):
        fig.add_trace(trace, row=1, col=2)
    depth = 1 + max((-y for _, y in pos.values()), default=0)
    row = LABELLED_ROW_PX if labelled else ROW_PX
    apply(fig)
    fig.update_layout(title=title, hovermode="closest",
                      height=height or int(min(2400, max(450, row * depth + 100))),
                      margin={"l": 10, "r": 10, "t": 90, "b": 10},
                      meta={"inserted": len({n["id"] for n in an} - {n["id"] for n in bn}),
                            "highlighted": len(highlight)})
    fig.update_xaxes(**_HIDDEN_AXIS)
    fig.update_yaxes(**_HIDDEN_AXIS)
    return fig
