"""compilerkit.measure.profile: per-node seconds of compiled code, timed in context, and
onnxruntime's profiler parsed into the same rows.

Expectations come from the model, not from the profiler: every ONNX node gets one row under its
own name (or the frontend's OpType_index label), and a node doing ~10^4x the arithmetic of the
others takes most of the time."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import compilerkit as ck
from compilerkit.measure import profile as prof

N = 192  # the MatMul: 2 * N^3 = 14 MFLOP; every other node touches N^2 floats at most


def small_model(named=True):
    """X[N, N] -> MatMul(W) -> Add(b) -> Relu -> Reshape -> ReduceSum: one heavy node."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((N, N)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal(N).astype(np.float32), "b"),
             numpy_helper.from_array(np.array([N * N], np.int64), "flat")]
    nodes = [helper.make_node("MatMul", ["X", "W"], ["mm"]),
             helper.make_node("Add", ["mm", "b"], ["add"]),
             helper.make_node("Relu", ["add"], ["relu"]),
             helper.make_node("Reshape", ["relu", "flat"], ["r"]),
             helper.make_node("ReduceSum", ["r"], ["Y"], keepdims=1)]
    if named:
        for k, n in enumerate(nodes):
            n.name = f"node_{k}_{n.op_type.lower()}"
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                                          [N, N])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture(scope="module", params=[True, False], ids=["named", "unnamed"])
def profiled(request):
    model = small_model(named=request.param)
    return model, prof.profile_nodes(model, num_threads=1, repeat=3)


def test_rows_name_every_node_in_graph_order(profiled):
    model, rows = profiled
    nodes = [r for r in rows if r["op_type"] != "untimed"]
    expected = [(n.name or f"{n.op_type}_{k}", n.op_type) for k, n in enumerate(model.graph.node)]
    # No "?" rows: every nest was tagged with a node the graph has (the labels agree with the
    # frontend's, also for unnamed nodes).
    assert [(r["node"], r["op_type"]) for r in nodes] == expected
    assert rows[-1]["node"] == "(rest of the run)" and rows[-1]["seconds"] >= 0


def test_totals_positive_and_the_heavy_node_dominates(profiled):
    _, rows = profiled
    nodes = [r for r in rows if r["op_type"] != "untimed"]
    assert all(r["seconds"] >= 0 for r in nodes)
    assert sum(r["seconds"] for r in nodes) > 0
    assert abs(sum(r["share"] for r in nodes) - 1) < 1e-9
    totals = prof.op_totals(rows)
    assert all(v >= 0 for v in totals.values()) and "untimed" not in totals
    # 14 MFLOP against a few 10^4 element-wise operations: the MatMul is the top row.
    assert prof.top_nodes(rows, 1)[0]["op_type"] == "MatMul"
    assert totals["MatMul"] > 0.5 * sum(totals.values())


def test_profiled_code_computes_what_the_plain_compile_does():
    # The clocks only wrap calls: the instrumented compile must not change the model. The
    # reference is an independent run of the plain compile and numpy.
    model = small_model()
    x = np.random.default_rng(1).standard_normal((N, N)).astype(np.float32)
    w = numpy_helper.to_array(model.graph.initializer[0])
    b = numpy_helper.to_array(model.graph.initializer[1])
    expect = np.maximum(x @ w + b, 0).sum()
    rows = prof.profile_nodes(model, repeat=1, feeds=[("X", x)])
    assert len(rows) == len(model.graph.node) + 1
    got = ck.compile(model, asm=False).run(x)[0]
    np.testing.assert_allclose(got, [expect], rtol=1e-4)


def test_threads_field_says_what_ran():
    rows = prof.profile_nodes(small_model(), num_threads=2, repeat=1)
    supported = "num_threads" in __import__("inspect").signature(ck.CompiledModel.run).parameters
    assert {r["threads"] for r in rows} == ({2} if supported else {"not supported"})


def test_onnxruntime_profile_rows():
    model = small_model()
    x = np.random.default_rng(1).standard_normal((N, N)).astype(np.float32)
    rows = prof.ort_profile_nodes(model, [("X", x)], num_threads=1, repeat=2)
    assert rows and all(r["seconds"] >= 0 for r in rows)
    # onnxruntime fuses MatMul + Add (+ Relu) into one kernel (FusedGemm): that row is the top.
    top = prof.top_nodes(rows, 1)[0]
    assert "Gemm" in top["op_type"] or "MatMul" in top["op_type"]
    assert top["share"] > 0.5
    assert abs(sum(r["share"] for r in rows) - 1) < 1e-9


def test_parse_ort_profile_hand_worked():
    # Two kernels over three runs (the first is warm-up): medians of the last two, in seconds.
    ev = [{"cat": "Session", "name": "model_run", "dur": 999},
          {"cat": "Node", "name": "conv_fence_before", "dur": 1}]
    for a, b in ((100, 7), (30, 2), (50, 4)):
        ev += [{"cat": "Node", "name": "conv_kernel_time", "dur": a, "args": {"op_name": "Conv"}},
               {"cat": "Node", "name": "relu_kernel_time", "dur": b, "args": {"op_name": "Relu"}}]
    rows = prof.parse_ort_profile(ev, skip_runs=1)
    assert [(r["node"], r["op_type"]) for r in rows] == [("conv", "Conv"), ("relu", "Relu")]
    assert rows[0]["seconds"] == pytest.approx(40e-6) and rows[1]["seconds"] == pytest.approx(3e-6)
    assert rows[0]["share"] == pytest.approx(40 / 43)


