"""Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh (lowering/trig.py, the math
library's codegen/mathtrig.py) against onnxruntime on edge values (NaN, +-0, +-inf, subnormals,
huge arguments, the domain edges +-1), plus ONNX's own node tests for each op. The ulp-level
accuracy over the whole float line is test_mathlib_vector.py's."""

import numpy as np
import pytest
from ckhelpers import make_model, node_test_passes, ort_run
from onnx import helper

import compilerkit as ck
from compilerkit.lowering import trig

N = helper.make_node
R = np.random.default_rng(29)

EDGE = np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, 1e-45, -1e-45, 1e-30, -3.4e38, 3.4e38,
                 0.5, -0.5, 1.0, -1.0, 0.999999, -0.999999, 1.0000001, 2.5, -2.5, 12.0,
                 88.0, 89.3, -89.4, 90.0, 1500.5, 1e5, -1e10, 1e30],
                np.float32)
SPREAD = np.concatenate([EDGE, (R.standard_normal(200) * 4).astype(np.float32),
                         R.uniform(-1, 1, 100).astype(np.float32)])


@pytest.mark.parametrize("op", trig.OPS)
def test_against_onnxruntime_on_edge_values(op):
    model = make_model([N(op, ["x"], ["y"])], [("x", SPREAD)], ["y"], opset=22)
    ref = ort_run(model, [SPREAD])[0]
    got = ck.compile(model, asm=False).run(SPREAD)[0]
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert np.array_equal(np.isnan(got), np.isnan(ref)), SPREAD[np.isnan(got) != np.isnan(ref)]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=0)
    zero = (SPREAD == 0) & ~np.isnan(ref)  # acosh(+-0) is NaN
    assert np.array_equal(np.signbit(got[zero]), np.signbit(ref[zero]))


@pytest.mark.parametrize("op", ["Sin", "Atanh"])
def test_float64_through_the_f32_library(op):
    # onnxruntime has no double kernels for these: numpy is the reference, within f32's 1e-6.
    x = R.uniform(-0.99, 0.99, 64)
    model = make_model([N(op, ["x"], ["y"])], [("x", x)], ["y"], opset=22)
    got = ck.compile(model, asm=False).run(x)[0]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, {"Sin": np.sin, "Atanh": np.arctanh}[op](x), rtol=1e-6)


def test_integer_input_refused_naming_node_and_dtype():
    x = np.array([1, 2], np.int32)
    model = make_model([N("Cos", ["x"], ["y"], name="c")], [("x", x)], ["y"], opset=7)
    with pytest.raises((ck.UnsupportedOpError, ck.ModelError), match=r"'c'"):
        ck.compile(model, asm=False)


NODE_FLOORS = {op: 2 for op in trig.OPS}


@pytest.mark.slow
def test_onnx_node_tests_for_trig_ops():
    passed = node_test_passes(trig.OPS)
    assert all(passed[op] >= n for op, n in NODE_FLOORS.items()), passed
