"""Quantisation ops (lowering/quant.py, quant_conv.py) against onnxruntime, exactly: the integer
outputs bit for bit and the float ones (DequantizeLinear) equal, on the corners that tell
onnxruntime's rounding and saturation from nearly right: values past the int8 range, x.5 ties
(round half to even), zero points at the type's extremes, per-tensor and per-axis scales.
Then two models quantised by onnxruntime itself (quantize_static QDQ, quantize_dynamic), ONNX's
node tests for each op, unsigned tensors refused by the ops that cannot widen them, and the
loopnest code generator (it hands these nests to LLVM)."""

import numpy as np
import onnxruntime as ort
import pytest
from ckhelpers import make_model, node_test_passes, ort_run
from onnx import TensorProto, helper, numpy_helper

import compilerkit as ck
from compilerkit.lowering import SUPPORTED, quant

N = helper.make_node
R = np.random.default_rng(29)
OPS = ["QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
       "ConvInteger", "QLinearMatMul", "QLinearConv"]


# onnxruntime's uint8 x int8 kernels on AVX2 (vpmaddubsw) saturate each pair of products at
# int16, so their answers are wrong where two products of 255 * 127 meet: against onnxruntime,
# uint8 operands facing int8 ones stay below 128 (U8_WITH_S8); the full range is checked
# against numpy's exact integer product.
U8_WITH_S8 = 127


def _exact(model, arrays, **kw):
    ref = ort_run(model, arrays)
    got = ck.compile(model, asm=False, **kw).run(*arrays)
    assert len(got) == len(ref)
    for g, r in zip(got, ref, strict=True):
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_array_equal(g, r)
    return got


