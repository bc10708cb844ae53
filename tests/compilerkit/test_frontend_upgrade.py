"""Models of opsets 1 to 6 are upgraded to opset 7 with onnx.version_converter on import
(compilerkit/frontend/old_opsets.py). The upgraded model must answer as the original does: against
onnxruntime running the original model where onnxruntime still has the old kernels, and against
numpy (the old op's documented meaning) where it does not (onnxruntime dropped Add-6's
`broadcast`/`axis`, Gemm-6, BatchNormalization-6, PRelu-6, Upsample-1...)."""

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from ckhelpers import ort_run
from onnx import TensorProto, helper, numpy_helper

import compilerkit as ck

N = helper.make_node
F32 = np.float32


def old_model(nodes, inputs, inits=(), opset=6, outputs=("y",)):
    """An IR-3 model (as the old exporters wrote: initializers also listed as inputs)."""
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in inits]
    ins = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in inputs]
    ins += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    g = helper.make_graph(nodes, "old", ins, [helper.make_empty_tensor_value_info(o)
                                             for o in outputs], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=3)


def run_upgraded(model, *arrays, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ck.OpsetUpgradeWarning)
        return ck.compile(model, asm=False, **kw).run(*arrays)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_opset_6_network_agrees_with_onnxruntime_on_the_original(rng):
    # Ops whose old versions onnxruntime still runs: it runs the original, we the upgrade.
    x = rng.standard_normal((2, 3, 8, 8)).astype(F32)
    nodes = [N("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             N("InstanceNormalization", ["c", "s", "b"], ["n"], name="norm"),
             N("Relu", ["n"], ["r"], name="relu"),
             N("LRN", ["r"], ["l"], name="lrn", size=3),
             N("Pad", ["l"], ["p"], name="pad", pads=[0, 0, 1, 1, 0, 0, 1, 1], mode="reflect"),
             N("MaxPool", ["p"], ["m"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             N("Slice", ["m"], ["sl"], name="slice", axes=[2, 3], starts=[0, 1], ends=[4, 5]),
             N("Concat", ["sl", "sl"], ["cc"], name="concat", axis=1),
             N("Reshape", ["cc", "shape"], ["f"], name="flat"),
             N("MatMul", ["f", "fw"], ["mm"], name="fc"),
             N("Sum", ["mm", "mm", "fb"], ["sm"], name="sum"),
             N("Softmax", ["sm"], ["y"], name="softmax")]
    inits = [("w", rng.standard_normal((4, 3, 3, 3)).astype(F32)),
             ("s", rng.random(4).astype(F32) + 0.5), ("b", rng.standard_normal(4).astype(F32)),
             ("shape", np.array([2, -1], np.int64)),  # an integer initializer (Reshape-5)
             ("fw", rng.standard_normal((128, 5)).astype(F32) / 8),
             ("fb", rng.standard_normal((2, 5)).astype(F32))]
    m = old_model(nodes, [("x", x)], inits, opset=6)
    ref = ort_run(m, [x])[0]
    with pytest.warns(ck.OpsetUpgradeWarning, match="opset 6 was upgraded to opset 7"):
        got = ck.compile(m, asm=False).run(x)[0]
    assert got.shape == ref.shape == (2, 5)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def test_the_ir_records_the_upgrade_and_the_warning_can_refuse_it():
    m = old_model([N("Relu", ["x"], ["y"], name="r")], [("x", np.zeros((2, 3), F32))], opset=1)
    with pytest.warns(ck.OpsetUpgradeWarning):
        module = ck.import_onnx(m)
    f = next(iter(module.body.block.ops))
    assert f.attributes["onnx_opset"].value.data == 7
    assert f.attributes["onnx_opset_upgraded_from"].value.data == 1
    # The printed IR says so, and reads back.
    text = ck.print_ir(module)
    assert "onnx_opset_upgraded_from = 1" in text
    assert "onnx_opset_upgraded_from = 1" in ck.print_ir(ck.parse_ir(text))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ck.OpsetUpgradeWarning)
        with pytest.raises(ck.OpsetUpgradeWarning):
            ck.compile(m, asm=False)
    # The caller's model is left at its own opset.
    assert m.opset_import[0].version == 1


A = np.linspace(-2, 2, 24, dtype=F32).reshape(2, 3, 4)
C3, C4 = np.array([0.5, -1, 2], F32), np.array([1, 2, 3, 4], F32)


@pytest.mark.parametrize("op,fn", [("Add", np.add), ("Sub", np.subtract),
                                   ("Mul", np.multiply), ("Div", np.divide)])
def test_legacy_broadcast_with_an_axis(op, fn):
    # Opset 6: `broadcast=1, axis=1` lines a [3] operand up with axis 1 of [2, 3, 4]; without
    # `axis`, with the trailing axes.
    m = old_model([N(op, ["a", "b"], ["y"], broadcast=1, axis=1)], [("a", A)], [("b", C3)])
    np.testing.assert_allclose(run_upgraded(m, A)[0], fn(A, C3[:, None]), rtol=1e-6)
    m = old_model([N(op, ["a", "b"], ["y"], broadcast=1)], [("a", A)], [("b", C4)])
    np.testing.assert_allclose(run_upgraded(m, A)[0], fn(A, C4), rtol=1e-6)


def test_gemm_6_broadcast_and_pow_1():
    w = np.arange(20, dtype=F32).reshape(5, 4) / 10
    m = old_model([N("Gemm", ["a", "w", "c"], ["y"], broadcast=1, transB=1, beta=2.0)],
                  [("a", A[0])], [("w", w), ("c", np.array([1], F32))])
    np.testing.assert_allclose(run_upgraded(m, A[0])[0], A[0] @ w.T + 2, rtol=1e-5)
    m = old_model([N("Pow", ["a", "b"], ["y"], broadcast=1)], [("a", np.abs(A))], [("b", C4)],
                  opset=1)
    np.testing.assert_allclose(run_upgraded(m, np.abs(A))[0], np.abs(A) ** C4, rtol=1e-5)


def test_batchnorm_6_dropout_6_averagepool_1_upsample_1():
    x = np.linspace(-1, 1, 32, dtype=F32).reshape(1, 2, 4, 4)
    s, b, mu, var = (np.array(v, F32) for v in ([1, 2], [0, 1], [0.1, 0.2], [1, 2]))
    m = old_model([N("BatchNormalization", ["x", "s", "b", "m", "v"], ["n"], is_test=1,
                     epsilon=1e-5),
                   N("Dropout", ["n"], ["d"], is_test=1, ratio=0.5),
                   N("AveragePool", ["d"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                   N("Upsample", ["p"], ["y"], width_scale=2.0, height_scale=2.0, mode="NN")],
                  [("x", x)], [("s", s), ("b", b), ("m", mu), ("v", var)])
    c = (slice(None), None, None)
    n = (x - mu[c]) / np.sqrt(var[c] + 1e-5) * s[c] + b[c]
    p = n.reshape(1, 2, 2, 2, 2, 2).mean(axis=(3, 5))
    np.testing.assert_allclose(run_upgraded(m, x)[0], p.repeat(2, 2).repeat(2, 3), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("shape", [(2, 3, 3), (2, 3, 4), (1, 3, 2, 5), (4, 3)])
def test_prelu_6_slope_is_per_channel(shape):
    # A [C] slope scales axis 1 (PyTorch's nn.PReLU). The converter leaves the node as it is,
    # and opset 7 broadcasts [C] against the last axis: refused for (2, 3, 4), silently wrong
    # for (2, 3, 3). onnxruntime has no PRelu-6 kernel.
    x = -np.arange(1, np.prod(shape) + 1, dtype=F32).reshape(shape)
    slope = np.array([0.1, 0.2, 0.3], F32)
    m = old_model([N("PRelu", ["x", "s"], ["y"], name="p")], [("x", x)], [("s", slope)])
    expected = x * slope.reshape([3] + [1] * (len(shape) - 2))
    np.testing.assert_allclose(run_upgraded(m, x)[0], expected, rtol=1e-6)


def test_prelu_6_with_the_slope_as_an_input():
    x = -np.ones((2, 3, 3), F32)
    slope = np.array([0.1, 0.2, 0.3], F32)
    m = old_model([N("PRelu", ["x", "s"], ["y"], name="p")], [("x", x), ("s", slope)])
    np.testing.assert_allclose(run_upgraded(m, x, slope)[0], x * slope[:, None], rtol=1e-6)


def test_prelu_6_with_a_symbolic_channel_axis_is_still_per_channel():
    # The channel count is not known when the model is upgraded (input_shapes fixes it later):
    # the slope is per channel all the same.
    x = -np.arange(1, 19, dtype=F32).reshape(2, 3, 3)
    slope = np.array([0.1, 0.2, 0.3], F32)
    g = helper.make_graph([N("PRelu", ["x", "s"], ["y"], name="p")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "c", 3])],
                          [helper.make_empty_tensor_value_info("y")],
                          initializer=[numpy_helper.from_array(slope, "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 6)], ir_version=4)
    out = run_upgraded(m, x, input_shapes={"x": [2, 3, 3]})[0]
    np.testing.assert_allclose(out, x * slope[:, None], rtol=1e-6)


def test_a_conversion_the_converter_refuses_names_the_node():
    # The broadcast adapter needs every operand's shape; the input declares none.
    g = helper.make_graph([N("Relu", ["x"], ["r"], name="relu"),
                           N("Add", ["r", "b"], ["y"], name="add", broadcast=1, axis=1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, None)],
                          [helper.make_empty_tensor_value_info("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 6)], ir_version=3)
    with pytest.raises(ck.ModelError, match=r"opset 6 model: onnx\.version_converter could not "
                       r"upgrade it to opset 7: node 'add' \(Add\): Shape of input 1 is not "
                       "available"):
        ck.compile(m, asm=False)
    # Given its shape, the same model upgrades and compiles.
    b = np.array([1, 2, 3], F32)
    x = np.ones((2, 3, 4), F32)
    out = run_upgraded(m, x, b, input_shapes={"b": [3]})[0]
    np.testing.assert_allclose(out, x + b[:, None])


def test_a_broken_old_model_is_refused_before_the_converter_sees_it():
    # Hygiene runs on the model as it came (the converter is C++ and trusts its input).
    m = old_model([N("Relu", ["z"], ["y"], name="r")], [("x", np.zeros((2, 3), F32))])
    with pytest.raises(ck.ModelError, match="node 'r' \\(Relu\\): input 'z' is not defined"):
        ck.compile(m, asm=False)
    assert onnx.defs.onnx_opset_version() >= 7


@pytest.mark.parametrize("ir_version,external,opset", [(3, False, 6), (3, True, 6),
                                                       (4, True, 6), (8, True, 13)])
def test_weights_and_integer_initializers_survive(tmp_path, rng, ir_version, external, opset):
    # An IR-3 model whose weight is not also listed as a graph input (IR 3 required it; old
    # exporters did not always): the converter drops its definition ("Input w is undefined!").
    # Weights on disk and large ones bypass the converter and are put back. A Reshape's shape
    # saved as external data stays a constant at any opset (ONNX's inference cannot read
    # external data, so onnxruntime refuses such a model: the frontend reads it in).
    x = rng.standard_normal((2, 3)).astype(F32)
    w = rng.standard_normal((3, 500)).astype(F32)  # 6 kB
    g = helper.make_graph([N("MatMul", ["x", "w"], ["y"], name="mm"),
                           N("Reshape", ["y", "shape"], ["z"], name="flat")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_empty_tensor_value_info("z")],
                          initializer=[numpy_helper.from_array(w, "w"),
                                       numpy_helper.from_array(np.array([4, -1]), "shape")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          ir_version=ir_version)
    path = tmp_path / "m.onnx"
    onnx.save(m, path, save_as_external_data=external, location="w.bin", size_threshold=0)
    out = run_upgraded(str(path), x)[0]
    np.testing.assert_allclose(out, (x @ w).reshape(4, -1), rtol=1e-5, atol=1e-5)
    if external:  # onnxruntime's loader refuses it, with ONNX inference's own message
        with pytest.raises(Exception, match="Cannot parse data from external tensors"):
            ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
