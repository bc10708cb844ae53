"""ONNX models and ONNX IR modules as graphs (compilerkit.views.onnx_graph_view / ir_graph_view,
drawn by mlsys_viz.graph_figure): checked against independent references, the
ModelProto with onnx.shape_inference for models and the printed IR for modules."""

import re
import time

import mlsys_datasets
import numpy as np
import onnx
import plotly.graph_objects as go
import pytest
from onnx import helper, numpy_helper

import compilerkit as ck
from compilerkit.measure import conformance
from compilerkit.views import ir_graph_view, node_counts, onnx_graph_view
from mlsys_viz import graph_figure, graph_layout

LENET = str(mlsys_datasets.onnx_path("lenet"))
SHAPES = {"input": [1, 28, 28, 1]}


def by_id(nodes):
    return {n["id"]: n for n in nodes}


def inferred_shapes(model):
    """tensor -> shape list, straight from onnx.shape_inference and the initializers."""
    g = onnx.shape_inference.infer_shapes(model).graph
    out = {t.name: list(t.dims) for t in g.initializer}
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        dims = vi.type.tensor_type.shape.dim
        out[vi.name] = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in dims]
    return out


@pytest.mark.parametrize("name", ["lenet", "small_resnet", "conv_bn_pool", "gemm_mlp"])
def test_one_node_per_onnx_node_input_and_initializer(name):
    model = mlsys_datasets.load_onnx(name)
    nodes, edges = onnx_graph_view(model)
    counts = node_counts(nodes)
    g = model.graph
    inits = {t.name for t in g.initializer}
    assert counts["ops"] == len(g.node)
    assert counts["initializers"] == len(inits)
    assert counts["inputs"] == len([i for i in g.input if i.name not in inits])
    ops = [n for n in nodes if n["kind"] == "op"]
    assert [n["op"] for n in ops] == [n.op_type for n in g.node]
    # Every edge is a tensor its target node consumes, from the node that produces it, and
    # every consumed tensor is an edge (once per consumer).
    producer = {t: n["id"] for n in nodes for t in n["outputs"]}
    ids = by_id(nodes)
    consumed = {(t, (node.name, k)) for k, node in enumerate(g.node) for t in node.input if t}
    op_index = {n["id"]: k for k, n in enumerate(ops)}
    got = set()
    for e in edges:
        target = ids[e["target"]]
        k = op_index[target["id"]]
        assert e["tensor"] in g.node[k].input
        assert e["source"] == producer[e["tensor"]]
        got.add((e["tensor"], (g.node[k].name, k)))
    assert got == consumed
    assert all(n["aside"] for n in nodes if n["kind"] == "initializer")


def test_shapes_in_the_hover_are_those_of_shape_inference():
    model = onnx.load(LENET)
    shapes = inferred_shapes(model)
    nodes, edges = onnx_graph_view(model)
    for e in edges:
        assert e["shape"] == shapes[e["tensor"]]
        assert f"{shapes[e['tensor']]} " in e["hover"]
    conv = by_id(nodes)["lenet_1/conv1_1/BiasAdd"]
    assert conv["group"] == "conv / matmul"
    out = conv["outputs"][0]
    assert f"out {out}: {shapes[out]} float32" in conv["hover"]
    assert "batch" in str(shapes["input"]) and "batch x 3.1 KiB" in by_id(nodes)["input"]["hover"]


def test_input_shapes_fix_the_batch_and_give_bytes():
    nodes, edges = onnx_graph_view(LENET, input_shapes=SHAPES)
    conv = by_id(nodes)["lenet_1/conv1_1/BiasAdd"]
    # 1 x 6 x 28 x 28 float32 = 18,816 bytes
    assert "[1, 6, 28, 28] float32 = 18.4 KiB" in conv["hover"]
    relu_in = next(e for e in edges if e["target"] == "lenet_1/conv1_1/Relu")
    assert relu_in["shape"] == [1, 6, 28, 28] and relu_in["dtype"] == "float32"


def test_path_bytes_and_proto_give_the_same_view():
    model = onnx.load(LENET)
    a = onnx_graph_view(LENET)
    assert onnx_graph_view(model) == a
    assert onnx_graph_view(model.SerializeToString()) == a


def test_op_kinds_colour_the_figure_one_legend_entry_each():
    nodes, edges = onnx_graph_view(LENET, input_shapes=SHAPES)
    groups = {n["id"]: n["group"] for n in nodes}
    assert groups["lenet_1/pool1_1/MaxPool2d"] == "pool / normalise"
    assert groups["lenet_1/conv1_1/Relu"] == "elementwise"
    assert groups["Shape__6"] == "shape" and groups["const__2"] == "constant"
    fig = graph_figure(nodes, edges, title="lenet")
    # markers+text: op types are written beside the nodes (small graphs)
    names = {t.name for t in fig.data
             if t.mode.startswith("markers") and t.showlegend is not False}
    assert {"conv / matmul", "elementwise", "pool / normalise", "shape", "constant",
            "input"} <= names
    tensors = next(t for t in fig.data if t.name == "tensors")  # edge hover: tensor shapes
    assert any("[1, 6, 28, 28] float32" in h for h in tensors.hovertext)


