"""Comparison, logic, Where, IsNaN/IsInf, Sign, Mod and Bitwise ops (lowering/logic.py) against
onnxruntime, bit-exact, on the edge values that tell right from nearly right: NaN, +-0, +-inf,
the integer extremes, mixed signs for Mod, broadcasting, bool tensors; and ONNX's own node tests
for each op. What is not lowered is refused naming node, op and dtype."""

import numpy as np
import pytest
from ckhelpers import make_model, node_test_passes, ort_run
from onnx import helper

import compilerkit as ck
from compilerkit.lowering import SUPPORTED, logic

N = helper.make_node
R = np.random.default_rng(29)

F_EDGE = np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, 1.5, -1.5, 1e-45, -3.4e38, 2.0],
                  np.float32)


def _ints(dtype, n):
    info = np.iinfo(dtype)
    edge = np.array([info.min, info.max, 0, 1, -1, 7, -7, 3, -3], dtype)
    return np.concatenate([edge, R.integers(info.min, info.max, n, dtype=dtype,
                                            endpoint=True)])


def _exact(model, arrays, opt_level=3):
    ref = ort_run(model, arrays)
    got = ck.compile(model, opt_level=opt_level, asm=False).run(*arrays)
    assert len(got) == len(ref)
    for g, r in zip(got, ref, strict=True):
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_array_equal(g, r)  # NaN positions equal, values bit-exact
        if g.dtype.kind == "f":
            assert np.array_equal(np.signbit(g), np.signbit(r))
    return got


def _model(op, names, arrays, **attrs):
    return make_model([N(op, names, ["out"], **attrs)], list(zip(names, arrays, strict=True)),
                      ["out"])


@pytest.mark.parametrize("op", list(logic.COMPARE))
def test_compare_float_edges_all_pairs(op):
    a = np.repeat(F_EDGE, len(F_EDGE))
    b = np.tile(F_EDGE, len(F_EDGE))
    _exact(_model(op, ["a", "b"], [a, b]), [a, b])


@pytest.mark.parametrize("op", list(logic.COMPARE))
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.float64])
def test_compare_dtypes_broadcast(op, dtype):
    if np.dtype(dtype).kind == "f":
        a = R.integers(-3, 3, (2, 3, 4)).astype(dtype)
        b = R.integers(-3, 3, (3, 1)).astype(dtype)
    else:
        a = _ints(dtype, 15).reshape(2, 3, 4)
        b = _ints(dtype, 0)[:3].reshape(3, 1)
    _exact(_model(op, ["a", "b"], [a, b]), [a, b])


def test_equal_bool():
    a = np.array([[True, False], [True, False]])
    b = np.array([True, False])[:, None]
    _exact(_model("Equal", ["a", "b"], [a, b]), [a, b])


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_bool_ops_broadcast(op):
    a = np.array([True, False, True, False]).reshape(2, 2)
    b = np.array([True, False])
    _exact(_model(op, ["a", "b"], [a, b]), [a, b])


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.int8])
def test_where_broadcast_three_ways(dtype):
    c = R.random((2, 1, 4)) > 0.5
    x = (R.standard_normal((3, 4)) * 5).astype(dtype)
    y = (R.standard_normal((2, 3, 1)) * 5).astype(dtype)
    model = _model("Where", ["c", "x", "w"], [c, x, y])
    if dtype is np.bool_:  # onnxruntime has no bool Where kernel: numpy is the reference
        got = ck.compile(model, asm=False).run(c, x, y)[0]
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, np.where(c, x, y))
    else:
        _exact(model, [c, x, y])


def test_where_keeps_nan_and_signed_zero():
    # Where selects: the chosen element unchanged, -0 included (numpy's where, the ONNX spec).
    # onnxruntime 1.2x gives +0 for a selected -0 of x (not of y): values are compared with it,
    # signs with numpy.
    c = np.array([True, False, True, False])
    x = np.array([np.nan, 1.0, -0.0, 2.0], np.float32)
    y = np.array([3.0, -0.0, 4.0, np.nan], np.float32)
    model = _model("Where", ["c", "x", "w"], [c, x, y])
    got = ck.compile(model, asm=False).run(c, x, y)[0]
    np.testing.assert_array_equal(got, ort_run(model, [c, x, y])[0])
    assert np.array_equal(np.signbit(got), np.signbit(np.where(c, x, y)))


