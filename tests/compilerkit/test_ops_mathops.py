"""Erf, Gelu, Mish, Celu, ThresholdedRelu, Shrink, PRelu, Round, CastLike and Pow
(lowering/mathops.py) against onnxruntime on edge values (NaN, +-0, +-inf, subnormals, huge,
exact halves for Round), plus ONNX's own node tests for each op."""

import math

import numpy as np
import pytest
from ckhelpers import make_model, node_test_passes, ort_run
from onnx import helper

import compilerkit as ck
from compilerkit.lowering import mathops

N = helper.make_node
R = np.random.default_rng(29)

EDGE = np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, 1e-45, -1e-45, 1e-30, -3.4e38, 3.4e38,
                 0.5, -0.5, 1.0, -1.0, 2.5, -2.5, 5.0, -5.0, 12.0, -12.0, 88.0, -100.0],
                np.float32)
SPREAD = np.concatenate([EDGE, (R.standard_normal(200) * 4).astype(np.float32)])


def _compare(op, x, opset=20, rtol=1e-5, atol=0.0, dtype=np.float32, **attrs):
    x = x.astype(dtype)
    model = make_model([N(op, ["x"], ["out"], **attrs)], [("x", x)], ["out"], opset=opset)
    ref = ort_run(model, [x])[0]
    got = ck.compile(model, asm=False).run(x)[0]
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)
    return got, ref


def test_erf():
    got, ref = _compare("Erf", SPREAD)
    assert np.array_equal(np.signbit(got[:3]), np.signbit(ref[:3]))  # erf(-0) = -0


def test_erf_float64_against_math_erf():
    # onnxruntime has no double Erf kernel: Python's math.erf is the reference. The math
    # library's functions are f32 (codegen applies them to f64 through f32): 1e-5 relative,
    # down to f32's subnormals (atol).
    x = SPREAD.astype(np.float64)
    model = make_model([N("Erf", ["x"], ["out"])], [("x", x)], ["out"])
    got = ck.compile(model, asm=False).run(x)[0]
    ref = np.array([math.erf(v) for v in x])
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-44)


@pytest.mark.parametrize("op", ["Floor", "Ceil", "Sqrt", "Abs"])
def test_float64_intrinsics_keep_double_precision(op):
    # They went through f32: Floor(16777217.5) gave 16777218, Sqrt lost 7 digits.
    x = np.array([16777217.5, -16777217.5, 2.0 ** 40 + 0.5, 2.0, 1e-310, 1e300], np.float64)
    if op == "Sqrt":
        x = np.abs(x)
    model = make_model([N(op, ["x"], ["out"])], [("x", x)], ["out"])
    got = ck.compile(model, asm=False).run(x)[0]
    np.testing.assert_array_equal(got, ort_run(model, [x])[0])


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    # 1 + erf(x / sqrt 2) cancels for x << 0 in onnxruntime's formula as in ours: there both
    # are within about 1e-7 of the answer's scale (atol), elsewhere within 1e-5 relative.
    _compare("Gelu", SPREAD, approximate=approximate, atol=1e-6)


def test_mish():
    _compare("Mish", SPREAD, opset=18, atol=1e-7)


@pytest.mark.parametrize("alpha", [1.0, 0.3, 2.0])
def test_celu(alpha):
    _compare("Celu", SPREAD, opset=13, alpha=alpha, atol=1e-7)


@pytest.mark.parametrize("alpha", [1.0, -0.5, 0.0])
def test_thresholded_relu(alpha):
    _compare("ThresholdedRelu", SPREAD, opset=13, alpha=alpha, rtol=0)


