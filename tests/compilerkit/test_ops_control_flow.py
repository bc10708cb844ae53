"""If, Loop and Scan (unrolled and inlined by the frontend, frontend/control_flow.py) against
onnxruntime: hand-built models with outer-scope reads, carried values, scan outputs, while
loops, nested control flow, If on computed conditions (the untaken branch's guards must not
report), Scan in both forms; a Keras GRU exported by tf2onnx (a Loop); and clear refusals."""

import numpy as np
import pytest
from ckhelpers import keras_to_onnx, node_test_passes, ort_run
from onnx import TensorProto, helper, numpy_helper

import compilerkit as ck

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, array):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
        np.asarray(array)))


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs,
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def agree(m, feeds, rtol=1e-5, atol=1e-6, **options):
    ref = ort_run(m, feeds)
    got = ck.compile(m, asm=False, **options).run(*feeds)
    assert len(got) == len(ref)
    for g, r in zip(got, ref, strict=True):
        assert g.shape == r.shape and g.dtype == r.dtype
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)
    return got


def loop_model(trip=4, opset=17):
    # y_{k+1} = y_k * w + x[k] (x, w read from the outer scope); scan output y_k + k.
    body = helper.make_graph([
        helper.make_node("Gather", ["x", "i"], ["row"], axis=0),
        helper.make_node("Mul", ["y_in", "w"], ["yw"]),
        helper.make_node("Add", ["yw", "row"], ["y_out"]),
        helper.make_node("Cast", ["i"], ["fi"], to=F),
        helper.make_node("Add", ["y_out", "fi"], ["scan"]),
        helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("y_in", F, [3])],
        [vi("c_out", B, []), vi("y_out", F, [3]), vi("scan", F, [3])])
    nodes = [helper.make_node("Shape", ["x"], ["xs"]),  # the trip count from a static shape
             helper.make_node("Gather", ["xs", "zero"], ["n"], axis=0),
             helper.make_node("Loop", ["n" if trip is None else "M", "", "y0"],
                              ["y", "ys"], body=body)]
    inits = [("zero", np.int64(0)), ("w", np.float32([0.5, -1.0, 2.0])),
             ("y0", np.float32([1, 2, 3]))]
    if trip is not None:
        inits.append(("M", np.int64(trip)))
    return model(nodes, [vi("x", F, [4, 3])], [vi("y", F, [3]), vi("ys", F, None)], inits,
                 opset)


@pytest.mark.parametrize("trip", [None, 4, 2, 0])
def test_loop_constant_trip_count_carried_values_and_scan_outputs(trip):
    # trip 0: the carried value comes back as given, the scan output empty ([0, 3]).
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    got = agree(loop_model(trip), [x])
    assert got[1].shape == (4 if trip is None else trip, 3)


def test_loop_at_opset_11_uses_attribute_unsqueeze():
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    agree(loop_model(3, opset=11), [x])


def while_model():
    # while (i < n and sum < limit): s += x[i]; i += 1  -- the condition is computed from data;
    # the trip count (x's length) bounds it. Past the end, Gather(x, i) would be out of range:
    # those iterations must not report.
    body = helper.make_graph([
        helper.make_node("Gather", ["x", "j"], ["row"], axis=0),
        helper.make_node("Add", ["s_in", "row"], ["s_out"]),
        helper.make_node("Add", ["j", "one"], ["j_out"]),
        helper.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
        helper.make_node("Less", ["total", "limit"], ["c_out"])], "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("j", I64, []), vi("s_in", F, [2])],
        [vi("c_out", B, []), vi("j_out", I64, []), vi("s_out", F, [2])])
    nodes = [helper.make_node("Loop", ["M", "c0", "j0", "s0"], ["j", "s"], body=body)]
    return model(nodes, [vi("x", F, [5, 2]), vi("limit", F, [])],
                 [vi("j", I64, []), vi("s", F, [2])],
                 [("M", np.int64(7)), ("c0", np.bool_(True)), ("j0", np.int64(0)),
                  ("one", np.int64(1)), ("s0", np.zeros(2, np.float32))])


@pytest.mark.parametrize("limit", [3.0, 100.0, -1.0])
def test_while_loop_freezes_after_its_condition_and_reports_nothing(limit):
    # limit 100: the condition never stops it before M = 7 > 5 rows: onnxruntime would fail on
    # Gather there, so that case is compared with numpy's expectation of the first 5 rows only.
    x = np.arange(10, dtype=np.float32).reshape(5, 2) / 4
    m = while_model()
    if limit < 50:
        agree(m, [x, np.array(limit, np.float32)])
        return
    with pytest.raises(ck.RunError, match="Gather"):
        ck.compile(m, asm=False).run(x, np.array(limit, np.float32))


