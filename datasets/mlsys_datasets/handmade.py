"""Small ONNX graphs written directly with ``onnx.helper``, each aimed at compiler features.

Builds (all float32, NCHW where images are involved, opset 17, weights from a seeded numpy
generator and stored as little-endian ``raw_data`` the way real exporters store them):

* ``gemm_mlp``              Gemm -> Relu -> Gemm -> Softmax, fixed batch 4 (Gemm's transB too).
* ``conv_bn_pool``          Conv -> BatchNormalization -> Relu -> MaxPool -> Conv -> Relu ->
                            GlobalAveragePool -> Flatten: the ops a CNN lowering must cover.
* ``broadcast_elementwise`` three inputs of shapes [2,3,4], [3,1], [4] plus a scalar constant
                            combined by Add/Mul/Sub/Div/Max/Tanh/Sigmoid/Exp/Sqrt/Abs: NumPy
                            broadcasting in every direction.
* ``dynamic_batch_mlp``     MatMul + Add + Relu layers whose batch dimension is symbolic (``N``).
* ``matmul_16x16``          one 16x16 MatMul: the blocking/permute example of the onnx-mlir paper.

Assumes nothing beyond the ``onnx`` package. Each builder returns a checked ``ModelProto`` plus
the numpy weights it used, so tests can recompute the graph independently with numpy.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _model(graph: onnx.GraphProto) -> onnx.ModelProto:
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                          producer_name="mlsys_datasets.handmade")
    # Pin the IR version so a newer onnx package does not change the bytes of the same graph.
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def _weights(seed: int, **shapes) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: (rng.standard_normal(s) * 0.3).astype(np.float32) for k, s in shapes.items()}


def _inits(w: dict[str, np.ndarray]) -> list[onnx.TensorProto]:
    return [numpy_helper.from_array(v, k) for k, v in w.items()]


def gemm_mlp(seed: int = 1):
    """x[4,64] -> Gemm(W1[64,32]) -> Relu -> Gemm(W2^T, transB=1) -> Softmax -> y[4,10]."""
    w = _weights(seed, W1=(64, 32), b1=(32,), W2=(10, 32), b2=(10,))
    nodes = [
        helper.make_node("Gemm", ["input", "W1", "b1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["h_relu"], name="relu1"),
        helper.make_node("Gemm", ["h_relu", "W2", "b2"], ["logits"], name="fc2", transB=1),
        helper.make_node("Softmax", ["logits"], ["output"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(nodes, "gemm_mlp",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, [4, 64])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [4, 10])],
                          initializer=_inits(w))
    return _model(g), w


def conv_bn_pool(seed: int = 2):
    """x[1,3,16,16] -> Conv3x3(8,pad1) -> BN -> Relu -> MaxPool2 -> Conv3x3(16,pad1,stride2)
    -> Relu -> GlobalAveragePool -> Flatten -> y[1,16]."""
    w = _weights(seed, W1=(8, 3, 3, 3), b1=(8,), W2=(16, 8, 3, 3), b2=(16,))
    rng = np.random.default_rng(seed + 100)
    w["bn_scale"] = rng.uniform(0.5, 1.5, 8).astype(np.float32)
    w["bn_bias"] = rng.uniform(-0.2, 0.2, 8).astype(np.float32)
    w["bn_mean"] = rng.uniform(-0.2, 0.2, 8).astype(np.float32)
    w["bn_var"] = rng.uniform(0.5, 1.5, 8).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["input", "W1", "b1"], ["c1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization",
                         ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn1"],
                         name="bn1", epsilon=1e-5),
        helper.make_node("Relu", ["bn1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["p1", "W2", "b2"], ["c2"], name="conv2",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["output"], name="flatten", axis=1),
    ]
    g = helper.make_graph(nodes, "conv_bn_pool",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                         [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 16])],
                          initializer=_inits(w))
    return _model(g), w


def broadcast_elementwise(seed: int = 3):
    """a[2,3,4], b[3,1], c[4] -> out[2,3,4]:

    ``t = tanh(a + b) * c``; ``u = sigmoid(a) - 0.5``; ``v = max(t, u) / (abs(b) + 1)``;
    ``output = sqrt(exp(v) + w)`` with ``w[3,4]`` a constant (always > 0).
    """
    rng = np.random.default_rng(seed)
    w = {"w": rng.uniform(0.1, 1.0, (3, 4)).astype(np.float32),
         "half": np.array(0.5, np.float32), "one": np.array(1.0, np.float32)}
    nodes = [
        helper.make_node("Add", ["a", "b"], ["ab"], name="add_ab"),
        helper.make_node("Tanh", ["ab"], ["tanh_ab"], name="tanh"),
        helper.make_node("Mul", ["tanh_ab", "c"], ["t"], name="mul_c"),
        helper.make_node("Sigmoid", ["a"], ["sig_a"], name="sigmoid"),
        helper.make_node("Sub", ["sig_a", "half"], ["u"], name="sub_half"),
        helper.make_node("Max", ["t", "u"], ["tu"], name="max"),
        helper.make_node("Abs", ["b"], ["abs_b"], name="abs"),
        helper.make_node("Add", ["abs_b", "one"], ["den"], name="add_one"),
        helper.make_node("Div", ["tu", "den"], ["v"], name="div"),
        helper.make_node("Exp", ["v"], ["exp_v"], name="exp"),
        helper.make_node("Add", ["exp_v", "w"], ["s"], name="add_w"),
        helper.make_node("Sqrt", ["s"], ["output"], name="sqrt"),
    ]
    f = TensorProto.FLOAT
    g = helper.make_graph(nodes, "broadcast_elementwise",
                          [helper.make_tensor_value_info("a", f, [2, 3, 4]),
                           helper.make_tensor_value_info("b", f, [3, 1]),
                           helper.make_tensor_value_info("c", f, [4])],
                          [helper.make_tensor_value_info("output", f, [2, 3, 4])],
                          initializer=_inits(w))
    return _model(g), w


def dynamic_batch_mlp(seed: int = 4):
    """x[N,16] -> MatMul(W1[16,32]) + b1 -> Relu -> MatMul(W2[32,4]) + b2 -> y[N,4], N symbolic."""
    w = _weights(seed, W1=(16, 32), b1=(32,), W2=(32, 4), b2=(4,))
    nodes = [
        helper.make_node("MatMul", ["input", "W1"], ["m1"], name="matmul1"),
        helper.make_node("Add", ["m1", "b1"], ["a1"], name="bias1"),
        helper.make_node("Relu", ["a1"], ["r1"], name="relu1"),
        helper.make_node("MatMul", ["r1", "W2"], ["m2"], name="matmul2"),
        helper.make_node("Add", ["m2", "b2"], ["output"], name="bias2"),
    ]
    g = helper.make_graph(nodes, "dynamic_batch_mlp",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 4])],
                          initializer=_inits(w))
    return _model(g), w


def matmul_16x16(seed: int = 5):
    """a[16,16] @ b[16,16] -> output[16,16]; no weights (both operands are inputs)."""
    del seed
    f = TensorProto.FLOAT
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["output"], name="matmul")],
                          "matmul_16x16",
                          [helper.make_tensor_value_info("a", f, [16, 16]),
                           helper.make_tensor_value_info("b", f, [16, 16])],
                          [helper.make_tensor_value_info("output", f, [16, 16])])
    return _model(g), {}


BUILDERS = {
    "gemm_mlp": gemm_mlp,
    "conv_bn_pool": conv_bn_pool,
    "broadcast_elementwise": broadcast_elementwise,
    "dynamic_batch_mlp": dynamic_batch_mlp,
    "matmul_16x16": matmul_16x16,
}
