"""Every figure mlsys_viz draws is readable on a projector: the "mlsys" template (16 px text,
larger titles, the Okabe-Ito palette), a title, and a title on every axis that shows a quantity
(with its unit where it has one). Graph drawings write op types and tensor shapes beside their
nodes and edges, as Netron does."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

import mlsys_viz as viz
from mlsys_viz import theme
from mlsys_viz.graph import LABEL_MAX_NODES
from mlsys_viz.volume import frames_figure, image_axes, mesh_figure, slice_figure

INTERVALS = [{"name": "w", "start": 0, "end": 5, "bytes": 400, "kind": "weight"},
             {"name": "a", "start": 1, "end": 4, "bytes": 1000, "kind": "activation",
              "host": [(2, 3)]}]
DEVICE = [400, 1400, 400, 1400, 1400, 400]
NODES = [{"id": "x", "label": "input", "group": "input"},
         {"id": "s0/conv", "label": "Conv", "group": "conv / matmul", "scope": "s0/conv"},
         {"id": "s0/relu", "label": "Relu", "group": "elementwise", "scope": "s0/relu"},
         {"id": "w", "label": "w", "group": "constant", "aside": True}]
EDGES = [{"source": "x", "target": "s0/conv", "shape": [1, 3, 8, 8]},
         {"source": "w", "target": "s0/conv", "shape": [4, 3, 3, 3]},
         {"source": "s0/conv", "target": "s0/relu", "shape": [1, 4, 6, 6], "hover": "t"}]
VOLUME = np.arange(4 * 6 * 8, dtype=float).reshape(4, 6, 8)
LABELS = (VOLUME // 20).astype(int)
CUBE = (np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]]),
        np.array([[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]]))


def every_figure() -> dict[str, go.Figure]:
    """One figure from each drawing function mlsys_viz exposes (widgets: their figure)."""
    loops = [{"name": "i", "lo": 0, "hi": 8, "step": 1}, {"name": "j", "lo": 0, "hi": 4, "step": 1}]
    explorer = viz.ScopeExplorer(NODES, EDGES, title="scopes")
    return {
        "graph_figure": viz.graph_figure(NODES, EDGES, title="a graph"),
        "rewrite_figure": viz.rewrite_figure((NODES, EDGES), (NODES, EDGES), {"s0/conv"}),
        "ScopeExplorer.figure": explorer.figure(),
        "lifetime_chart": viz.lifetime_chart(INTERVALS),
        "memory_timeline": viz.memory_timeline(DEVICE, budget=1500),
        "lifetimes_and_memory": viz.lifetimes_and_memory(INTERVALS, DEVICE),
        "lifetime_animation": viz.lifetime_animation(INTERVALS, DEVICE, max_frames=3),
        "animation_widget": viz.animation_widget(
            viz.lifetime_animation(INTERVALS, DEVICE, max_frames=3)).children[-1],
        "compare_steps": viz.compare_steps({"plain": {"device": DEVICE},
                                            "swapped": {"device": DEVICE[::-1]}}),
        "loopnest_figure": viz.loopnest_figure(loops),
        "slice_figure": slice_figure(VOLUME, LABELS, axis=1),
        "frames_figure": frames_figure([LABELS[0], LABELS[1]], ["t=0", "t=1"], VOLUME[0],
                                       title="merges"),
        "mesh_figure": mesh_figure([("one", 1, *CUBE)]),
    }


def _layout_of(fig):
    return fig.layout if isinstance(fig, go.Figure | go.FigureWidget) else fig["layout"]


def _axes(layout, letter):
    return [(name, layout[name]) for name in layout if name.startswith(f"{letter}axis")]


def _visible(axis) -> bool:
    return axis.visible is not False


FIGURES = every_figure()


def test_every_exposed_drawing_function_is_covered():
    drawing = {name for name in viz.__all__
               if name.endswith(("_figure", "_chart", "_timeline", "_animation", "_steps",
                                 "_memory", "_widget"))}
    covered = {name.split(".")[0] for name in FIGURES}
    assert drawing <= covered, f"not checked for readability: {sorted(drawing - covered)}"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_uses_the_template_and_has_a_title(name):
    layout = _layout_of(FIGURES[name])
    assert layout.template.layout.font.size >= 16, name
    assert layout.template.layout.title.font.size > layout.template.layout.font.size
    assert tuple(layout.template.layout.colorway) == theme.OKABE_ITO
    title = layout.title.text or ""
    assert title.strip(), f"{name} has no title"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_axis_that_shows_a_quantity_has_a_title(name):
    layout = _layout_of(FIGURES[name])
    fig = FIGURES[name]
    three_d = [getattr(trace, "type", "") in ("mesh3d", "scatter3d") for trace in fig.data]
    for letter in "xy" if not all(three_d) else "":
        for axis_name, axis in _axes(layout, letter):
            if not _visible(axis):
                continue      # a graph or a loop nest: the picture is the drawing
            # A shared axis above the bottom row (ticks off, matching it) needs no title.
            if letter == "x" and axis.matches and axis.showticklabels is False:
                continue
            assert axis.title.text, f"{name}: {axis_name} has no title"
    if any(three_d):
        for letter in "xyz":
            assert layout.scene[f"{letter}axis"].title.text, f"{name}: scene {letter} axis"


def test_quantities_carry_units():
    assert FIGURES["memory_timeline"].layout.yaxis.title.text == "memory (bytes)"
    assert FIGURES["compare_steps"].layout.xaxis2.title.text == "simulated time (s)"
    fig = FIGURES["slice_figure"]   # a y slice of a (z, y, x) volume: rows z, columns x
    assert (fig.layout.yaxis.title.text, fig.layout.xaxis.title.text) == \
        ("z (voxels)", "x (voxels)")
    assert fig.layout.height >= 500


def test_the_template_is_plotlys_default_once_a_drawing_module_is_imported():
    assert pio.templates.default == "plotly_white+" + theme.TEMPLATE
    # so a figure a notebook draws itself gets it too
    assert go.Figure().layout.template.layout.font.size == theme.BODY_PX


def test_image_axes_refuses_a_fourth_axis():
    with pytest.raises(ValueError, match="axis must be 0, 1 or 2"):
        image_axes(go.Figure(), 3)


def test_graph_writes_op_types_and_shapes():
    fig = FIGURES["graph_figure"]
    assert fig.layout.meta["labelled"] is True
    texts = [t for tr in fig.data if tr.text is not None for t in tr.text]
    assert {"Conv", "Relu", "input"} <= set(texts)
    assert "w" not in texts           # aside nodes (weights) stay unlabelled: hover only
    assert "1\u00d73\u00d78\u00d78" in texts and "1\u00d74\u00d76\u00d76" in texts


def test_graph_labels_turn_off_when_they_would_overlap():
    n = LABEL_MAX_NODES + 1
    nodes = [{"id": f"n{i}", "label": "Add"} for i in range(n)]
    edges = [{"source": f"n{i}", "target": f"n{i + 1}", "shape": [2]} for i in range(n - 1)]
    assert viz.graph_figure(nodes, edges).layout.meta["labelled"] is False
    assert viz.graph_figure(nodes, edges, labels="always").layout.meta["labelled"] is True
    assert viz.graph_figure(nodes[:3], edges[:2], labels="never").layout.meta["labelled"] is False
    with pytest.raises(ValueError, match="labels must be"):
        viz.graph_figure(nodes[:3], edges[:2], labels="yes")