def test_edges_point_down_the_layers():
    for nodes, edges in (onnx_graph_view(LENET, input_shapes=SHAPES),
                         ir_graph_view(ck.import_onnx(LENET, SHAPES))):
        pos = graph_layout(nodes, edges)
        ids = by_id(nodes)
        main = [e for e in edges if not ids[e["source"]].get("aside")
                and not ids[e["target"]].get("aside")]
        assert main
        for e in main:
            assert pos[e["source"]][1] > pos[e["target"]][1], e
        # Constants sit in a side column left of the computation, never below their consumer.
        left = min(pos[n["id"]][0] for n in nodes if not n.get("aside"))
        for e in edges:
            if ids[e["source"]].get("aside"):
                assert pos[e["source"]][0] < left
                assert pos[e["source"]][1] > pos[e["target"]][1]


OP_LINE = re.compile(r'^\s*(%[^=]*?) = "onnx\.(\w+)"\((.*?)\)')


def printed_ops(text):
    """(first result, op type, operands) for each onnx-dialect op in printed IR but the
    onnx.NoValue ops, whose results (absent optional inputs, typed `none`) are left out of the
    operands: the view draws neither."""
    none = set(re.findall(r'(%\w+) = "onnx\.NoValue"', text))
    out = []
    for line in text.splitlines():
        m = OP_LINE.match(line)
        if m and m.group(2) != "NoValue":
            operands = [o.strip() for o in m.group(3).split(",") if o.strip()]
            out.append((m.group(1).split(",")[0].strip(), m.group(2),
                        [o for o in operands if o not in none]))
    return out


def check_ir_view(module):
    text = ck.print_ir(module)
    ops = printed_ops(text)
    assert ops and len(ops) == text.count('"onnx.') - text.count('"onnx.NoValue"')
    nodes, edges = ir_graph_view(module)
    assert node_counts(nodes)["ops"] == len(ops)
    assert [n["op"] for n in nodes if n["kind"] == "op"] == [t for _, t, _ in ops]
    ids = by_id(nodes)
    got = {(e["tensor"], ids[e["target"]]["outputs"][0]) for e in edges}
    assert got == {(v, res) for res, _, operands in ops for v in operands}
    assert len(got) == len(edges)
    # The first result's type (MaxPool's absent Indices is a second result, typed none).
    types = dict(re.findall(r"(%\w+)(?:, %\w+)* = .*?-> \(?(tensor<[^>]*>)", text))
    types.update(re.findall(r"(%\w+): (tensor<[^>]*>)", text))  # the function's arguments
    for e in edges:
        *dims, elem = types[e["tensor"]][len("tensor<"):-1].split("x")
        assert e["shape"] == [int(d) for d in dims]
        assert e["dtype"] == {"f32": "float32", "i64": "int64", "i32": "int32"}[elem]
    return nodes, edges


def test_ir_graph_matches_the_printed_ir_and_folding_removes_the_shape_subgraph():
    m = ck.import_onnx(LENET, SHAPES)
    before, _ = check_ir_view(m)
    ck.optimize_onnx(m)
    after, _ = check_ir_view(m)
    assert node_counts(after)["ops"] < node_counts(before)["ops"]
    ops_before = {n["op"] for n in before}
    ops_after = {n["op"] for n in after}
    assert {"Shape", "Gather", "Concat", "Slice"} <= ops_before
    assert not {"Shape", "Gather", "Concat", "Slice"} & ops_after
    conv = by_id(after)["lenet_1/conv1_1/BiasAdd"]
    assert "[1, 6, 28, 28] float32 = 18.4 KiB" in conv["hover"]
    assert "onnx.Conv" in conv["hover"]
    fig = graph_figure(*ir_graph_view(m), title="after")
    assert fig.layout.meta["nodes"] == len(after)


def test_a_tensor_nobody_produces_is_named_with_its_node():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    w = numpy_helper.from_array(np.ones(2, np.float32), "w")
    nodes = [helper.make_node("Add", ["x", "w"], ["t"], name="first"),
             helper.make_node("Mul", ["t", "ghost"], ["y"], name="second")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w]))
    with pytest.raises(ck.ModelError, match=r"'second'.*'ghost'"):
        onnx_graph_view(model)
    with pytest.raises(ck.ModelError, match="not a valid ONNX model"):
        onnx_graph_view(b"not a model")


def test_unnamed_and_clashing_names_get_unique_ids():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Relu", ["a"], ["b"], name="x"),  # clashes with the input
             helper.make_node("Neg", ["b"], ["y"], name="x")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]))
    nodes, edges = onnx_graph_view(model)
    assert [n["id"] for n in nodes] == ["x", "Relu_0", "x#2", "x#3"]
    assert [(e["source"], e["target"]) for e in edges] == [("x", "Relu_0"), ("Relu_0", "x#2"),
                                                          ("x#2", "x#3")]


def test_a_large_light_model_draws_quickly_with_webgl():
    # DenseNet-121: 1,746 ONNX nodes and 848 initializers; its weights are ConstantOfShape ->
    # Unsqueeze chains, which compute constants and so go aside with them.
    model = onnx.load(conformance.light_model_path("densenet121"))
    t = time.perf_counter()
    nodes, edges = onnx_graph_view(model)
    fig = graph_figure(nodes, edges, title="densenet121")
    elapsed = time.perf_counter() - t
    assert node_counts(nodes)["ops"] == len(model.graph.node)
    assert all(isinstance(tr, go.Scattergl) for tr in fig.data)
    const_ops = [n for n in nodes if n["op"] in ("ConstantOfShape", "Unsqueeze")]
    assert const_ops and all(n["aside"] for n in const_ops)
    # a safety net against a blow-up (about 2 s here), not a speed bound
    assert elapsed < 120, f"building the DenseNet-121 figure took {elapsed:.1f} s"
