"""Silent wrong answers the per-pass FileCheck tests found (issue 11), now checked numerically
against onnxruntime: Cast to and from bool, ConvTranspose with `output_shape`, AveragePool with
SAME padding counting the pad."""

import numpy as np
import pytest
from ckhelpers import check, make_model, ort_run
from onnx import TensorProto, helper

import compilerkit as ck


@pytest.mark.parametrize("src,dst,x", [
    (np.bool_, TensorProto.FLOAT, np.array([True, False, True, False])),
    (np.bool_, TensorProto.INT32, np.array([True, False, True, False])),
    (np.float32, TensorProto.BOOL, np.array([0.5, 0.0, 2.0, -3.0], np.float32)),
    (np.int32, TensorProto.BOOL, np.array([2, 0, 1, -4], np.int32)),
    (np.int64, TensorProto.BOOL, np.array([0, 7, -1, 256], np.int64)),
])
def test_cast_bool(src, dst, x):
    m = make_model([helper.make_node("Cast", ["x"], ["y"], to=dst)], [("x", x.astype(src))],
                   ["y"])
    check(m, [x.astype(src)], opt_level=0)


@pytest.mark.parametrize("out_len", [3, 4, 5])
def test_conv_transpose_output_shape(out_len):
    x = np.array([[[1, 2, 3]]], np.float32)
    w = np.array([[[1, 10, 100]]], np.float32)
    m = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"],
                                     output_shape=[out_len])], [("x", x), ("w", w)], ["y"])
    check(m, [x, w], opt_level=0)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("n,k,s", [(4, 3, 1), (5, 2, 1), (7, 3, 2), (6, 4, 3)])
def test_average_pool_same_counts_the_pad(auto_pad, n, k, s):
    x = np.arange(1, n + 1, dtype=np.float32).reshape(1, 1, n) * 3
    m = make_model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[k],
                                     strides=[s], auto_pad=auto_pad, count_include_pad=1)],
                   [("x", x)], ["y"])
    check(m, [x], opt_level=0)


def test_training_batchnorm_is_refused_not_computed_with_running_statistics():
    # onnxruntime normalises with the batch's statistics here; compilerkit used the running
    # mean and variance and answered wrong in silence.
    import compilerkit as ck

    x = np.array([1, 2, 3, 5], np.float32).reshape(2, 2, 1, 1)
    inits = [("g", np.array([1, 6], np.float32)), ("b", np.array([0.5, -1], np.float32)),
             ("m", np.array([1, 2], np.float32)), ("v", np.array([3, 8], np.float32))]
    m = make_model([helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"],
                                     ["y", "mean", "var"],
                                     epsilon=1.0, training_mode=1, name="bn")],
                   [("x", x)], ["y"], inits=inits, opset=15)
    with pytest.raises(ck.UnsupportedOpError, match="'bn'.*training mode"):
        ck.compile(m, asm=False)


def test_a_module_with_two_functions_is_refused_naming_them():
    import compilerkit as ck
    from compilerkit.passes import parse_pipeline, run_passes

    one = """func.func @%s(%%x: tensor<2xf32>) -> tensor<2xf32> {
      %%y = "onnx.Relu"(%%x) : (tensor<2xf32>) -> tensor<2xf32>
      func.return %%y : tensor<2xf32>
    }"""
    m = ck.parse_ir("builtin.module {\n" + one % "a" + "\n" + one % "b" + "\n}")
    with pytest.raises(ck.ModelError, match="2 functions \\(@a, @b\\)"):
        run_passes(m, parse_pipeline("shape-inference"))


@pytest.mark.parametrize("op", ["Abs", "Neg"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
@pytest.mark.parametrize("codegen", ["llvm", "loopnest"])
def test_integer_abs_and_neg(op, dtype, codegen):
    # Both take signed integers; they were lowered with the float ops (math.absf, arith.negf)
    # and the Kernel IR failed to verify. The type's minimum wraps, as in onnxruntime.
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, -7, -1, 0, 1, 9, info.max], dtype)
    m = make_model([helper.make_node(op, ["x"], ["y"])], [("x", x)], ["y"])
    got = ck.compile(m, opt_level=1, asm=False, codegen=codegen).run(x)[0]
    ref = ort_run(m, [x])[0]
    assert got.dtype == ref.dtype and np.array_equal(got, ref), (got, ref)


@pytest.mark.parametrize("codegen", ["llvm", "loopnest"])
def test_one_hot_values_given_at_run_time(codegen):
    # OneHot read [off, on] before its nest; the loopnest code generator outlines nests and did
    # not capture those loads (a KeyError, found by the fuzz once depth was specialised).
    idx = np.array([[1, 9], [2, 4]], np.int64)
    values = np.array([-1.5, 7.0], np.float32)
    m = make_model([helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=1)],
                   [("i", idx), ("v", values)], ["y"],
                   inits=[("d", np.array(10, np.int64))])
    got = ck.compile(m, opt_level=1, asm=False, codegen=codegen).run(idx, values)[0]
    np.testing.assert_array_equal(got, ort_run(m, [idx, values])[0])
