"""`compilerkit.measure.conformance` on tiny hand-made cases: each status (passed as given,
passed as the constant-static variant, refused, wrong) is produced and reported as such, and
the summaries count them."""

import time
from types import SimpleNamespace

import numpy as np
import onnx
from ckhelpers import make_model
from onnx import helper

from compilerkit.measure import conformance as cf


def _case(name, model, inputs, expected):
    # run_node_case reads only what onnx's TestCase has: name, model, data_sets.
    return SimpleNamespace(name=name, model=model, data_sets=[(inputs, expected)])


def _relu_case(expected=None):
    x = np.array([[-1.0, 2.0], [3.0, -4.0]], np.float32)
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", x)], ["y"])
    return _case("test_relu_tiny", model, [x], [np.maximum(x, 0) if expected is None
                                                else expected])


def _clip_case():
    # min/max arrive as graph inputs: compile() specialises on their values (specialize.py).
    x = np.linspace(-2, 2, 6, dtype=np.float32)
    lo, hi = np.float32(-1), np.float32(1)
    vi = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, s)
          for n, s in (("x", [6]), ("lo", []), ("hi", []))]
    g = helper.make_graph([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], "g", vi,
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [6])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    return _case("test_clip_tiny", model, [x, lo, hi], [np.clip(x, lo, hi)])


def test_a_correct_case_passes_as_given():
    r = cf.run_node_case(_relu_case())
    assert (r.status, r.variant, r.op, r.max_error) == (cf.PASSED, cf.GIVEN, "Relu", 0.0)
    assert r.seconds > 0


def test_a_wrong_expectation_is_reported_wrong_with_its_error():
    bad = np.array([[0.0, 2.0], [3.5, 0.0]], np.float32)  # 3.0 computed, 3.5 "expected"
    r = cf.run_node_case(_relu_case(bad))
    assert r.status == cf.WRONG
    assert r.max_error == 0.5
    assert "differs" in r.reason


def _dropout_case():
    # training_mode arrives as a graph input: refused as given (training is not compiled,
    # and compilerkit does not specialise on it); as a constant False it compiles.
    x = np.linspace(-2, 2, 6, dtype=np.float32)
    vi = [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [6]),
          helper.make_tensor_value_info("ratio", onnx.TensorProto.FLOAT, []),
          helper.make_tensor_value_info("training", onnx.TensorProto.BOOL, [])]
    g = helper.make_graph([helper.make_node("Dropout", ["x", "ratio", "training"], ["y"])],
                          "g", vi,
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [6])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    return _case("test_dropout_tiny", model, [x, np.float32(0.5), np.array(False)], [x])


def test_parameter_inputs_pass_as_given_or_as_the_constant_static_variant():
    r = cf.run_node_case(_clip_case())  # specialised on min/max
    assert (r.status, r.variant) == (cf.PASSED, cf.GIVEN)
    r = cf.run_node_case(_dropout_case())
    assert (r.status, r.variant) == (cf.PASSED, cf.CONSTANT)


def test_the_constant_static_variant_moves_parameters_to_initializers():
    case = _clip_case()
    model, rest, shapes = cf.constant_static_variant(case.model, case.data_sets[0][0])
    assert [i.name for i in model.graph.input] == ["x"]
    assert sorted(i.name for i in model.graph.initializer) == ["hi", "lo"]
    assert shapes == {"x": [6]} and len(rest) == 1


def test_an_unsupported_dtype_is_refused_with_a_reason():
    x = np.array([1, 2], np.uint8)
    model = make_model([helper.make_node("Add", ["x", "x"], ["y"])], [("x", x)], ["y"],
                       opset=14)  # Add takes uint8 from opset 14 on
    r = cf.run_node_case(_case("test_add_uint8", model, [x], [x + x]))
    assert r.status == cf.REFUSED_STATUS and r.max_error is None
    assert "UINT8" in r.reason
    assert cf.reason_group(r.reason) == ("element type not supported", "UINT8")


