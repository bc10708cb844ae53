"""Quantised ops on the emulated big-endian s390x: uint16 and int16 constants (two bytes each, so
a byte-order slip changes them), uint8 inputs and the int32 Conv and requantisation agree with
onnxruntime on the host bit for bit. One small model, one compile: a few seconds emulated."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import compilerkit as ck


def _model():
    n = helper.make_node
    nodes = [n("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["c"],
               pads=[1, 1, 1, 1]),
             n("DequantizeLinear", ["c", "ys", "yz"], ["f"]),
             n("QuantizeLinear", ["f", "s16", "z16"], ["y16"]),
             n("DequantizeLinear", ["y16", "s16", "z16"], ["d16"])]
    rng = np.random.default_rng(5)
    inits = {"xs": np.float32(0.03), "xz": np.uint8(0x81), "ws": np.float32(0.007),
             "w": rng.integers(-128, 128, (3, 2, 3, 3), dtype=np.int8),
             "wz": np.int8(0), "ys": np.float32(0.05), "yz": np.uint8(0x7f),
             "b": np.array([0x0304, -0x0a0b, 77], np.int32),
             "s16": np.float32(0.001), "z16": np.uint16(0x1234)}
    g = helper.make_graph(
        nodes, "quant", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 2, 5, 4])],
        [helper.make_tensor_value_info(o, t, None) for o, t in
         (("c", TensorProto.UINT8), ("y16", TensorProto.UINT16), ("d16", TensorProto.FLOAT))],
        [numpy_helper.from_array(np.asarray(a), k) for k, a in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def test_quantised_model_on_s390x_matches_onnxruntime():
    model = _model()
    x = np.random.default_rng(6).integers(0, 128, (1, 2, 5, 4), dtype=np.uint8)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession(model.SerializeToString(), so,
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = ck.compile(model, target="s390x", asm=False).run(x)
    for g, r in zip(got, ref, strict=True):
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_array_equal(g, r)