@pytest.mark.parametrize("attrs", [{}, {"lambd": 1.5, "bias": 1.5}, {"lambd": 0.0, "bias": -2.0}])
def test_shrink(attrs):
    _compare("Shrink", SPREAD, opset=13, rtol=0, **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_round_half_to_even_and_signs(dtype):
    x = np.concatenate([EDGE, np.arange(-6, 6.5, 0.5),
                        [-0.3, 0.3, 0.49999997, -0.49999997, 8388607.5, -8388609.0, 1e20,
                         2.0 ** 52 + 1]])
    got, ref = _compare("Round", x, opset=13, rtol=0, dtype=dtype)
    assert np.array_equal(np.signbit(got), np.signbit(ref))


@pytest.mark.parametrize("slope_shape", [(1,), (3, 1, 1), (1, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_prelu_broadcast_slope(slope_shape, dtype):
    x = (R.standard_normal((2, 3, 2, 4)) * 10).astype(dtype)
    slope = (R.standard_normal(slope_shape) * 3).astype(dtype)
    model = make_model([N("PRelu", ["x", "s"], ["out"])], [("x", x), ("s", slope)], ["out"],
                       opset=16)
    got = ck.compile(model, asm=False).run(x, slope)[0]
    np.testing.assert_array_equal(got, ort_run(model, [x, slope])[0])


@pytest.mark.parametrize(("src", "like"), [(np.float32, np.int32), (np.float64, np.float32),
                                           (np.int64, np.float32), (np.float32, np.bool_),
                                           (np.bool_, np.float64)])
def test_castlike(src, like):
    x = np.array([1.7, -2.5, 0.0, 300.7, -0.0, 1.0], np.float64).astype(src)
    t = np.zeros(2, like)
    model = make_model([N("CastLike", ["x", "t"], ["out"])], [("x", x), ("t", t)], ["out"],
                       opset=15)
    got = ck.compile(model, asm=False).run(x, t)[0]
    ref = ort_run(model, [x, t])[0]
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


def test_integer_input_refused_naming_node_and_dtype():
    x = np.array([1, 2], np.int32)
    model = make_model([N("Shrink", ["x"], ["out"], name="sh")], [("x", x)], ["out"])
    with pytest.raises(ck.UnsupportedOpError, match=r"node 'sh'.*Shrink on i32"):
        ck.compile(model, asm=False)


def test_emulated_s390x_gelu():
    x = EDGE[:12]
    model = make_model([N("Gelu", ["x"], ["out"])], [("x", x)], ["out"], opset=20)
    got = ck.compile(model, target="s390x", asm=False).run(x)[0]
    host = ck.compile(model, asm=False).run(x)[0]
    np.testing.assert_array_equal(got, host)  # the same math library, bit for bit
    np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-5, atol=1e-6)


NODE_FLOORS = {"Erf": 1, "Gelu": 4, "Mish": 1, "Celu": 1, "ThresholdedRelu": 3, "Shrink": 2,
               "PRelu": 2, "Round": 1, "CastLike": 2}


@pytest.mark.slow
def test_onnx_node_tests_for_math_ops():
    ops = set(mathops.OPS)
    passed = node_test_passes(ops)
    assert set(NODE_FLOORS) == ops
    assert all(passed[op] >= n for op, n in NODE_FLOORS.items()), passed


# ---- Pow ----------------------------------------------------------------------------------------

POW_EDGE = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0,
                     -3.0, 1e-45, -1e-45, 1e30, -1e30, 2.5, -2.5, 40.0, -41.0, 1e-3],
                    np.float32)


def _pow_exact(x, y, opset=15):
    model = make_model([N("Pow", ["x", "y"], ["z"])], [("x", x), ("y", y)], ["z"], opset=opset)
    ref = ort_run(model, [x, y])[0]
    got = ck.compile(model, asm=False).run(x, y)[0]
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)  # NaN where NaN, values bit-exact
    if got.dtype.kind == "f":
        assert np.array_equal(np.signbit(got[~np.isnan(ref)]), np.signbit(ref[~np.isnan(ref)]))
    return got


def test_pow_special_values_all_pairs():
    # C99's table, as std::pow answers: 0^0, 1^NaN and NaN^0 are 1, (-1)^+-inf is 1, a negative
    # base keeps its sign through odd integers (-0 and -inf too), (-8)^(1/3) is NaN, ...
    x = np.repeat(POW_EDGE, POW_EDGE.size)
    y = np.tile(POW_EDGE, POW_EDGE.size)
    _pow_exact(x, y)