def test_compare():
    a = np.array([1.0, 2.0], np.float32)
    assert cf.compare([a], [a]) == (True, 0.0, "")
    ok, err, _ = cf.compare([a + 1e-6], [a])
    assert ok and 0 < err < 1e-5
    ok, err, _ = cf.compare([a + 1], [a])
    assert not ok and err == 1.0
    assert cf.compare([a[:1]], [a])[:2] == (False, float("inf"))
    assert cf.compare([], [a])[:2] == (False, float("inf"))
    nan = np.array([np.nan, 1.0])
    assert cf.compare([nan], [nan])[:2] == (True, 0.0)
    assert cf.compare([np.array([np.nan, 1.0])], [np.array([0.0, 1.0])])[:2] == (
        False, float("inf"))
    # An extra (optional) output the test does not check is ignored.
    assert cf.compare([a, a], [a])[0]


def test_reason_groups():
    assert cf.reason_group("NotImplementedError: ONNX element type 10 is not supported") == (
        "element type not supported", "FLOAT16")
    assert cf.reason_group("UnsupportedOpError: node 'Pad_0': op 'Pad': Pad mode 'wrap'") == (
        "Pad mode 'wrap'", "")


def test_summaries_count_each_status():
    rs = [cf.CaseResult("a", "Relu", cf.GIVEN, cf.PASSED, max_error=0.1),
          cf.CaseResult("b", "Relu", cf.CONSTANT, cf.PASSED, max_error=0.2),
          cf.CaseResult("c", "Relu", cf.CONSTANT, cf.REFUSED_STATUS, "E: node 'n': no"),
          cf.CaseResult("d", "Add", cf.GIVEN, cf.WRONG, "x", 3.0)]
    assert cf.totals(rs) == {"cases": 4, "passed": 1, "variant": 1, "refused": 1, "wrong": 1}
    s = cf.summarize(rs)
    assert list(s) == ["Add", "Relu"]
    assert (s["Relu"]["passed"], s["Relu"]["constant-static"], s["Relu"]["refused"]) == (2, 1, 1)
    assert s["Relu"]["max_error"] == 0.2 and s["Add"]["wrong"] == 1
    assert cf.refusal_groups(rs)["no"]["ops"] == {"Relu": 1}


def test_node_cases_select_by_op(monkeypatch):
    # Hand-made suite instead of onnx's (collecting that takes ~10 s): a Relu case, a Clip
    # case, and one whose op compilerkit does not lower at all.
    x = np.zeros(2, np.float32)
    other = make_model([helper.make_node("RandomUniformLike", ["x"], ["y"])], [("x", x)], ["y"])
    suite = (_relu_case(), _clip_case(), _case("test_random", other, [x], [x]))
    monkeypatch.setattr(cf, "_all_node_cases", lambda: suite)
    assert [c.name for c in cf.node_cases()] == ["test_relu_tiny", "test_clip_tiny"]
    assert [c.name for c in cf.node_cases(ops=["Clip"])] == ["test_clip_tiny"]
    assert [c.name for c in cf.node_cases(names={"test_relu_tiny"})] == ["test_relu_tiny"]
    seen = []
    results = cf.run_node_tests(ops=["Relu", "Clip"], progress=seen.append)
    assert [r.status for r in results] == [cf.PASSED, cf.PASSED] and seen == results


def test_the_tested_ops_are_the_lowering_registry():
    # Not a hand list that drifts: every op the registry lowers (and Constant, which
    # lower_to_krnl handles itself, and the sequence ops the frontend resolves) is selected,
    # and nothing else.
    from compilerkit.frontend.sequences import OPTIONAL_OPS, SEQUENCE_OPS
    from compilerkit.lowering import LOWERINGS
    assert set(cf.RESOLVED_OPS) <= set(SEQUENCE_OPS + OPTIONAL_OPS)
    assert set(cf.OPS) == set(LOWERINGS) | {"Constant"} | set(cf.RESOLVED_OPS)
    # The ops that were lowered but never tested before the list was derived.
    assert {"Split", "Tile", "Expand", "LogSoftmax", "ReduceMin", "ReduceProd", "GlobalMaxPool",
            "Ceil", "Floor", "Reciprocal", "ConstantOfShape"} <= set(cf.OPS)


