"""Every op lowering against onnxruntime on a small hand-built model, at -O0 and -O3."""

import numpy as np
import pytest
from ckhelpers import check, make_model
from onnx import helper

R = np.random.default_rng(1)


def f32(*shape):
    return R.standard_normal(shape).astype(np.float32)


def pos(*shape):
    return (R.random(shape) + 0.1).astype(np.float32)


N = helper.make_node
CASES = {
    "add_bcast": ([N("Add", ["a", "b"], ["y"])], [("a", f32(2, 3, 4)), ("b", f32(3, 1))], []),
    "sub": ([N("Sub", ["a", "b"], ["y"])], [("a", f32(2, 3)), ("b", f32(2, 3))], []),
    "mul_scalar": ([N("Mul", ["a", "b"], ["y"])], [("a", f32(4, 5)), ("b", f32(1))], []),
    "div": ([N("Div", ["a", "b"], ["y"])], [("a", f32(3, 4)), ("b", pos(4))], []),
    "relu": ([N("Relu", ["a"], ["y"])], [("a", f32(2, 8))], []),
    "sigmoid": ([N("Sigmoid", ["a"], ["y"])], [("a", f32(3, 7) * 4)], []),
    "tanh": ([N("Tanh", ["a"], ["y"])], [("a", f32(3, 7) * 3)], []),
    "exp": ([N("Exp", ["a"], ["y"])], [("a", f32(5, 5) * 5)], []),
    "log": ([N("Log", ["a"], ["y"])], [("a", pos(5, 5) * 50)], []),
    "sqrt": ([N("Sqrt", ["a"], ["y"])], [("a", pos(4, 4))], []),
    "clip": ([N("Clip", ["a", "lo", "hi"], ["y"])], [("a", f32(4, 4))],
             [("lo", np.array(-0.5, np.float32)), ("hi", np.array(0.7, np.float32))]),
    "leaky": ([N("LeakyRelu", ["a"], ["y"], alpha=0.2)], [("a", f32(4, 4))], []),
    "sum3": ([N("Sum", ["a", "b", "c"], ["y"])], [("a", f32(2, 3)), ("b", f32(3)),
                                                 ("c", f32(2, 1))], []),
    "max": ([N("Max", ["a", "b"], ["y"])], [("a", f32(2, 3)), ("b", f32(2, 3))], []),
    "min": ([N("Min", ["a", "b"], ["y"])], [("a", f32(2, 3)), ("b", f32(2, 3))], []),
    "mean": ([N("Mean", ["a", "b"], ["y"])], [("a", f32(2, 3)), ("b", f32(2, 3))], []),
    "matmul": ([N("MatMul", ["a", "b"], ["y"])], [("a", f32(5, 7)), ("b", f32(7, 33))], []),
    "matmul_batched": ([N("MatMul", ["a", "b"], ["y"])], [("a", f32(2, 3, 4)), ("b", f32(4, 5))],
                       []),
    "gemm": ([N("Gemm", ["a", "b", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)],
             [("a", f32(3, 6)), ("b", f32(4, 6)), ("c", f32(4))], []),
    "gemm_const_b": ([N("Gemm", ["a", "w", "c"], ["y"], transB=1)], [("a", f32(2, 40))],
                     [("w", f32(20, 40)), ("c", f32(20))]),
    "softmax": ([N("Softmax", ["a"], ["y"])], [("a", f32(3, 10) * 5)], []),
    "conv": ([N("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])],
             [("x", f32(1, 3, 9, 9))], [("w", f32(5, 3, 3, 3)), ("b", f32(5))]),
    "conv_group_dil": ([N("Conv", ["x", "w"], ["y"], group=2, dilations=[2, 2])],
                       [("x", f32(2, 4, 8, 8))], [("w", f32(6, 2, 3, 3))]),
    "conv1x1": ([N("Conv", ["x", "w"], ["y"])], [("x", f32(1, 8, 5, 5))],
                [("w", f32(16, 8, 1, 1))]),
    "conv3d": ([N("Conv", ["x", "w"], ["y"], pads=[1] * 6)], [("x", f32(1, 2, 4, 5, 5))],
               [("w", f32(3, 2, 3, 3, 3))]),
    "conv_transpose": ([N("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1])],
                       [("x", f32(1, 2, 4, 4))], [("w", f32(2, 3, 3, 3))]),
    "maxpool": ([N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                   pads=[1, 1, 1, 1])], [("x", f32(1, 2, 7, 7))], []),
    "avgpool_ceil": ([N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                       ceil_mode=1)], [("x", f32(1, 2, 8, 8))], []),
    "avgpool_pad": ([N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                      count_include_pad=1)], [("x", f32(1, 2, 5, 5))], []),
    # The last window (start 8) would begin in the right padding: dropped, 4x4 output.
    "maxpool_ceil_pad": ([N("MaxPool", ["x"], ["y0"], kernel_shape=[2, 2], strides=[2, 2],
                            pads=[1, 1, 1, 1], ceil_mode=1), N("Relu", ["y0"], ["y"])],
                         [("x", f32(1, 2, 7, 7))], []),
    "avgpool_ceil_pad": ([N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)],
                         [("x", f32(1, 2, 6, 6))], []),
    "avgpool_dilated": ([N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], dilations=[2, 2],
                           pads=[2, 2, 2, 2])], [("x", f32(1, 2, 7, 7))], []),
    "conv_transpose_same_upper": ([N("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2],
                                     auto_pad="SAME_UPPER")], [("x", f32(1, 1, 3, 3))],
                                  [("w", f32(1, 2, 3, 3))]),
    "add_int16": ([N("Add", ["a", "b"], ["y"])], [("a", np.arange(-6, 6, dtype=np.int16)),
                                                 ("b", np.full(12, 3, np.int16))], []),
    "reduce_max_bool": ([N("ReduceMax", ["x", "ax"], ["y"])],
                        [("x", np.array([[True, False], [False, False]]))],
                        [("ax", np.array([1], np.int64))]),
    "maxpool3d": ([N("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2])],
                  [("x", f32(1, 2, 4, 4, 4))], []),
    "gap": ([N("GlobalAveragePool", ["x"], ["y"])], [("x", f32(2, 3, 5, 5))], []),
    "batchnorm": ([N("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
                  [("x", f32(2, 3, 4, 4))],
                  [("s", f32(3)), ("b", f32(3)), ("m", f32(3)), ("v", pos(3))]),
    "reshape": ([N("Reshape", ["x", "s"], ["y"])], [("x", f32(2, 3, 4))],
                [("s", np.array([4, -1], np.int64))]),
    "flatten": ([N("Flatten", ["x"], ["y"], axis=2)], [("x", f32(2, 3, 4))], []),
    "transpose": ([N("Transpose", ["x"], ["y"], perm=[2, 0, 1])], [("x", f32(2, 3, 4))], []),
    "concat": ([N("Concat", ["a", "b"], ["y"], axis=1)], [("a", f32(2, 3)), ("b", f32(2, 5))],
               []),
    "squeeze": ([N("Squeeze", ["x", "ax"], ["y"])], [("x", f32(2, 1, 3))],
                [("ax", np.array([1], np.int64))]),
    "unsqueeze": ([N("Unsqueeze", ["x", "ax"], ["y"])], [("x", f32(2, 3))],
                  [("ax", np.array([0], np.int64))]),
    "pad": ([N("Pad", ["x", "p"], ["y"])], [("x", f32(2, 3))],
            [("p", np.array([1, 0, 0, 2], np.int64))]),
    "reduce_mean": ([N("ReduceMean", ["x"], ["y"], axes=[1])], [("x", f32(2, 3, 4))], []),
    "reduce_sum": ([N("ReduceSum", ["x", "ax"], ["y"], keepdims=0)], [("x", f32(2, 3, 4))],
                   [("ax", np.array([0, 2], np.int64))]),
    "reduce_max": ([N("ReduceMax", ["x"], ["y"], axes=[-1])], [("x", f32(2, 3, 4))], []),
    "gather": ([N("Gather", ["x", "i"], ["y"], axis=1)], [("x", f32(3, 5))],
               [("i", np.array([[0, 4], [-1, 2]], np.int64))]),
    "slice": ([N("Slice", ["x", "s", "e", "a", "st"], ["y"])], [("x", f32(6, 7))],
              [("s", np.array([1, 6], np.int64)), ("e", np.array([5, 0], np.int64)),
               ("a", np.array([0, 1], np.int64)), ("st", np.array([2, -2], np.int64))]),
    "cast": ([N("Cast", ["x"], ["y"], to=7)], [("x", f32(3, 4) * 10)], []),
    "lrn": ([N("LRN", ["x"], ["y"], size=3, alpha=1e-3, beta=0.75, bias=1.0)],
            [("x", f32(1, 5, 3, 3))], []),
    "dropout_identity": ([N("Dropout", ["x"], ["d"]), N("Identity", ["d"], ["y"])],
                         [("x", f32(2, 3))], []),
}
OPSET = {"reduce_mean": 13, "reduce_max": 13, "avgpool_dilated": 19, "reduce_max_bool": 20,
         "add_int16": 14, "maxpool_ceil_pad": 19}


@pytest.mark.parametrize("opt_level", [0, 3])
@pytest.mark.parametrize("case", sorted(CASES))
def test_op_matches_onnxruntime(case, opt_level):
    nodes, inputs, inits = CASES[case]
    model = make_model(nodes, inputs, ["y"], inits, opset=OPSET.get(case, 13))
    check(model, [a for _, a in inputs], opt_level=opt_level, rtol=1e-4, atol=1e-5)


def test_keras_style_shape_subgraph_folds():
    # Flatten as tf2onnx exports it with a dynamic batch: Shape -> Gather -> Unsqueeze ->
    # Concat -> Reshape. With the batch fixed, folding must leave a plain Reshape.
    import compilerkit as ck
    N_ = helper.make_node
    nodes = [N_("Shape", ["x"], ["s"]), N_("Gather", ["s", "zero"], ["b"], axis=0),
             N_("Unsqueeze", ["b", "ax"], ["bu"]), N_("Concat", ["bu", "m1"], ["shape"], axis=0),
             N_("Cast", ["shape"], ["shape64"], to=7), N_("Reshape", ["x", "shape64"], ["y"])]
    x = f32(3, 2, 4)
    model = make_model(nodes, [("x", x)], ["y"], [("zero", np.array(0, np.int64)),
                       ("ax", np.array([0], np.int64)), ("m1", np.array([-1], np.int64))])
    m = ck.import_onnx(model)
    ck.optimize_onnx(m)
    text = ck.print_ir(m)
    for op in ("Shape", "Gather", "Unsqueeze", "Concat", "Cast"):
        assert f"onnx.{op}" not in text
    assert "onnx.Reshape" in text
    check(model, [x])
