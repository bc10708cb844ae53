"""The reading aids of the transformer notebook: the IR lines of chosen nodes
(views.show.node_excerpt), what each ONNX pass did (views.passes.pass_trace) and the per-op-type
comparison of two profiles (measure.compare).

The model is a hand-made graph whose passes are known in advance: constant folding removes the
Shape that feeds a Reshape, fuse-elementwise folds the Relu after the Add into it, and the
Softmax stays. Profiles are hand-made rows with hand-summed expectations."""

import pytest
from onnx import TensorProto, helper, numpy_helper

import compilerkit as ck
from compilerkit.measure.compare import op_comparison, op_comparison_figure, profile_overhead
from compilerkit.measure.provenance import Provenance
from compilerkit.views.passes import pass_trace, trace_table
from compilerkit.views.show import node_excerpt


def small_block():
    """X[4, 8] + B -> Relu -> Softmax -> Reshape(to Shape(X)): a block's pieces in five nodes."""
    import numpy as np

    b = numpy_helper.from_array(np.linspace(-1, 1, 8, dtype=np.float32), "B")
    nodes = [helper.make_node("Add", ["X", "B"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["s"], name="softmax", axis=-1),
             helper.make_node("Shape", ["X"], ["shape"], name="shape"),
             helper.make_node("Reshape", ["s", "shape"], ["Y"], name="reshape")]
    g = helper.make_graph(nodes, "block",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 8])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4, 8])], [b])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def traced():
    m = ck.import_onnx(small_block())
    return m, pass_trace(m)


def test_pass_trace_names_the_fusion_and_the_folding(traced):
    _, rows = traced
    by_pass = {}
    for r in rows:
        by_pass.setdefault(r["pass"], []).append(r)
    fused = by_pass["fuse-elementwise"][0]
    assert fused["removed"] == {"Relu": 1} and fused["added"] == {}
    assert fused["changed"] == [{"node": "add", "op": "Add",
                                 "attributes": {"activation": '"Relu"'}}]
    assert fused["ops_after"] == fused["ops_before"] - 1
    folding = by_pass["constant-folding"][0]
    assert folding["removed"].get("Shape") == 1 and folding["added"].get("Constant", 0) >= 1
    # Passes that change nothing say so; each row starts where the one before ended.
    assert by_pass["fuse-conv"][0]["removed"] == {} and by_pass["fuse-conv"][0]["changed"] == []
    for before, after in zip(rows, rows[1:], strict=False):
        assert after["ops_before"] == before["ops_after"]


def test_pass_trace_leaves_the_module_as_optimize_onnx_does(traced):
    m, _ = traced
    assert ck.print_ir(m) == ck.print_ir(ck.optimize_onnx(ck.import_onnx(small_block())))


def test_trace_table_has_a_row_per_pass(traced):
    _, rows = traced
    table = trace_table(rows)
    lines = table.splitlines()
    assert len(lines) == len(rows) + 2
    assert 'add (Add): activation = "Relu"' in table
    assert "| fuse-elementwise | " in table and "1 Relu" in table


@pytest.fixture(scope="module")
def prov():
    m = ck.optimize_onnx(ck.import_onnx(small_block()))
    return Provenance(m, ck.lower(m, opt_level=2))


def test_node_excerpt_onnx_ir_is_the_nodes_own_lines(prov):
    text = node_excerpt(prov, "onnx-ir", ops=["Softmax"])
    assert text.count("\n") == 0 and '"onnx.Softmax"' in text
    assert "onnx_node_name" not in text
    assert "onnx_node_name" in node_excerpt(prov, "onnx-ir", ops=["Softmax"], tags=True)
    both = node_excerpt(prov, "onnx-ir", nodes="^(add|reshape)$").splitlines()
    # The Softmax between them is left out, and the gap is marked.
    assert [("onnx.Add" in t, t.strip() == "...", "onnx.Reshape" in t) for t in both] == [
        (True, False, False), (False, True, False), (False, False, True)]
    # With span, every node from the first to the last: the Softmax too (the "..." left is the
    # folded shape, a Constant and no node).
    spanned = node_excerpt(prov, "onnx-ir", nodes="^(add|reshape)$", span=True).splitlines()
    assert ['"onnx.Softmax"' in t for t in spanned] == [False, True, False, False]


def test_node_excerpt_kernel_ir_has_a_header_per_node_and_a_cap(prov):
    text = node_excerpt(prov, "kernel-ir", nodes=["softmax"], width=300, max_lines=500)
    assert text.splitlines()[0] == "// softmax (Softmax)"
    assert "math.exp" in text and "onnx_node" not in text
    capped = node_excerpt(prov, "kernel-ir", nodes=["softmax"], max_lines=3, width=40)
    lines = capped.splitlines()
    full = len(text.splitlines()) - 1
    assert len(lines) == 1 + 3 + 1 and lines[-1].endswith(f"{full - 3} more lines of this node")
    assert all(len(t) <= 40 for t in lines[1:4])


def test_node_excerpt_refuses_what_it_cannot_show(prov):
    with pytest.raises(ValueError, match="stage must be one of"):
        node_excerpt(prov, "llvm-ir", ops=["Softmax"])
    with pytest.raises(ValueError, match="choose the nodes"):
        node_excerpt(prov, "onnx-ir")
    with pytest.raises(ValueError, match="no node of the onnx-ir matches"):
        node_excerpt(prov, "onnx-ir", ops=["Conv"])
    kernel_only = Provenance(None, prov.modules["kernel-ir"])
    with pytest.raises(ValueError, match="needs the ONNX IR module"):
        node_excerpt(kernel_only, "kernel-ir", ops=["Softmax"])
    with pytest.raises(ValueError, match="needs the ONNX IR module"):
        node_excerpt(prov.modules["kernel-ir"], "kernel-ir", ops=["Softmax"])
    # A module alone: the ONNX IR by op type, the Kernel IR by node name.
    assert '"onnx.Softmax"' in node_excerpt(prov.modules["onnx-ir"], "onnx-ir", ops="Softmax")
    assert "math.exp" in node_excerpt(prov.modules["kernel-ir"], "kernel-ir", nodes=["softmax"],
                                      max_lines=500)
    # The Reshape is a view: it has an ONNX IR line, and at most a view op in the Kernel IR.
    assert "onnx.Reshape" in node_excerpt(prov, "onnx-ir", nodes=["reshape"])