def test_untested_ops_are_reported_with_a_reason(monkeypatch):
    # A suite with a Relu case and a RandomUniformLike+Sqrt case (the first is not lowered):
    # Relu is covered, Sqrt's only case needs an op we do not lower, Floor has no case at all,
    # and a placeholder op is no ONNX operator.
    x = np.ones(2, np.float32)
    rnd = make_model([helper.make_node("RandomUniformLike", ["x"], ["e"]),
                      helper.make_node("Sqrt", ["e"], ["y"])], [("x", x)], ["y"])
    monkeypatch.setattr(cf, "_all_node_cases",
                        lambda: (_relu_case(), _case("test_random_sqrt", rnd, [x], [x])))
    assert cf.op_coverage(["Relu", "Sqrt", "Floor"]) == {"Relu": 1, "Sqrt": 0, "Floor": 0}
    untested = cf.untested_ops(["Relu", "Sqrt", "Floor", "NoValue"])
    assert set(untested) == {"Sqrt", "Floor", "NoValue"}
    assert untested["Sqrt"] == "its node tests also use ops not lowered: RandomUniformLike"
    assert untested["Floor"].startswith("no ONNX backend node test (onnx ")
    assert untested["NoValue"].startswith("not an ONNX operator")


def test_run_model_compares_with_onnxruntime(tmp_path):
    x = np.ones((2, 3), np.float32)
    model = make_model([helper.make_node("Softmax", ["x"], ["y"])], [("x", x)], ["y"])
    path = tmp_path / "softmax.onnx"
    onnx.save(model, path)
    r = cf.run_model(str(path), opt_level=1)
    assert (r.name, r.op, r.variant, r.status) == ("softmax", "Softmax", "-O1", cf.PASSED)
    assert r.max_error < 1e-6
    assert r.ref_spread > 0  # run_model feeds seeded random inputs, not the ones above


def test_tables_show_every_row_and_escape_pipes():
    rs = [cf.CaseResult("a", "Relu", cf.GIVEN, cf.PASSED, max_error=0.0),
          cf.CaseResult("c", "Pad", cf.CONSTANT, cf.REFUSED_STATUS, "E: mode 'a|b'")]
    ops = cf.op_table(rs).splitlines()
    assert len(ops) == 2 + 2 + 1 and ops[-1].startswith("| **total** | 2 | 1 | 1 | 0")
    assert "mode 'a\\|b'" in cf.refusal_table(rs)
    models = cf.model_table([cf.CaseResult("m", "Conv", "-O3", cf.WRONG, "x", float("inf"))])
    assert "| m | -O3 | no | inf | - |" in models


def test_time_model_reports_agreement_and_timings(tmp_path):
    # Two chained MatMuls with seeded weights: the output depends on the input, so a match
    # with onnxruntime means something (unlike the light models' constant outputs).
    rng = np.random.default_rng(3)
    w1 = onnx.numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w1")
    w2 = onnx.numpy_helper.from_array(rng.standard_normal((16, 4)).astype(np.float32), "w2")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 4])], [w1, w2])
    path = tmp_path / "mlp.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)

    row = cf.time_model(str(path), opt_level=2, repeat=2)
    assert row["model"] == "mlp" and row["opt_level"] == 2
    assert row["matches"] is True and row["max_error"] < 1e-4
    # The timings are positive and the ratio is the one of the two latencies.
    assert row["compile_s"] > 0 and row["compilerkit_ms"] > 0 and row["ort_ms"] > 0
    assert abs(row["speed_ratio"] - row["ort_ms"] / row["compilerkit_ms"]) < 1e-9
    # The buffer plan shares memory: never more than one buffer per tensor.
    assert 0 < row["arena_bytes"] <= row["naive_bytes"]
    # The symbolic batch was timed as 1 (random_inputs fills unknown dimensions with 1).
    (name, x), = cf.random_inputs(str(path))
    assert name == "x" and x.shape == (1, 8)


def test_run_times_warm_up_once_then_time_each_call():
    calls = []
    times = cf.run_times(lambda: calls.append(len(calls)) or sum(range(1000)), repeat=4)
    assert len(calls) == 5 and len(times) == 4 and all(t > 0 for t in times)
    # best_seconds is the fastest of those timed calls: a sleep bounds it from below.
    # (the upper bound only says a time came back, not how fast: a loaded machine sleeps long)
    assert 0.01 <= cf.best_seconds(lambda: time.sleep(0.01), repeat=2) < 60
