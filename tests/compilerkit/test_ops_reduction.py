"""ReduceL1 / L2 / SumSquare / LogSum / LogSumExp (lowering/reduction.py) against onnxruntime:
axes as attribute (opset 13) and as constant input (opset 18), keepdims 0/1, all axes, integer
inputs where ONNX allows them, infinities and NaN, logits far beyond exp's range; ONNX's node
tests for each op."""

import numpy as np
import pytest
from ckhelpers import make_model, node_test_passes, ort_run
from onnx import helper

import compilerkit as ck

N = helper.make_node
R = np.random.default_rng(29)
OPS = ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


def _model(op, x, axes, keepdims, opset):
    if opset >= 18 and axes is not None:
        node = N(op, ["x", "axes"], ["out"], keepdims=keepdims)
        inits = [("axes", np.array(axes, np.int64))]
    else:
        node = N(op, ["x"], ["out"], keepdims=keepdims,
                 **({"axes": axes} if axes is not None else {}))
        inits = []
    return make_model([node], [("x", x)], ["out"], inits=inits, opset=opset)


def _check(model, x, rtol=1e-5, atol=1e-6, exact=False):
    ref = ort_run(model, [x])[0]
    got = ck.compile(model, asm=False).run(x)[0]
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    if exact:
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(("axes", "keepdims", "opset"), [
    ([1], 1, 13), ([0, 2], 0, 13), (None, 1, 13), ([-1], 0, 18), ([0, 1], 1, 18), (None, 0, 18)])
def test_reduce_axes_keepdims(op, axes, keepdims, opset):
    x = (R.random((3, 4, 5)) * 4 + 0.1).astype(np.float32)
    _check(_model(op, x, axes, keepdims, opset), x)


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceSumSquare"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_reductions_exact(op, dtype):
    x = R.integers(-1000, 1000, (4, 6)).astype(dtype)
    _check(_model(op, x, [1], 1, 13), x, exact=True)


def test_logsumexp_beyond_exp_range_and_infinities():
    x = np.array([[1000.0, 999.0, -5.0], [-1000.0, -1001.0, -1002.0],
                  [-np.inf, -np.inf, -np.inf], [np.inf, 1.0, 2.0], [np.nan, 1.0, 2.0],
                  [-np.inf, 0.0, 1.0]], np.float32)
    _check(_model("ReduceLogSumExp", x, [1], 0, 13), x)


@pytest.mark.parametrize("op", OPS)
def test_special_values(op):
    x = np.array([[np.nan, 1.0], [np.inf, 2.0], [-np.inf, 3.0], [0.0, -0.0], [1e-30, 1e30]],
                 np.float32)
    if op == "ReduceLogSum":
        x = np.abs(x)
    _check(_model(op, x, [1], 1, 13), x)


@pytest.mark.parametrize("op", OPS)
def test_float64(op):
    x = R.random((3, 7)) + 0.5
    _check(_model(op, x, [1], 1, 13), x, rtol=1e-6)


def test_repeated_axes_reduced_once():
    # onnxruntime reduces a repeated axis once (reducing it twice scaled a mean down).
    x = R.standard_normal((2, 3)).astype(np.float32)
    for op in ("ReduceL1", "ReduceMean"):
        _check(_model(op, x, [1, -1], 1, 13), x, rtol=1e-6)


def test_integer_logsum_refused_naming_dtype():
    x = np.ones((2, 3), np.int32)
    model = make_model([N("ReduceLogSum", ["x"], ["out"], axes=[1], name="r")], [("x", x)],
                       ["out"])
    with pytest.raises(ck.UnsupportedOpError, match=r"node 'r'.*ReduceLogSum on i32"):
        ck.compile(model, asm=False)


def test_emulated_s390x_logsumexp():
    x = np.array([[1000.0, 999.0, -5.0], [0.5, -0.25, 2.0]], np.float32)
    model = _model("ReduceLogSumExp", x, [1], 1, 13)
    got = ck.compile(model, target="s390x", asm=False).run(x)[0]
    np.testing.assert_array_equal(got, ck.compile(model, asm=False).run(x)[0])
    np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-5)


