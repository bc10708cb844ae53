"""Graph layout and drawing on hand-made graphs and hypothesis-generated DAGs."""

import networkx as nx
import plotly.graph_objects as go
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlsys_viz import collapse_scopes, graph_figure, layered_layout, levels


def dag(edges):
    graph = nx.DiGraph()
    graph.add_edges_from(edges)
    return graph


def test_levels_are_longest_path_depths():
    # a -> b -> d, a -> d, c -> d: d sits below b although a -> d is a shortcut.
    graph = dag([("a", "b"), ("b", "d"), ("a", "d"), ("c", "d")])
    assert levels(graph) == {"a": 0, "b": 1, "d": 2, "c": 0}


def test_cycle_members_share_a_level():
    # Collapsed scopes can form a cycle; the layout must not fail on it.
    graph = dag([("x", "a"), ("a", "b"), ("b", "a"), ("b", "y")])
    depth = levels(graph)
    assert depth["a"] == depth["b"] == 1 and depth["y"] == 2


def crossings(graph, pos):
    edges = list(graph.edges)
    count = 0
    for i, (a, b) in enumerate(edges):
        for c, d in edges[i + 1:]:
            if pos[a][1] == pos[c][1] and pos[b][1] == pos[d][1] and len({a, b, c, d}) == 4:
                count += (pos[a][0] - pos[c][0]) * (pos[b][0] - pos[d][0]) < 0
    return count


def test_barycenter_sweeps_untangle_a_crossing():
    # Inserted in an order that crosses: top p,q; bottom Q,P with p->P, q->Q.
    graph = nx.DiGraph()
    graph.add_nodes_from(["p", "q", "Q", "P"])
    graph.add_edges_from([("p", "P"), ("q", "Q")])
    assert crossings(graph, layered_layout(graph, sweeps=0)) == 1
    assert crossings(graph, layered_layout(graph)) == 0


@st.composite
def random_dags(draw):
    n = draw(st.integers(1, 40))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=80))
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from((a, b) for a, b in pairs if a < b)  # a < b keeps it acyclic
    return graph


@settings(max_examples=60, deadline=None)
@given(random_dags())
def test_every_edge_points_down_and_no_two_nodes_overlap(graph):
    pos = layered_layout(graph)
    for a, b in graph.edges:
        assert pos[a][1] > pos[b][1]
    assert len(set(pos.values())) == graph.number_of_nodes()


def nodes_and_edges():
    nodes = [
        {"id": "model/dense/MatMul", "group": "forward", "scope": "model/dense/MatMul"},
        {"id": "model/dense/BiasAdd", "group": "forward", "scope": "model/dense/BiasAdd"},
        {"id": "loss", "group": "forward"},
        {"id": "gradient_tape/model/dense/MatMul", "group": "backward",
         "scope": "gradient_tape/model/dense/MatMul"},
    ]
    edges = [
        {"source": "model/dense/MatMul", "target": "model/dense/BiasAdd", "hover": "f32[8,10]"},
        {"source": "model/dense/BiasAdd", "target": "loss", "hover": "f32[8,10]"},
        {"source": "loss", "target": "gradient_tape/model/dense/MatMul"},
        {"source": "model/dense/MatMul", "target": "gradient_tape/model/dense/MatMul",
         "kind": "control"},
    ]
    return nodes, edges


def test_collapse_scopes_folds_and_expands():
    nodes, edges = nodes_and_edges()
    folded, folded_edges = collapse_scopes(nodes, edges, depth=1)
    assert sorted(n["id"] for n in folded) == ["gradient_tape", "loss", "model"]
    assert {(e["source"], e["target"]) for e in folded_edges} == {
        ("model", "loss"), ("loss", "gradient_tape"), ("model", "gradient_tape")}
    model = next(n for n in folded if n["id"] == "model")
    assert model["size"] == 2 and "2 ops" in model["hover"]
    opened, _ = collapse_scopes(nodes, edges, depth=1, expand={"model"})
    assert "model/dense" in {n["id"] for n in opened}


def test_graph_figure_colours_by_group_and_carries_hover():
    nodes, edges = nodes_and_edges()
    fig = graph_figure(nodes, edges, title="step")
    names = [trace.name for trace in fig.data]
    assert "forward" in names and "backward" in names and "control edges" in names
    tensors = next(t for t in fig.data if t.name == "tensors")
    assert list(tensors.hovertext) == ["f32[8,10]", "f32[8,10]"]
    forward = next(t for t in fig.data if t.name == "forward")
    assert all(isinstance(t, go.Scatter) for t in fig.data)
    assert sorted(forward.y) == [-2, -1, 0]  # layered by topological level


def test_highlight_dims_the_rest():
    nodes, edges = nodes_and_edges()
    fig = graph_figure(nodes, edges, highlight={"loss"})
    forward = next(t for t in fig.data if t.name == "forward")
    lit = dict(zip(forward.customdata, forward.marker.opacity, strict=True))
    assert lit["loss"] == 1.0 and lit["model/dense/MatMul"] < 1.0


def test_large_graphs_use_webgl():
    nodes = [{"id": str(i), "group": "forward"} for i in range(1200)]
    edges = [{"source": str(i), "target": str(i + 1)} for i in range(1199)]
    fig = graph_figure(nodes, edges)
    assert all(isinstance(t, go.Scattergl) for t in fig.data)


def test_bad_input_names_the_culprit():
    with pytest.raises(ValueError, match="unknown target node 'nowhere'"):
        graph_figure([{"id": "a"}], [{"source": "a", "target": "nowhere"}])
    with pytest.raises(ValueError, match="repeated: \\['a'\\]"):
        graph_figure([{"id": "a"}, {"id": "a"}], [])
