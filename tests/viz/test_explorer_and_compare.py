"""Scope explorer (clusters that open on demand, constants and reads aside), the before/after
view of a rewrite, runs side by side on one time axis, and the thinned animation frames."""

import plotly.graph_objects as go

from mlsys_viz import (
    ScopeExplorer,
    compare_steps,
    graph_figure,
    graph_layout,
    lifetime_animation,
    rewrite_figure,
)


def scoped_graph():
    """Two layers of three ops, each with a variable read aside, and a loss."""
    nodes, edges = [], []
    previous = None
    for layer in ("m/l1", "m/l2"):
        ops = [f"{layer}/a", f"{layer}/b", f"{layer}/c"]
        read = f"{layer}/ReadVariableOp"
        nodes += [{"id": op, "group": "forward"} for op in ops]
        nodes.append({"id": read, "group": "forward", "aside": True})
        edges += [{"source": ops[0], "target": ops[1]}, {"source": ops[1], "target": ops[2]},
                  {"source": read, "target": ops[1]}]
        if previous:
            edges.append({"source": previous, "target": ops[0]})
        previous = ops[2]
    nodes.append({"id": "loss", "group": "forward"})
    edges.append({"source": previous, "target": "loss"})
    return nodes, edges


def node_ids(fig):
    return {i for t in fig.data if t.customdata is not None for i in t.customdata}


def test_explorer_opens_scopes_one_level_at_a_time():
    explorer = ScopeExplorer(*scoped_graph(), depth=1)
    assert explorer.clusters() == ["m"]
    shown = node_ids(explorer.figure())
    assert shown == {"m", "m (reads)", "loss"}
    assert explorer.clusters(["m"]) == ["m/l1", "m/l2"]
    opened = node_ids(explorer.figure(["m", "m/l1"]))
    assert {"m/l1/a", "m/l1/b", "m/l1/c", "m/l2", "loss"} <= opened
    assert "m/l1/ReadVariableOp" in opened  # a single read stays itself, aside
    hidden = node_ids(explorer.figure(["m", "m/l1"], aside="hide"))
    assert "m/l1/ReadVariableOp" not in hidden and "m/l1/b" in hidden


def test_an_opened_cluster_keeps_the_rest_in_place_and_layouts_are_cached():
    explorer = ScopeExplorer(*scoped_graph(), depth=2)
    explorer.figure()
    before = dict(explorer._last)
    explorer.figure(["m/l2"])
    after = explorer._last
    assert after["loss"][1] < after["m/l2/c"][1] < after["m/l2/a"][1]  # layered top to bottom
    assert after["m/l1"] == before["m/l1"]  # the unopened cluster did not move
    first = explorer._layouts[(frozenset(["m/l2"]), False)]
    explorer.figure()
    explorer.figure(["m/l2"])
    assert explorer._layouts[(frozenset(["m/l2"]), False)] is first


def test_constants_and_reads_sit_in_a_side_column_beside_their_consumer():
    nodes, edges = scoped_graph()
    pos = graph_layout(nodes, edges)
    main_x = [pos[n["id"]][0] for n in nodes if not n.get("aside")]
    for read, consumer in (("m/l1/ReadVariableOp", "m/l1/b"), ("m/l2/ReadVariableOp", "m/l2/b")):
        assert pos[read][0] < min(main_x)
        assert pos[consumer][1] < pos[read][1] < pos[consumer][1] + 1
    # Reads do not push the computation down: the layered part is as deep as without them.
    assert min(y for _, y in pos.values()) == -6  # 7 ops in a chain, loss at the bottom
    fig = graph_figure(nodes, edges)
    side = next(t for t in fig.data if t.name == "constant / variable-read edges")
    assert side.visible == "legendonly" and len(side.x) == 2 * 3  # toggled from the legend
    inline = graph_layout([{**n, "aside": False} for n in nodes], edges)
    assert inline["m/l1/ReadVariableOp"][1] == 0  # inline it is a source on the top layer


def test_rewrite_figure_highlights_what_changed_at_shared_positions():
    before = ([{"id": "a", "group": "forward"}, {"id": "b", "group": "forward"},
               {"id": "g", "group": "backward"}],
              [{"source": "a", "target": "b"}, {"source": "b", "target": "g"},
               {"source": "a", "target": "g"}])
    after = (before[0] + [{"id": "out", "group": "swap-out"}, {"id": "in", "group": "swap-in"}],
             [{"source": "a", "target": "b"}, {"source": "b", "target": "g"},
              {"source": "a", "target": "out"}, {"source": "out", "target": "in"},
              {"source": "in", "target": "g"},
              {"source": "b", "target": "in", "kind": "control"}])
    fig = rewrite_figure(before, after, highlight={"a", "out", "in", "b", "g"} - {"b"})
    assert fig.layout.meta["inserted"] == 2
    left = [t for t in fig.data if t.xaxis == "x" and t.customdata is not None]
    right = [t for t in fig.data if t.xaxis == "x2" and t.customdata is not None]
    assert {i for t in left for i in t.customdata} == {"a", "b", "g"}
    assert {i for t in right for i in t.customdata} == {"a", "b", "g", "out", "in"}
    where = {}
    for side, traces in (("l", left), ("r", right)):
        for t in traces:
            for i, x, y in zip(t.customdata, t.x, t.y, strict=True):
                where[side, i] = (x, y)
    assert all(where["l", i] == where["r", i] for i in "abg")
    forward = next(t for t in right if t.name == "forward")
    lit = dict(zip(forward.customdata, forward.marker.opacity, strict=True))
    assert lit["a"] == 1.0 and lit["b"] < 1.0
    trigger = next(t for t in fig.data if t.name == "changed control edges")
    assert trigger.line.width > 1 and trigger.line.dash == "dash"