def test_parse_ov_profile_hand_worked():
    """Three runs (the first warm-up): medians of the last two; a fused Conv's layer name loses
    its /WithoutBiases; layers OpenVINO did not execute are left out."""
    def run(conv, pool):
        return [{"node": "conv1/WithoutBiases", "op_type": "Convolution",
                 "exec_type": "brgconv_avx512_1x1_f32", "seconds": conv, "status": "EXECUTED"},
                {"node": "relu1", "op_type": "Relu", "exec_type": "undef", "seconds": 0.0,
                 "status": "OPTIMIZED_OUT"},
                {"node": "pool", "op_type": "MaxPool", "exec_type": "jit_avx512_f32",
                 "seconds": pool, "status": "EXECUTED"}]
    rows = prof.parse_ov_profile([run(9.0, 9.0), run(3.0, 1.0), run(5.0, 2.0)], skip_runs=1)
    assert [(r["node"], r["op_type"], r["exec_type"]) for r in rows] == [
        ("conv1", "Convolution", "brgconv_avx512_1x1_f32"), ("pool", "MaxPool",
                                                            "jit_avx512_f32")]
    assert rows[0]["seconds"] == pytest.approx(4.0) and rows[1]["seconds"] == pytest.approx(1.5)
    assert rows[0]["share"] == pytest.approx(4 / 5.5)


def test_openvino_profile_rows_keep_the_onnx_node_names():
    pytest.importorskip("openvino")
    model = small_model()
    x = np.random.default_rng(1).standard_normal((N, N)).astype(np.float32)
    rows = prof.ov_profile_nodes(model, [("X", x)], num_threads=1, repeat=2)
    assert rows and all(r["seconds"] >= 0 for r in rows)
    names = {n.name for n in model.graph.node}
    assert any(r["node"] in names for r in rows)


def test_op_totals_and_top_nodes_hand_worked():
    rows = [{"node": "a", "op_type": "Conv", "seconds": 2.0},
            {"node": "b", "op_type": "Relu", "seconds": 0.5},
            {"node": "c", "op_type": "Conv", "seconds": 1.0},
            {"node": "(rest of the run)", "op_type": "untimed", "seconds": 9.0}]
    assert prof.op_totals(rows) == {"Conv": 3.0, "Relu": 0.5}
    assert [r["node"] for r in prof.top_nodes(rows, 2)] == ["a", "c"]


def test_bad_models_raise_clear_errors(tmp_path):
    with pytest.raises(ck.ModelError, match="no_such.onnx"):
        prof.profile_nodes(tmp_path / "no_such.onnx")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00not a protobuf\xff" * 4)
    with pytest.raises(ck.ModelError, match="junk.onnx"):
        prof.profile_nodes(junk)
    empty = helper.make_model(helper.make_graph(
        [], "empty", [], [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1])]))
    with pytest.raises(ck.ModelError, match="no nodes"):
        prof.profile_nodes(empty)
    with pytest.raises(ValueError, match="repeat"):
        prof.profile_nodes(small_model(), repeat=0)
    # A node compilerkit cannot compile: the compiler's own error, naming node and op.
    bad = small_model()
    bad.graph.node[2].op_type = "NoSuchOp"
    with pytest.raises(ck.UnsupportedOpError, match="node_2_relu.*NoSuchOp"):
        prof.profile_nodes(bad)


def test_bench_table_and_figure_from_a_hand_made_result():
    # The shape benchmarks/compile_bench.py writes; one failed model is listed, not plotted.
    stage = {"onnx-ir": 0.5, "kernel-ir": 1.0, "llvm-ir": 2.0, "asm": 0.5}
    ok = dict(rel_error=2e-6, agrees=True, compile_s=4.0, stage_s=stage, ck_1_best_ms=10.0,
              ort_1_best_ms=5.0, ratio_1=0.5, ck_2_best_ms=5.0, ort_2_best_ms=4.0, ratio_2=0.8)
    result = {"size": "small", "repeat": 3, "floor": 0.8,
              "rows": [{"model": "a", **ok}, {"model": "b", **ok, "ratio_1": 2.0},
                       {"model": "c", "error": "ModelError: node 'x' | bad"}],
              "geomean_ratio": {"1": 1.0, "2": 0.8},
              "load": {"start": {"cpus": 2, "loadavg": [1.0, 1.0, 1.0]}}}
    table = prof.bench_table(result).splitlines()
    assert len(table) == 2 + 3 + 1  # header, rule, three models, geomean
    assert table[2].split(" | ")[5] == "0.50" and "failed" in table[4] and "**1.00**" in table[5]
    assert table[4].count("|") == table[0].count("|")  # the failed row keeps the columns
    fig = prof.bench_figure(result)
    ratio_bars = [t for t in fig.data if t.offsetgroup != "stages"]
    stage_bars = [t for t in fig.data if t.offsetgroup == "stages"]
    assert [list(t.y) for t in ratio_bars] == [[0.5, 2.0], [0.8, 0.8]]
    assert len(stage_bars) == 4 and list(stage_bars[-1].base) == [3.5, 3.5]  # stacked