def test_node_excerpt_of_a_compiled_model():
    cm = ck.compile(small_block(), opt_level=2, asm=False)
    assert '"onnx.Softmax"' in node_excerpt(cm, "onnx-ir", ops="Softmax")


CK_ROWS = [{"node": "mm", "op_type": "MatMul", "seconds": 3e-6},
           {"node": "view", "op_type": "Reshape", "seconds": 0.0},
           {"node": "act", "op_type": "Tanh", "seconds": 0.0},
           {"node": "add1", "op_type": "Add", "seconds": 0.5e-6},
           {"node": "add2", "op_type": "Add", "seconds": 0.5e-6},
           {"node": "(rest of the run)", "op_type": "untimed", "seconds": 5e-6}]
ORT_ROWS = [{"node": "mm", "op_type": "MatMul", "seconds": 2e-6},
            {"node": "fused", "op_type": "FusedMatMul", "seconds": 4e-6},
            {"node": "shape", "op_type": "Shape", "seconds": 1e-6}]


def test_op_comparison_sums_per_type_longest_first():
    rows = op_comparison(CK_ROWS, ORT_ROWS)
    assert [r["op_type"] for r in rows] == ["FusedMatMul", "MatMul", "Add", "Shape"]
    add = rows[2]
    assert add["compilerkit_s"] == pytest.approx(1e-6) and add["onnxruntime_s"] == 0.0
    assert (add["compilerkit_nodes"], add["onnxruntime_nodes"]) == (2, 0)
    mm = rows[1]
    assert (mm["compilerkit_s"], mm["onnxruntime_s"]) == (3e-6, 2e-6)
    # Reshape and Tanh take no time on either side (a view, a fused activation): left out.


def test_profile_overhead():
    got = profile_overhead(ORT_ROWS, latency_s=4e-6)
    assert got["nodes_s"] == pytest.approx(7e-6) and got["kernels"] == 3
    assert got["per_kernel_s"] == pytest.approx(1e-6)
    ours = profile_overhead(CK_ROWS, latency_s=1e-3)
    assert ours["per_kernel_s"] == 0.0 and ours["kernels"] == 3  # the view and Tanh ran none
    with pytest.raises(ValueError, match="latency_s"):
        profile_overhead(ORT_ROWS, latency_s=0)


def test_op_comparison_figure_folds_the_rest_into_one_row():
    rows = op_comparison(CK_ROWS, ORT_ROWS)
    fig = op_comparison_figure(rows, title="t", top=2)
    assert [t.name for t in fig.data] == ["compilerkit", "onnxruntime (its profiler)"]
    assert list(fig.data[0].y) == ["FusedMatMul", "MatMul", "other (2 op types)"]
    assert list(fig.data[0].x) == pytest.approx([0.0, 3.0, 1.0])   # microseconds
    assert list(fig.data[1].x) == pytest.approx([4.0, 2.0, 1.0])
    assert "µs" in fig.layout.xaxis.title.text and fig.layout.yaxis.title.text == "op type"
    with pytest.raises(ValueError, match="empty"):
        op_comparison_figure([])


def tanh_gelu_model():
    """X[8, 64] -> Keras's approximate Gelu as tf2onnx writes it (eight elementwise nodes)."""
    import math

    import numpy as np

    def c(name, v):
        return numpy_helper.from_array(np.array(v, np.float32), name)

    inits = [c("three", 3.0), c("k", 0.044715), c("s", math.sqrt(2 / math.pi)), c("one", 1.0),
             c("half", 0.5)]
    nodes = [helper.make_node("Pow", ["X", "three"], ["p"], name="pow"),
             helper.make_node("Mul", ["k", "p"], ["kp"], name="mul_k"),
             helper.make_node("Add", ["X", "kp"], ["inner"], name="add_inner"),
             helper.make_node("Mul", ["s", "inner"], ["si"], name="mul_s"),
             helper.make_node("Tanh", ["si"], ["t"], name="tanh"),
             helper.make_node("Add", ["one", "t"], ["a"], name="add_one"),
             helper.make_node("Mul", ["X", "half"], ["xh"], name="mul_half"),
             helper.make_node("Mul", ["xh", "a"], ["Y"], name="gelu_out")]
    g = helper.make_graph(nodes, "gelu",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [8, 64])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [8, 64])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_profile_rows_of_a_node_a_pass_made_carry_its_op_type():
    """fuse-gelu replaces the eight nodes by one Gelu node of a new name; its profile row says
    Gelu (read from the compile's ONNX IR), not "?"."""
    from compilerkit.measure.profile import profile_nodes

    model = tanh_gelu_model()
    m = ck.optimize_onnx(ck.import_onnx(model))
    made = [n for n in Provenance(m).nodes if n["op"] == "Gelu"]
    if not made:
        pytest.skip("no fuse-gelu pass in this compilerkit")
    rows = profile_nodes(model, repeat=1)
    extra = [r for r in rows if r["node"] == made[0]["name"]]
    assert len(extra) == 1 and extra[0]["op_type"] == "Gelu" and extra[0]["seconds"] > 0
    assert not [r for r in rows if r["op_type"] == "?"]