def test_pow_random_is_correctly_rounded():
    # pow works in f64: every float32 result is numpy's f64 power rounded once (correctly
    # rounded), and within one ulp of onnxruntime's powf (which is not, 1 in 1000 here).
    x = np.abs(R.standard_normal(2000) * R.choice([1e-3, 1.0, 10.0, 100.0], 2000))
    x, y = x.astype(np.float32), (R.standard_normal(2000) * 20).astype(np.float32)
    model = make_model([N("Pow", ["x", "y"], ["z"])], [("x", x), ("y", y)], ["z"], opset=15)
    got = ck.compile(model, asm=False).run(x, y)[0]
    with np.errstate(over="ignore", under="ignore"):
        np.testing.assert_array_equal(got, np.power(x.astype(np.float64), y).astype(np.float32))
    np.testing.assert_allclose(got, ort_run(model, [x, y])[0], rtol=2.4e-7, atol=0)


@pytest.mark.parametrize("ydtype", [np.int32, np.int64, np.float64])
def test_pow_float_base_other_exponent_types(ydtype):
    x = np.repeat(POW_EDGE, 9)
    y = np.tile(np.array([0, 1, 2, 3, -1, -2, 7, 40, -41]), POW_EDGE.size).astype(ydtype)
    _pow_exact(x, y)


def test_pow_constant_cube_is_onnxruntimes_product():
    # Keras's Gelu exports Pow(x, 3): onnxruntime computes x * x * x for a one-element exponent
    # 3 (two roundings, not powf's one), and so does compilerkit.
    x = np.concatenate([POW_EDGE, (R.standard_normal(300) * 30).astype(np.float32)])
    g = helper.make_graph([N("Pow", ["x", "three"], ["z"])], "g",
                          [helper.make_tensor_value_info("x", 1, list(x.shape))],
                          [helper.make_empty_tensor_value_info("z")],
                          [helper.make_tensor("three", 1, [], [3.0])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
    got = ck.compile(model, asm=False).run(x)[0]
    np.testing.assert_array_equal(got, ort_run(model, [x])[0])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pow_integers_exact(dtype):
    x = np.array([1, 2, 3, -2, -3, 0, 5, 10, -1, 7, 1, -1, 2, 0], dtype)
    y = np.array([4, 5, 6, 3, 2, 0, 3, 9, 7, 11, -3, -3, -1, 5], dtype)
    _pow_exact(x, y)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pow_integer_overflow_wraps_as_numpy(dtype):
    # onnxruntime casts std::pow's double (inexact past 2^53, INT_MIN past the range); the
    # exact integer power, wrapped, is ONNX's reference (numpy) and what compilerkit gives.
    x = np.array([7, 3, -5], dtype)
    y = np.array([20, 39, 27], dtype)
    model = make_model([N("Pow", ["x", "y"], ["z"])], [("x", x), ("y", y)], ["z"], opset=15)
    got = ck.compile(model, asm=False).run(x, y)[0]
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, np.power(x, y))


def test_pow_zero_to_a_negative_integer_is_a_run_error():
    x = np.array([0, 2], np.int32)
    y = np.array([-1, 3], np.int32)
    model = make_model([N("Pow", ["x", "y"], ["z"], name="p")], [("x", x), ("y", y)], ["z"],
                       opset=15)
    cm = ck.compile(model, asm=False)
    with pytest.raises(ck.RunError, match="node 'p'"):
        cm.run(x, y)
    np.testing.assert_array_equal(cm.run(np.array([0, 2], np.int32), -y)[0], [0, 0])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pow_integer_base_float_exponent(dtype):
    x = np.array([1, 2, 3, -2, 0, 4, 9, 7, -8, 2], dtype)
    y = np.array([4, 5, 0.5, 3, 0, 0.5, 0.5, 2.5, 1 / 3, -1], np.float32)
    _pow_exact(x, y)


def test_emulated_s390x_pow():
    x = np.repeat(POW_EDGE[:12], 12)
    y = np.tile(POW_EDGE[:12], 12)
    model = make_model([N("Pow", ["x", "y"], ["z"])], [("x", x), ("y", y)], ["z"], opset=15)
    got = ck.compile(model, target="s390x", asm=False).run(x, y)[0]
    np.testing.assert_array_equal(got, ck.compile(model, asm=False).run(x, y)[0])
    np.testing.assert_array_equal(got, ort_run(model, [x, y])[0])


@pytest.mark.slow
def test_onnx_node_tests_for_pow():
    passed = node_test_passes({"Pow"})
    assert passed["Pow"] >= 12, passed  # the uint exponents are refused with the dtype