def if_gather_model():
    # If (i < n) then Gather(x, i) else zeros: n = x's length from Shape; the then branch
    # indexes out of range when it is not taken.
    then = helper.make_graph([helper.make_node("Gather", ["x", "i"], ["t"], axis=0)], "then",
                             [], [vi("t", F, [3])])
    other = helper.make_graph([helper.make_node("Mul", ["zeros", "w"], ["e"])], "else", [],
                              [vi("e", F, [3])])
    nodes = [helper.make_node("Shape", ["x"], ["xs"]),
             helper.make_node("Gather", ["xs", "zero"], ["n"], axis=0),
             helper.make_node("Less", ["i", "n"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    return model(nodes, [vi("x", F, [4, 3]), vi("i", I64, [])], [vi("y", F, [3])],
                 [("zero", np.int64(0)), ("zeros", np.zeros(3, np.float32)),
                  ("w", np.float32([1, 2, 3]))])


def test_if_on_a_computed_condition_untaken_branch_reports_no_guard():
    x = np.random.default_rng(2).standard_normal((4, 3)).astype(np.float32)
    compiled = ck.compile(if_gather_model(), asm=False)
    for i in (0, 3, 4, 9):  # 4 and 9: the Gather branch is untaken and would be out of range
        feeds = [x, np.array(i, np.int64)]
        got = compiled.run(*feeds)[0]
        np.testing.assert_array_equal(got, ort_run(if_gather_model(), feeds)[0])
    ir = compiled.stages["onnx-ir"]
    assert "onnx_guards" in ir and "onnx_guard =" in ir


def test_if_untaken_integer_division_by_zero_does_not_report():
    then = helper.make_graph([helper.make_node("Div", ["a", "d"], ["t"])], "then", [],
                             [vi("t", I64, [2])])
    other = helper.make_graph([helper.make_node("Sub", ["a", "d"], ["e"])], "else", [],
                              [vi("e", I64, [2])])
    nodes = [helper.make_node("Mul", ["d", "d"], ["dd"]),
             helper.make_node("ReduceMin", ["dd"], ["ddmin"], keepdims=0),
             helper.make_node("Greater", ["ddmin", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    m = model(nodes, [vi("a", I64, [2]), vi("d", I64, [2])], [vi("y", I64, [2])],
              [("zero", np.int64(0))])
    compiled = ck.compile(m, asm=False)
    a = np.int64([7, -9])
    for d in (np.int64([2, -4]), np.int64([0, 3])):
        np.testing.assert_array_equal(compiled.run(a, d)[0], ort_run(m, [a, d])[0])


def test_if_with_a_constant_condition_inlines_the_taken_branch_of_any_shape():
    then = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["t"], axis=0)], "then",
                             [], [vi("t", F, None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [vi("e", F, None)])
    nodes = [helper.make_node("Size", ["x"], ["n"]),
             helper.make_node("Greater", ["n", "four"], ["c"]),  # 6 > 4: known on import
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    m = model(nodes, [vi("x", F, [2, 3])], [vi("y", F, None)], [("four", np.int64(4))])
    got = agree(m, [np.ones((2, 3), np.float32)])
    assert got[0].shape == (4, 3)


def test_if_branches_of_different_shapes_on_a_computed_condition_are_refused():
    then = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["t"], axis=0)], "then",
                             [], [vi("t", F, None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [vi("e", F, None)])
    m = model([helper.make_node("If", ["c"], ["y"], name="pick", then_branch=then,
                                else_branch=other)],
              [vi("x", F, [2, 3]), vi("c", B, [])], [vi("y", F, None)])
    with pytest.raises(ck.UnsupportedOpError, match=r"node 'pick' \(If\).*output 0 differs "
                       r"between the branches \(then float32\[4, 3\], else float32\[2, 3\]\)"):
        ck.compile(m, asm=False)


def test_nested_loop_in_if_in_loop_reads_outer_values():
    # Outer loop k = 0..2: if k is even, an inner loop adds x three times, else subtract x.
    inner = helper.make_graph([
        helper.make_node("Add", ["a_in", "x"], ["a_out"]),
        helper.make_node("Identity", ["ci"], ["co"])], "inner",
        [vi("j", I64, []), vi("ci", B, []), vi("a_in", F, [2])],
        [vi("co", B, []), vi("a_out", F, [2])])
    then = helper.make_graph([helper.make_node("Loop", ["three", "", "acc"], ["t"],
                                               body=inner)], "then", [], [vi("t", F, [2])])
    other = helper.make_graph([helper.make_node("Sub", ["acc", "x"], ["e"])], "else", [],
                              [vi("e", F, [2])])
    outer = helper.make_graph([
        helper.make_node("Mod", ["k", "two"], ["r"]),
        helper.make_node("Equal", ["r", "zero"], ["even"]),
        helper.make_node("If", ["even"], ["acc_out"], then_branch=then, else_branch=other),
        helper.make_node("Identity", ["c"], ["c_out"])], "outer",
        [vi("k", I64, []), vi("c", B, []), vi("acc", F, [2])],
        [vi("c_out", B, []), vi("acc_out", F, [2])])
    m = model([helper.make_node("Loop", ["M", "", "acc0"], ["y"], body=outer)],
              [vi("x", F, [2])], [vi("y", F, [2])],
              [("M", np.int64(3)), ("three", np.int64(3)), ("two", np.int64(2)),
               ("zero", np.int64(0)), ("acc0", np.float32([1, -1]))])
    agree(m, [np.float32([0.25, 2.0])])


def test_nested_computed_if_inside_a_computed_if():
    inner_then = helper.make_graph([helper.make_node("Gather", ["x", "i"], ["it"], axis=0)],
                                   "it", [], [vi("it", F, [])])
    inner_else = helper.make_graph([helper.make_node("Identity", ["zf"], ["ie"])], "ie", [],
                                   [vi("ie", F, [])])
    then = helper.make_graph([
        helper.make_node("Less", ["i", "four"], ["c2"]),
        helper.make_node("If", ["c2"], ["t"], then_branch=inner_then, else_branch=inner_else)],
        "then", [], [vi("t", F, [])])
    other = helper.make_graph([helper.make_node("Neg", ["zf"], ["e"])], "else", [],
                              [vi("e", F, [])])
    m = model([helper.make_node("GreaterOrEqual", ["i", "zero"], ["c1"]),
               helper.make_node("If", ["c1"], ["y"], then_branch=then, else_branch=other)],
              [vi("x", F, [4]), vi("i", I64, [])], [vi("y", F, [])],
              [("zero", np.int64(0)), ("four", np.int64(4)), ("zf", np.float32(0.5))])
    compiled = ck.compile(m, asm=False)
    x = np.float32([1, 2, 3, 4])
    for i in (-3, 0, 3, 4, 7):
        np.testing.assert_array_equal(compiled.run(x, np.array(i, np.int64))[0],
                                      ort_run(m, [x, np.array(i, np.int64)])[0])


def scan9_model(in_axis=1, in_dir=1, out_axis=-1, out_dir=1):
    body = helper.make_graph([
        helper.make_node("Add", ["s_in", "xt"], ["s_out"]),
        helper.make_node("Mul", ["s_out", "w"], ["yt"])], "body",
        [vi("s_in", F, [2]), vi("xt", F, [2])], [vi("s_out", F, [2]), vi("yt", F, [2])])
    node = helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1,
                            scan_input_axes=[in_axis], scan_input_directions=[in_dir],
                            scan_output_axes=[out_axis], scan_output_directions=[out_dir])
    return model([node], [vi("s0", F, [2]), vi("x", F, [2, 3] if in_axis == 1 else [3, 2])],
                 [vi("s", F, [2]), vi("y", F, None)], [("w", np.float32([2, -1]))])


@pytest.mark.parametrize(("in_axis", "in_dir", "out_axis", "out_dir"),
                         [(0, 0, 0, 0), (1, 1, -1, 1), (1, 0, 1, 0), (0, 1, 0, 1)])
def test_scan9_axes_and_directions(in_axis, in_dir, out_axis, out_dir):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3) if in_axis == 1 else (3, 2)).astype(np.float32)
    agree(scan9_model(in_axis, in_dir, out_axis, out_dir),
          [np.float32([0.5, 1.0]), x])


def test_scan8_batched_with_reverse_direction():
    body = helper.make_graph([
        helper.make_node("Add", ["s_in", "xt"], ["s_out"]),
        helper.make_node("Identity", ["s_out"], ["yt"])], "body",
        [vi("s_in", F, [2]), vi("xt", F, [2])], [vi("s_out", F, [2]), vi("yt", F, [2])])
    node = helper.make_node("Scan", ["", "s0", "x"], ["s", "y"], body=body, num_scan_inputs=1,
                            directions=[1])
    m = model([node], [vi("s0", F, [2, 2]), vi("x", F, [2, 3, 2])],
              [vi("s", F, [2, 2]), vi("y", F, [2, 3, 2])], opset=8)
    rng = np.random.default_rng(4)
    agree(m, [rng.standard_normal((2, 2)).astype(np.float32),
              rng.standard_normal((2, 3, 2)).astype(np.float32)])


def test_scan8_of_ir_version_3_with_unlisted_initializers():
    # Old exporters (IR 3) and onnxruntime accept initializers not listed as graph inputs;
    # ONNX's type inference only types listed ones, so the frontend lists them.
    body = helper.make_graph([helper.make_node("Add", ["s_in", "xt"], ["s_out"]),
                              helper.make_node("Identity", ["s_out"], ["yt"])], "body",
                             [vi("s_in", F, [2]), vi("xt", F, [2])],
                             [vi("s_out", F, [2]), vi("yt", F, [2])])
    rng = np.random.default_rng(8)
    node = helper.make_node("Scan", ["", "s0", "x"], ["s", "y"], body=body, num_scan_inputs=1)
    m = model([node], [], [vi("s", F, [1, 2]), vi("y", F, [1, 3, 2])],
              [("s0", rng.standard_normal((1, 2)).astype(np.float32)),
               ("x", rng.standard_normal((1, 3, 2)).astype(np.float32))], opset=8)
    m.ir_version = 3
    agree(m, [])


def test_run_time_trip_count_is_refused():
    m = loop_model(4)
    m.graph.initializer.pop()  # M becomes a graph input
    m.graph.input.append(vi("M", I64, []))
    with pytest.raises(ck.UnsupportedOpError, match=r"\(Loop\): its trip count \(input 0, 'M'"
                       r"\) is only known at run time"):
        ck.import_onnx(m)


def test_while_loop_with_scan_outputs_is_refused():
    m = loop_model(4)
    body = m.graph.node[-1].attribute[0].g
    body.node[-1].CopyFrom(helper.make_node("Less", ["fi", "half"], ["c_out"]))
    m.graph.node[-1].name = "loop"
    m.graph.input.append(vi("half", F, []))
    with pytest.raises(ck.UnsupportedOpError, match=r"node 'loop' \(Loop\): its condition .* "
                       r"scan output\(s\) would have a run-time length"):
        ck.import_onnx(m)


def test_unroll_limit_is_an_option_with_a_clear_error():
    x = np.ones((4, 3), np.float32)
    m = loop_model(4)
    m.graph.node[-1].name = "loop"
    with pytest.raises(ck.UnsupportedOpError, match=r"node 'loop' \(Loop\): unrolling it passes "
                       r"the unroll limit max_unroll=3"):
        ck.compile(m, asm=False, max_unroll=3)
    assert ck.compile(m, asm=False, max_unroll=4).run(x)[1].shape == (4, 3)
    with pytest.raises(ck.OptionError, match="max_unroll must be a positive int"):
        ck.compile(m, asm=False, max_unroll=0)


def test_node_tests_pass():
    passed = node_test_passes(["If", "Loop", "Scan"])
    # test_if and affine_grid_*_expanded; test_loop11 and range_*_expanded (compiled for their
    # shape inputs and trip count: specialize.py);
    # scan_sum, scan9_* and the linear_attention_*_expanded cases (13: not the float16 one)
    assert passed["If"] >= 1 + 4 and passed["Loop"] >= 3 and passed["Scan"] >= 4 + 13


def test_emulated_s390x_agrees_with_the_host():
    pytest.importorskip("unicorn")
    x = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    m = if_gather_model()
    host = ck.compile(m, asm=False).run(x, np.array(2, np.int64))
    for i in (2, 6):
        got = ck.compile(m, target="s390x", asm=False).run(x, np.array(i, np.int64))
        np.testing.assert_array_equal(got[0], ort_run(m, [x, np.array(i, np.int64)])[0])
    assert host[0].shape == (3,)


def test_ptx_text_compiles():
    # The guarded branch's check reads the condition inside its kernel: one .entry per launch.
    cm = ck.compile(if_gather_model(), target="gpu")
    ptx = cm.stages["ptx"]
    assert ptx.count(".visible .entry") == len(cm.session.launches) >= 3
    assert "nvptx64-nvidia-cuda" in cm.stages["llvm-ir"]


@pytest.mark.gpu
def test_gpu_runs_the_guarded_if_and_a_loop():
    x = np.random.default_rng(7).standard_normal((4, 3)).astype(np.float32)
    cm = ck.compile(if_gather_model(), target="gpu", asm=False)
    for i in (1, 4, 9):
        feeds = [x, np.array(i, np.int64)]
        np.testing.assert_array_equal(cm.run(*feeds)[0], ort_run(if_gather_model(), feeds)[0])
    agree(loop_model(4), [x], target="gpu", rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # importing Keras and TensorFlow takes most of it
def test_keras_gru_export_is_a_loop_and_agrees():
    keras = pytest.importorskip("keras")
    keras.utils.set_random_seed(0)
    net = keras.Sequential([keras.Input((5, 3)), keras.layers.GRU(4, return_sequences=True),
                            keras.layers.GRU(3)])
    x = np.random.default_rng(6).standard_normal((2, 5, 3)).astype(np.float32)
    want = np.asarray(net(x))
    exported = keras_to_onnx(net)
    assert "Loop" in [n.op_type for n in exported.graph.node]
    name = exported.graph.input[0].name
    got = ck.compile(exported, asm=False, input_shapes={name: [2, 5, 3]}).run(x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, ort_run(exported, [x])[0], rtol=1e-5, atol=1e-6)