@pytest.mark.parametrize("attrs", [{}, {"detect_positive": 0}, {"detect_negative": 0},
                                   {"detect_positive": 0, "detect_negative": 0}])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_isinf_attributes(attrs, dtype):
    x = F_EDGE.astype(dtype)
    _exact(make_model([N("IsInf", ["x"], ["y"], **attrs)], [("x", x)], ["y"], opset=20), [x])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_isnan(dtype):
    x = F_EDGE.astype(dtype)
    _exact(_model("IsNaN", ["x"], [x]), [x])


def test_sign_float_edges():
    # NaN stays NaN, -0 gives +0 (onnxruntime), subnormals give +-1.
    x = np.concatenate([F_EDGE, [-1e-45]]).astype(np.float32)
    _exact(_model("Sign", ["x"], [x]), [x])


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.float64])
def test_sign_dtypes(dtype):
    x = _ints(dtype, 20) if np.dtype(dtype).kind == "i" else F_EDGE.astype(dtype)
    _exact(_model("Sign", ["x"], [x]), [x])


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_mod_integer_signs_and_extremes(fmod, dtype):
    x = _ints(dtype, 40)
    y = _ints(dtype, 40)[::-1].copy()
    y[y == 0] = 5
    y[:3] = -1  # INT_MIN % -1 is 0 (no overflow trap), as x % -1 for every x
    model = make_model([N("Mod", ["x", "y"], ["z"], fmod=fmod)], [("x", x), ("y", y)], ["z"])
    _exact(model, [x, y])
    _exact(model, [x, y], opt_level=0)


def test_mod_broadcast():
    x = np.arange(-12, 12, dtype=np.int32).reshape(4, 6)
    y = np.array([5, -5, 3, -3, 7, -1], np.int32)
    _exact(_model("Mod", ["x", "y"], [x, y]), [x, y])


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_by_zero_is_a_run_error(fmod):
    # onnxruntime: "Integer modulo by zero"; compilerkit: the guarded remainder's RunError.
    x = np.array([7, -7, 3], np.int32)
    y = np.array([2, 0, 3], np.int32)
    model = make_model([N("Mod", ["x", "y"], ["z"], fmod=fmod, name="m")],
                       [("x", x), ("y", y)], ["z"])
    with pytest.raises(Exception, match="modulo by zero"):
        ort_run(model, [x, y])
    cm = ck.compile(model, asm=False)
    with pytest.raises(ck.RunError, match="node 'm': integer remainder by zero"):
        cm.run(x, y)
    assert np.array_equal(cm.run(x, np.array([2, 5, 3], np.int32))[0],
                          ort_run(model, [x, np.array([2, 5, 3], np.int32)])[0])


MOD_EDGE = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.5, -2.5, 0.1, 7.3, -7.3,
                     1e-45, -1e-45, 3e-39, 1e-38, 1e10, -1e30, 3.4e38, 16777217.0])
MOD_EDGE_F64 = np.array([5e-324, -5e-324, 1e-310, 1e-300, 1.7e308, -1.7e308, 2.0 ** 53 + 2])
MOD_SCALES = {np.float32: ([1e-30, 1.0, 1e20, 1e37], [1e-30, 1e-3, 1.0, 1e3]),
              np.float64: ([1e-300, 1.0, 1e100, 1e300], [1e-300, 1e-3, 1.0, 1e30])}


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mod_float_exact_on_edges_and_huge_quotients(fmod, dtype):
    # numpy is the reference (its fmod is exact; its mod is ONNX's fmod=0): every pair of the
    # edge values, and random pairs whose quotients reach 2^250 (f32) and 2^2000 (f64).
    edge = MOD_EDGE if dtype == np.float32 else np.concatenate([MOD_EDGE, MOD_EDGE_F64])
    edge = edge.astype(dtype)
    sx, sy = MOD_SCALES[dtype]
    x = np.concatenate([np.repeat(edge, edge.size), R.standard_normal(500) * R.choice(sx, 500)])
    y = np.concatenate([np.tile(edge, edge.size), R.standard_normal(500) * R.choice(sy, 500)])
    x, y = x.astype(dtype), y.astype(dtype)
    model = _model("Mod", ["x", "y"], [x, y], fmod=fmod)
    got = ck.compile(model, asm=False).run(x, y)[0]
    with np.errstate(all="ignore"):
        ref = np.fmod(x, y) if fmod else np.mod(x, y)
    np.testing.assert_array_equal(got, ref)
    assert np.array_equal(np.signbit(got[~np.isnan(ref)]), np.signbit(ref[~np.isnan(ref)]))
    if fmod:  # onnxruntime runs float Mod with fmod=1 only: the same bits
        np.testing.assert_array_equal(got, ort_run(model, [x, y])[0])


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_bitwise_binary(op, dtype):
    a = _ints(dtype, 23).reshape(4, 8)
    b = _ints(dtype, 31)[:8]
    _exact(make_model([N(op, ["a", "b"], ["y"])], [("a", a), ("b", b)], ["y"], opset=18),
           [a, b])


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_bitwise_not(dtype):
    a = _ints(dtype, 23)
    _exact(make_model([N("BitwiseNot", ["a"], ["y"])], [("a", a)], ["y"], opset=18), [a])