ARG_X = np.array([[1, np.nan, 3, np.nan], [np.nan, 5, 1, 2], [2, 2, 1, 1],
                  [-np.inf, -np.inf, -np.inf, -np.inf], [1, 3, np.nan, 3], [-0.0, 0.0, 0.0, -0.0]],
                 np.float32)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize(("axis", "keepdims"), [(1, 1), (-1, 0), (0, 1), (0, 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.int8])
def test_arg_extremes_ties_nan_and_axes(op, last, axis, keepdims, dtype):
    # NaN is never chosen after the first position and a leading NaN stays (onnxruntime's
    # ordered compares); ties give the first index, or the last with select_last_index.
    x = ARG_X if np.dtype(dtype).kind == "f" else R.integers(-3, 3, ARG_X.shape)
    x = x.astype(dtype)
    model = make_model([N(op, ["x"], ["out"], axis=axis, keepdims=keepdims,
                          select_last_index=last)], [("x", x)], ["out"])
    _check(model, x, exact=True)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_cumsum(exclusive, reverse, axis, dtype):
    x = (R.standard_normal((3, 4, 5)) * 100).astype(dtype)
    model = make_model([N("CumSum", ["x", "axis"], ["out"], exclusive=exclusive,
                          reverse=reverse)], [("x", x)], ["out"],
                       inits=[("axis", np.array(axis, np.int64))], opset=14)
    _check(model, x, exact=np.dtype(dtype).kind == "i", rtol=1e-6)


@pytest.mark.parametrize("axis", [0, 2])
def test_cumsum_big_enough_for_threads(axis):
    # 64 x 32 x 32: above the parallel scheduler's threshold. The running sums are a
    # reduction's accumulator, so the axis loop stays serial whichever loop runs in parallel.
    x = R.integers(-50, 50, (64, 32, 32)).astype(np.int32)
    model = make_model([N("CumSum", ["x", "axis"], ["out"], reverse=1)], [("x", x)], ["out"],
                       inits=[("axis", np.array([axis], np.int32))], opset=14)
    _check(model, x, exact=True)


def test_cumsum_axis_given_at_run_time_is_specialised():
    # The axis decides the nest, so compile specialises on its value (compilerkit.specialize):
    # each axis gets its own compiled form, checked against onnxruntime.
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = make_model([N("CumSum", ["x", "axis"], ["out"], name="cs")],
                       [("x", x), ("axis", np.array(1, np.int64))], ["out"], opset=14)
    with pytest.warns(ck.SpecializationWarning):
        cm = ck.compile(model, asm=False)
        for axis in (1, 0, -1):
            a = np.array(axis, np.int64)
            np.testing.assert_array_equal(cm.run(x, a)[0], ort_run(model, [x, a])[0])


@pytest.mark.parametrize(("axis", "opset"), [(-1, 13), (0, 13), (1, 11), (0, 11)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hardmax_ties_and_axes(axis, opset, dtype):
    x = R.integers(-2, 2, (3, 4, 5)).astype(dtype)  # many ties: the first maximum wins
    x[0, 0, 0] = -np.inf
    model = make_model([N("Hardmax", ["x"], ["out"], axis=axis)], [("x", x)], ["out"],
                       opset=opset)
    if dtype is np.float32:
        _check(model, x, exact=True)
    else:  # onnxruntime has no double Hardmax: its answer for the same values in float32
        got = ck.compile(model, asm=False).run(x)[0]
        x32 = x.astype(np.float32)
        model32 = make_model([N("Hardmax", ["x"], ["out"], axis=axis)], [("x", x32)], ["out"],
                             opset=opset)
        np.testing.assert_array_equal(got, ort_run(model32, [x32])[0])


@pytest.mark.parametrize("axis", [0, -1])
def test_hardmax_nan_as_onnx_reference(axis):
    # NaN is the maximum (ONNX's reference implementation, numpy's argmax); onnxruntime's
    # answer there depends on its SIMD reduction (see lower_hardmax), so it is not the
    # reference for these rows.
    from onnx.reference import ReferenceEvaluator

    x = np.concatenate([ARG_X, [[3, 1, 3, 2]]]).astype(np.float32)
    model = make_model([N("Hardmax", ["x"], ["out"], axis=axis)], [("x", x)], ["out"])
    got = ck.compile(model, asm=False).run(x)[0]
    np.testing.assert_array_equal(got, ReferenceEvaluator(model).run(None, {"x": x})[0])
    clean = ~np.isnan(x).any(axis=axis)
    ref = ort_run(model, [x])[0]
    if axis == -1:
        np.testing.assert_array_equal(got[clean], ref[clean])
    else:
        np.testing.assert_array_equal(got[:, clean], ref[:, clean])


@pytest.mark.slow
def test_onnx_node_tests_for_reductions():
    ops = set(OPS) | {"ArgMax", "ArgMin", "CumSum", "Hardmax"}
    passed = node_test_passes(ops)
    assert all(passed[op] >= 5 for op in ops), passed