def _ties(scale, n=40):
    """Values x / scale = k + 0.5 exactly (ties), both signs, and values far past the range."""
    k = np.arange(-n // 2, n // 2, dtype=np.float32)
    return np.concatenate([(k + 0.5) * scale, [-1e6, 1e6, -300 * scale, 300 * scale, 0.0,
                                               -0.0]]).astype(np.float32)


def test_ops_registered():
    for op in OPS + ["Cast"]:
        assert op in SUPPORTED


QUANT_TYPES = [(np.uint8, TensorProto.UINT8), (np.int8, TensorProto.INT8),
               (np.uint16, TensorProto.UINT16), (np.int16, TensorProto.INT16)]


@pytest.mark.parametrize("dtype", [t for t, _ in QUANT_TYPES], ids=lambda t: np.dtype(t).name)
def test_quantize_per_tensor_ties_saturation_and_extreme_zero_points(dtype):
    info = np.iinfo(dtype)
    scale = np.float32(0.5)
    x = _ties(scale, 600 if info.bits == 16 else 40)
    x = np.concatenate([x, R.normal(0, 100, 64).astype(np.float32)])
    outs, inits, nodes = [], [("s", scale)], []
    for k, zp in enumerate([info.min, info.max, 0, (int(info.min) + int(info.max)) // 2]):
        inits.append((f"z{k}", np.array(zp, dtype)))
        nodes.append(N("QuantizeLinear", ["x", "s", f"z{k}"], [f"y{k}"]))
        outs.append(f"y{k}")
    _exact(make_model(nodes, [("x", x)], outs, inits, opset=21), [x])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantize_and_dequantize_per_axis(axis):
    x = (R.normal(0, 3, (3, 4, 5)) * 10).astype(np.float32)
    n = x.shape[axis]
    scale = R.uniform(0.05, 0.5, n).astype(np.float32)
    zp = np.array([0, 255, 128, 7, 250][:n], np.uint8)
    q = R.integers(-128, 128, x.shape, dtype=np.int8)
    qzp = np.array([-128, 127, 0, 3, -5][:n], np.int8)
    nodes = [N("QuantizeLinear", ["x", "s", "z"], ["y"], axis=axis),
             N("DequantizeLinear", ["q", "s", "qz"], ["d"], axis=axis),
             N("DequantizeLinear", ["y", "s", "z"], ["dy"], axis=axis)]
    model = make_model(nodes, [("x", x), ("q", q)], ["y", "d", "dy"],
                       [("s", scale), ("z", zp), ("qz", qzp)])
    _exact(model, [x, q])


def test_dequantize_per_tensor_int8_uint8_int32_with_and_without_zero_point():
    a = np.arange(-128, 128, dtype=np.int8)
    u = np.arange(256, dtype=np.uint8)
    i = np.array([-(1 << 31), (1 << 31) - 1, 0, 1, -1, 123456789], np.int32)
    nodes = [N("DequantizeLinear", ["a", "s", "za"], ["ya"]),
             N("DequantizeLinear", ["u", "s", "zu"], ["yu"]),
             N("DequantizeLinear", ["u", "s"], ["yu0"]),
             N("DequantizeLinear", ["i", "s"], ["yi"])]
    model = make_model(nodes, [("a", a), ("u", u), ("i", i)], ["ya", "yu", "yu0", "yi"],
                       [("s", np.float32(0.037)), ("za", np.int8(-128)), ("zu", np.uint8(255))])
    _exact(model, [a, u, i])


def test_scale_and_zero_point_as_graph_inputs():
    x = _ties(np.float32(0.25))
    s, z = np.array(0.25, np.float32), np.array(-3, np.int8)
    model = make_model([N("QuantizeLinear", ["x", "s", "z"], ["y"]),
                        N("DequantizeLinear", ["y", "s", "z"], ["d"])],
                       [("x", x), ("s", s), ("z", z)], ["y", "d"])
    _exact(model, [x, s, z])


@pytest.mark.parametrize("case", ["random", "zeros", "positive", "negative"])
def test_dynamic_quantize_linear(case):
    x = {"random": R.normal(0, 2, (4, 7)), "zeros": np.zeros((3, 3)),
         "positive": R.uniform(0.5, 9, (5, 2)), "negative": -R.uniform(0.5, 9, (5, 2))}[case]
    x = x.astype(np.float32)
    model = make_model([N("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])], [("x", x)],
                       ["y", "s", "z"], opset=11)
    _exact(model, [x])


def _matmul_integer_model(a, b, a_zp, b_zp):
    inits = [("az", a_zp), ("bz", b_zp)]
    return make_model([N("MatMulInteger", ["a", "b", "az", "bz"], ["y"])], [("a", a), ("b", b)],
                      ["y"], inits, opset=10)


@pytest.mark.parametrize("types", [(np.uint8, np.int8), (np.uint8, np.uint8),
                                   (np.int8, np.int8)], ids=str)
def test_matmul_integer_batched_with_extreme_zero_points(types):
    ta, tb = types
    hi = U8_WITH_S8 if (ta, tb) == (np.uint8, np.int8) else np.iinfo(ta).max
    a = R.integers(np.iinfo(ta).min, hi, (2, 3, 5), dtype=ta, endpoint=True)
    b = R.integers(np.iinfo(tb).min, np.iinfo(tb).max, (5, 4), dtype=tb, endpoint=True)
    _exact(_matmul_integer_model(a, b, ta(np.iinfo(ta).max), tb(np.iinfo(tb).min)), [a, b])


def test_matmul_integer_uint8_int8_full_range_against_numpy():
    a = R.integers(0, 255, (3, 64), dtype=np.uint8, endpoint=True)
    b = R.integers(-128, 127, (64, 4), dtype=np.int8, endpoint=True)
    model = _matmul_integer_model(a, b, np.uint8(255), np.int8(-128))
    got = ck.compile(model, asm=False).run(a, b)[0]
    np.testing.assert_array_equal(got, (a.astype(np.int64) - 255) @ (b.astype(np.int64) + 128))


def test_matmul_integer_per_column_zero_point_and_1d_operand():
    a = R.integers(0, U8_WITH_S8, (6,), dtype=np.uint8, endpoint=True)
    b = R.integers(-128, 128, (6, 3), dtype=np.int8)
    _exact(_matmul_integer_model(a, b, np.uint8(100), np.array([-128, 0, 127], np.int8)),
           [a, b])


def _qlinear_matmul(a, b, b_scale, b_zp, y_type):
    inits = [("as", np.float32(0.02)), ("az", a.dtype.type(3)), ("bs", b_scale), ("bz", b_zp),
             ("ys", np.float32(0.05)), ("yz", y_type(np.iinfo(y_type).max // 2))]
    return make_model([N("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                         ["y"])], [("a", a), ("b", b)], ["y"], inits)


@pytest.mark.parametrize("ta", [np.uint8, np.int8])
def test_qlinear_matmul_saturates_and_rounds_as_onnxruntime(ta):
    hi = U8_WITH_S8 if ta == np.uint8 else 127
    a = R.integers(np.iinfo(ta).min, hi, (2, 4, 16), dtype=ta, endpoint=True)
    b = R.integers(-128, 128, (16, 5), dtype=np.int8)
    _exact(_qlinear_matmul(a, b, np.float32(0.01), np.int8(0), ta), [a, b])


def test_qlinear_matmul_per_column_scale():
    a = R.integers(0, U8_WITH_S8, (3, 8), dtype=np.uint8, endpoint=True)
    b = R.integers(-128, 128, (8, 4), dtype=np.int8)
    scale = np.array([0.001, 0.01, 0.02, 0.005], np.float32)
    _exact(_qlinear_matmul(a, b, scale, np.zeros(4, np.int8), np.uint8), [a, b])


CONV_CASES = {
    "pad_stride": dict(pads=[1, 1, 1, 1], strides=[2, 2]),
    "dilated": dict(dilations=[2, 2], pads=[2, 1, 2, 1]),
    "same": dict(auto_pad="SAME_UPPER", strides=[2, 1]),
    "grouped": dict(group=2, pads=[0, 1, 1, 0]),
}


@pytest.mark.parametrize("case", list(CONV_CASES))
def test_conv_integer(case):
    attrs = CONV_CASES[case]
    g = attrs.get("group", 1)
    x = R.integers(0, 256, (1, 4, 7, 6), dtype=np.uint8)
    w = R.integers(0, 256, (6, 4 // g, 3, 3), dtype=np.uint8)
    model = make_model([N("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)],
                       [("x", x), ("w", w)], ["y"], [("xz", np.uint8(255)), ("wz", np.uint8(0))],
                       opset=10)
    _exact(model, [x, w])


@pytest.mark.parametrize("case", list(CONV_CASES))
@pytest.mark.parametrize("tx", [np.uint8, np.int8])
def test_qlinear_conv_per_channel_with_bias(case, tx):
    attrs = CONV_CASES[case]
    g = attrs.get("group", 1)
    info = np.iinfo(tx)
    hi = U8_WITH_S8 if tx == np.uint8 else info.max
    x = R.integers(info.min, hi, (2, 4, 6, 5), dtype=tx, endpoint=True)
    w = R.integers(-127, 128, (6, 4 // g, 3, 3), dtype=np.int8)
    inits = [("xs", np.float32(0.03)), ("xz", tx(info.min + 1)),
             ("ws", R.uniform(0.002, 0.02, 6).astype(np.float32)), ("wz", np.zeros(6, np.int8)),
             ("ys", np.float32(0.04)), ("yz", tx(info.max - 10)),
             ("b", R.integers(-3000, 3000, 6, dtype=np.int32))]
    model = make_model([N("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                          ["y"], **attrs)], [("x", x), ("w", w)], ["y"], inits)
    _exact(model, [x, w])


def test_qlinear_conv_on_the_loopnest_code_generator():
    x = R.integers(0, U8_WITH_S8, (1, 3, 5, 5), dtype=np.uint8, endpoint=True)
    w = R.integers(-128, 128, (4, 3, 3, 3), dtype=np.int8)
    inits = [("xs", np.float32(0.05)), ("xz", np.uint8(128)), ("ws", np.float32(0.01)),
             ("wz", np.int8(0)), ("ys", np.float32(0.1)), ("yz", np.uint8(100))]
    model = make_model([N("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"],
                          pads=[1, 1, 1, 1])], [("x", x), ("w", w)], ["y"], inits)
    _exact(model, [x, w], codegen="loopnest")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_matmul_and_gemm(dtype):
    a = R.integers(-1000, 1000, (3, 4), dtype=dtype)
    b = R.integers(-1000, 1000, (4, 5), dtype=dtype)
    c = R.integers(-1000, 1000, (5,), dtype=dtype)
    model = make_model([N("MatMul", ["a", "b"], ["y"]), N("Gemm", ["a", "b", "c"], ["z"])],
                       [("a", a), ("b", b), ("c", c)], ["y", "z"])
    try:
        ref = ort_run(model, [a, b, c])
    except Exception:  # noqa: BLE001 - onnxruntime has no int64 Gemm kernel: numpy's answer
        ref = [a @ b, a @ b + c]
    got = ck.compile(model, asm=False).run(a, b, c)
    for g, r in zip(got, ref, strict=True):
        assert g.dtype == r.dtype
        np.testing.assert_array_equal(g, r)


def test_cast_from_and_to_unsigned():
    f = np.array([0.0, 1.7, 255.9, 256.0, -1.0, 300.5, 65535.0, 65536.0, -0.5], np.float32)
    u = np.arange(0, 256, 17, dtype=np.uint8)
    i = np.array([-1, 127, -128, 0], np.int8)
    nodes = [N("Cast", ["u"], ["uf"], to=TensorProto.FLOAT),
             N("Cast", ["u"], ["ui16"], to=TensorProto.UINT16),
             N("Cast", ["u"], ["ui64"], to=TensorProto.INT64),
             N("Cast", ["u"], ["ub"], to=TensorProto.BOOL),
             N("Cast", ["i"], ["iu"], to=TensorProto.UINT8),
             N("Cast", ["f"], ["fu16"], to=TensorProto.UINT16)]
    model = make_model(nodes, [("u", u), ("i", i), ("f", f[np.abs(f) < 65536])],
                       ["uf", "ui16", "ui64", "ub", "iu", "fu16"])
    _exact(model, [u, i, f[np.abs(f) < 65536]])


def test_unsigned_tensor_refused_by_an_op_that_cannot_widen_it():
    u = np.arange(4, dtype=np.uint8)
    model = make_model([N("Add", ["u", "u"], ["y"], name="add")], [("u", u)], ["y"], opset=14)
    with pytest.raises(ck.UnsupportedOpError, match=r"'add'.*UINT8 is not supported by Add"):
        ck.compile(model, asm=False)
    # ... and passed through unchanged by one that only moves bytes
    model = make_model([N("Transpose", ["u2"], ["y"])], [("u2", u.reshape(2, 2))], ["y"])
    np.testing.assert_array_equal(ck.compile(model, asm=False).run(u.reshape(2, 2))[0],
                                  u.reshape(2, 2).T)


@pytest.mark.parametrize("bad, match", [
    (dict(s=np.ones(3, np.float32), z=np.zeros(3, np.uint8), axis=1), "per-axis"),
    (dict(s=np.ones(4, np.float32), z=np.zeros(3, np.uint8), axis=0), "zero point has shape"),
    (dict(s=np.ones(4, np.float32), z=np.zeros(4, np.uint8), axis=5), "axis=5"),
])
def test_bad_scale_shapes_are_refused_naming_the_node(bad, match):
    x = np.zeros((4, 2), np.float32)
    model = make_model([N("QuantizeLinear", ["x", "s", "z"], ["y"], axis=bad["axis"],
                          name="q")], [("x", x)], ["y"], [("s", bad["s"]), ("z", bad["z"])])
    with pytest.raises((ck.ModelError, ck.UnsupportedOpError), match=match) as e:
        ck.compile(model, asm=False)
    assert "'q'" in str(e.value)


def test_node_tests_of_every_quantisation_op():
    passed = node_test_passes(OPS)
    # float8, int4/uint4, int2 and float16 cases are refused (element types compilerkit does
    # not compile); every other case of ONNX 1.23's data passes.
    floor = {"QuantizeLinear": 6, "DequantizeLinear": 5, "DynamicQuantizeLinear": 3,
             "MatMulInteger": 1, "ConvInteger": 2, "QLinearMatMul": 4, "QLinearConv": 1}
    for op, n in floor.items():
        assert passed[op] >= n, (op, passed[op])


# ---- models quantised by onnxruntime --------------------------------------------------------

def _init(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)




def _cnn(M):
    nodes = [N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), N("Relu", ["c1"], ["r1"]),
             N("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             N("Relu", ["c2"], ["y"])]
    inits = [_init("w1", M.normal(0, 0.3, (6, 3, 3, 3))), _init("b1", M.normal(0, 0.1, 6)),
             _init("w2", M.normal(0, 0.2, (4, 6, 3, 3))), _init("b2", M.normal(0, 0.1, 4))]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, 10, 10])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 4, 5, 5])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _mlp(M):
    nodes = [N("MatMul", ["x", "w1"], ["m1"]), N("Add", ["m1", "b1"], ["a1"]),
             N("Relu", ["a1"], ["r1"]), N("MatMul", ["r1", "w2"], ["m2"]),
             N("Add", ["m2", "b2"], ["y"])]
    inits = [_init("w1", M.normal(0, 0.3, (16, 32))), _init("b1", M.normal(0, 0.1, 32)),
             _init("w2", M.normal(0, 0.3, (32, 4))), _init("b2", M.normal(0, 0.1, 4))]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [8, 16])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [8, 4])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _ort(model, x, optimise):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    if not optimise:  # the QDQ graph as written, not fused into onnxruntime's QLinear kernels
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


def test_quantize_static_qdq_model(tmp_path):
    M = np.random.default_rng(7)  # its own: the result does not depend on the tests run before
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": M.normal(0, 1, (1, 3, 10, 10)).astype(np.float32)}
                            for _ in range(4)])

        def get_next(self):
            return next(self.it, None)

    import onnx

    onnx.save(_cnn(M), tmp_path / "cnn.onnx")
    quantize_static(tmp_path / "cnn.onnx", tmp_path / "q.onnx", Reader(),
                    quant_format=QuantFormat.QDQ)
    model = onnx.load(tmp_path / "q.onnx")
    assert {"QuantizeLinear", "DequantizeLinear"} <= {n.op_type for n in model.graph.node}
    step = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}["y_scale"]
    compiled = ck.compile(model, asm=False)
    exact = []
    for _ in range(3):
        x = M.normal(0, 1, (1, 3, 10, 10)).astype(np.float32)
        got = compiled.run(x)[0]
        np.testing.assert_array_equal(got, _ort(model, x, optimise=False))
        fused = _ort(model, x, optimise=True)
        assert np.abs(got - fused).max() <= 1.0001 * step
        exact.append(np.mean(got == fused))
    print(f"quantize_static QDQ: exact {np.mean(exact):.3f} against onnxruntime's fused run")


@pytest.mark.parametrize("weights", ["QUInt8", "QInt8"])
def test_quantize_dynamic_model(tmp_path, weights):
    """uint8 weights: equal to onnxruntime. int8 weights (quantize_dynamic's default): equal to
    ONNX's reference evaluator; onnxruntime's uint8 x int8 kernel saturates (U8_WITH_S8)."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    M = np.random.default_rng(8)
    from onnxruntime.quantization import QuantType, quantize_dynamic

    onnx.save(_mlp(M), tmp_path / "mlp.onnx")
    quantize_dynamic(tmp_path / "mlp.onnx", tmp_path / "q.onnx",
                     weight_type=getattr(QuantType, weights))
    model = onnx.load(tmp_path / "q.onnx")
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= {n.op_type for n in model.graph.node}
    compiled = ck.compile(model, asm=False)
    reference = ReferenceEvaluator(model)
    for _ in range(3):
        x = M.normal(0, 1, (8, 16)).astype(np.float32)
        got = compiled.run(x)[0]
        if weights == "QUInt8":
            np.testing.assert_array_equal(got, _ort(model, x, optimise=True))
        np.testing.assert_array_equal(got, reference.run(None, {"x": x})[0])


def test_unsigned_refused_whatever_registered_the_op():
    """The check is made by the dispatcher for every op, not by wrapping the lowerings that
    existed when quant registered its own: an op registered later is covered too."""
    u = np.arange(6, dtype=np.uint8).reshape(1, 1, 2, 3)
    model = make_model([N("CenterCropPad", ["u", "shape"], ["y"], name="crop")], [("u", u)],
                       ["y"], [("shape", np.array([1, 1, 2, 2], np.int64))], opset=18)
    with pytest.raises(ck.UnsupportedOpError, match=r"'crop'.*UINT8 is not supported"):
        ck.compile(model, asm=False)
    assert quant.MOVES_BYTES.isdisjoint(quant.LOWERINGS)