def test_not_is_lowered_apart_from_ops():
    # Not (logic.lower_not) is registered apart from OPS: its own node tests are opset 1,
    # upgraded on import (test_ops_misc.py runs them).
    assert "Not" in SUPPORTED and "Not" not in logic.OPS
    a = np.array([True, False])
    model = make_model([N("Not", ["a"], ["y"], name="n0")], [("a", a)], ["y"])
    np.testing.assert_array_equal(ck.compile(model, asm=False).run(a)[0], [False, True])


def _shift_reference(x, y, left):
    """BitShift (opset 28) by hand: numpy's shifts where 0 <= y < width, the sign extension
    alone elsewhere (0, or -1 for a right shift of a negative x)."""
    width = x.dtype.itemsize * 8
    fits = (y >= 0) & (y < width)
    safe = np.where(fits, y, 0).astype(x.dtype)
    if left:
        return np.where(fits, np.left_shift(x, safe), 0).astype(x.dtype)
    return np.where(fits, np.right_shift(x, safe), np.where(x < 0, -1, 0)).astype(x.dtype)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_bitshift_signed_all_amounts(direction, dtype):
    width = np.dtype(dtype).itemsize * 8
    x = _ints(dtype, 7)
    y = np.arange(-2, width + 3, dtype=dtype)
    xs, ys = np.repeat(x, y.size), np.tile(y, x.size)
    model = make_model([N("BitShift", ["x", "y"], ["z"], direction=direction)],
                       [("x", xs), ("y", ys)], ["z"], opset=28)
    got = ck.compile(model, asm=False).run(xs, ys)[0]
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, _shift_reference(xs, ys, direction == "LEFT"))


def test_bitshift_unsigned_refused_naming_the_dtype():
    a = np.array([1, 2], np.uint8)
    model = make_model([N("BitShift", ["a", "a"], ["y"], name="n0", direction="LEFT")],
                       [("a", a)], ["y"])
    with pytest.raises(ck.UnsupportedOpError, match="UINT8"):
        ck.compile(model, asm=False)


# ONNX's node tests for these ops: every selected case passes or is refused at compile time
# (uint and float16 inputs), never wrong; per op, the floor of passing cases.
NODE_FLOORS = {"And": 8, "BitShift": 20, "BitwiseAnd": 2, "BitwiseNot": 1, "BitwiseOr": 2,
               "BitwiseXor": 2, "Equal": 4, "Greater": 4, "GreaterOrEqual": 4, "IsInf": 3,
               "IsNaN": 1, "Less": 4, "LessOrEqual": 4, "Mod": 12, "Or": 8, "Sign": 1,
               "Where": 2, "Xor": 8}


@pytest.mark.slow
def test_onnx_node_tests_for_logic_ops():
    ops = set(logic.OPS)
    passed = node_test_passes(ops)
    assert set(NODE_FLOORS) == ops
    assert all(passed[op] >= n for op, n in NODE_FLOORS.items()), passed


def test_emulated_s390x_matches_onnxruntime():
    # Big-endian: i32 remainders and the bool bytes of a compare feeding Where, in one graph.
    x = np.array([7, -7, 7, -7, -2147483648, 5], np.int32)
    y = np.array([3, 3, -3, -3, 5, -1], np.int32)
    a = np.array([np.nan, -0.0, 1.5, -np.inf], np.float32)
    b = np.array([1.0, 0.0, -2.5, 3.0], np.float32)
    model = make_model([N("Mod", ["x", "y"], ["m"]), N("Less", ["a", "b"], ["c"]),
                        N("Where", ["c", "a", "b"], ["w"])],
                       [("x", x), ("y", y), ("a", a), ("b", b)], ["m", "w"])
    got = ck.compile(model, target="s390x", asm=False).run(x, y, a, b)
    ref = ort_run(model, [x, y, a, b])
    np.testing.assert_array_equal(got[0], [1, 2, -2, -1, 2, 0])
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])