def test_compare_steps_shares_one_time_axis():
    runs = {"without": {"x": [0, 1, 2], "device": [1, 5, 2]},
            "with": {"x": [0, 1.5, 3], "device": [1, 3, 2], "host": [0, 2, 0]}}
    fig = compare_steps(runs, budget=4)
    assert fig.layout.xaxis.matches == "x2" or fig.layout.xaxis2.matches == "x"
    peaks = [t for t in fig.data if t.name == "peak"]
    assert [list(p.x) for p in peaks] == [[1], [1.5]]
    assert [a.text for a in fig.layout.annotations] == ["without", "with"]


def test_long_steps_keep_frames_small_and_peaks_visible():
    n = 5000
    device = [i % 97 for i in range(n)]
    device[2345] = 10_000
    intervals = [{"name": f"t{i}", "start": i, "end": i + 3, "bytes": 1, "kind": "activation"}
                 for i in range(0, n - 4, 10)]
    fig = lifetime_animation(intervals, device, max_frames=1000, max_points=200)
    assert len(fig.frames) == 1000
    last = fig.frames[-1].data[2]
    assert len(last.x) <= 200 + 3 and 2345 in last.x and max(last.y) == 10_000
    assert list(last.x) == sorted(last.x) and last.x[-1] == n - 1
    assert isinstance(fig, go.Figure) and fig.frames[0].data[0].x[0] == 0


# Click to expand: the FigureWidget of ScopeExplorer.widget() opens a cluster that is clicked.

def deep_graph():
    """Scope "net" with three blocks of 2, 3 and 1 ops (a chain through them), plus a loss."""
    ids = ["net/b1/x", "net/b1/y", "net/b2/x", "net/b2/y", "net/b2/z", "net/b3/x", "loss"]
    nodes = [{"id": i, "group": "forward"} for i in ids]
    edges = [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)]
    return nodes, edges


def shown_ids(plot):
    return [i for t in plot.data if t.customdata is not None for i in t.customdata]


def click(box, node_id):
    """The handler plotly calls for a click on ``node_id``: its trace and a synthetic point."""
    from plotly.callbacks import Points

    trace = next(t for t in box.plot.data if t.customdata is not None
                 and node_id in t.customdata)
    box.on_click(trace, Points(point_inds=[list(trace.customdata).index(node_id)],
                               trace_name=trace.name), None)


def children(nodes, scope):
    """The scopes (or ops) one level below ``scope``, from the node list itself."""
    depth = scope.count("/") + 2
    return {"/".join(n["id"].split("/")[:depth]) for n in nodes
            if n["id"].startswith(scope + "/") and not n.get("aside")}


def test_clicking_a_cluster_opens_it_by_its_child_count():
    nodes, edges = deep_graph()
    box = ScopeExplorer(nodes, edges, depth=1).widget()
    assert type(box.plot).__name__ == "FigureWidget"
    assert sorted(shown_ids(box.plot)) == ["loss", "net"]
    before = len(shown_ids(box.plot))
    click(box, "net")
    assert box.expanded == ["net"]
    assert len(shown_ids(box.plot)) == before - 1 + len(children(nodes, "net")) == 4
    click(box, "net/b2")
    assert len(shown_ids(box.plot)) == 4 - 1 + len(children(nodes, "net/b2")) == 6
    assert {"net/b2/x", "net/b2/y", "net/b2/z", "net/b1", "net/b3"} <= set(shown_ids(box.plot))
    assert box.children[0].children[0].value == ("net", "net/b2")  # the list follows clicks
    assert box.figure.layout.meta["nodes"] == 6  # the plain figure is kept in step
    click(box, "loss")  # a single op has nothing to open
    assert box.expanded == ["net", "net/b2"]


def test_click_closes_the_innermost_open_scope():
    nodes, edges = deep_graph()
    box = ScopeExplorer(nodes, edges, depth=1).widget(expand=["net", "net/b2"])
    box.children[0].children[1].children[1].value = "close"  # "click closes"
    click(box, "net/b2/y")
    assert box.expanded == ["net"] and "net/b2" in shown_ids(box.plot)
    click(box, "net/b2")
    assert box.expanded == [] and sorted(shown_ids(box.plot)) == ["loss", "net"]


def test_scope_logic_on_its_own():
    explorer = ScopeExplorer(*scoped_graph(), depth=1)
    assert explorer.open_scope([], "m (reads)") == ["m"]  # a scope's reads open the scope
    assert explorer.open_scope(["m"], "m/l1") == ["m", "m/l1"]
    assert explorer.open_scope(["m"], "loss") == ["m"]
    assert explorer.close_scope(["m", "m/l1"], "m/l1/a") == ["m"]
    assert explorer.close_scope(["m", "m/l1"], "m/l2") == []  # closing m closes m/l1 too
    assert explorer.close_scope(["m"], "loss") == ["m"]


def test_a_click_from_the_front_end_redraws_safely():
    """The message JupyterLab sends for a click, through plotly's own dispatch (which calls
    the handler of every trace index the figure had before the redraw)."""
    nodes, edges = deep_graph()
    box = ScopeExplorer(nodes, edges, depth=1).widget()
    index, trace = next((i, t) for i, t in enumerate(box.plot.data)
                        if t.customdata is not None and "net" in t.customdata)
    box.plot._js2py_pointsCallback = {
        "event_type": "plotly_click",
        "points": {"xs": [0], "ys": [0], "trace_indexes": [index],
                   "point_indexes": [list(trace.customdata).index("net")]}}
    assert box.expanded == ["net"] and "net/b1" in shown_ids(box.plot)
