"""Shared helpers: the models under test, their inputs, and a host-vs-emulated comparison."""

from __future__ import annotations

import gc

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import compilerkit as ck
from compilerkit.measure.conformance import light_model_path as light  # noqa: F401 (used by tests)
from compilerkit.measure.conformance import random_inputs as feeds_for

TARGETS = ("s390x", "ppc64")

# Constants none of whose byte patterns reads the same reversed: swapped bytes change them.
WEIGHT = np.array([[1.7, -0.3125, 3.14159274], [1.0e-3, -2.5e4, 0.7],
                   [6.02e-5, -1.1, 42.125], [0.1, 2.0e-7, -9.75]], np.float32)  # Gemm B, 4x3
BIAS = np.array([0.5, -1.25e3, 7.0e-2], np.float32)
OFFSETS = np.array([0x0102030405060708, -3, 1 << 40, 258], np.int64)


def constants_model() -> onnx.ModelProto:
    """y = Gemm(x, WEIGHT, BIAS); z = n + OFFSETS (int64): every constant byte-order sensitive."""
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"]),
         helper.make_node("Add", ["n", "c"], ["z"])],
        "constants",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("n", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("z", TensorProto.INT64, [4])],
        [numpy_helper.from_array(WEIGHT, "w"), numpy_helper.from_array(BIAS, "b"),
         numpy_helper.from_array(OFFSETS, "c")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def constants_inputs():
    x = np.array([[1.5, -2.0, 0.25, 3.0], [-0.75, 1.0e-2, 8.0, -1.0]], np.float32)
    n = np.array([10, 20, -30, 1 << 33], np.int64)
    return x, n


def max_difference(outs, refs) -> float:
    """Largest absolute difference over all outputs (0.0 means bit-identical or equal ints)."""
    worst = 0.0
    for o, r in zip(outs, refs, strict=True):
        assert o.shape == r.shape and o.dtype == r.dtype
        if o.size:
            worst = max(worst, float(np.max(np.abs(o.astype(np.float64) - r.astype(np.float64)))))
    return worst


def compare_with_host(model, target: str, opt_level: int):
    """Compile `model` for the host and for `target`; return (emulated outputs, host outputs)."""
    feeds = feeds_for(model)
    shapes = {n: list(a.shape) for n, a in feeds}
    arrays = [a for _, a in feeds]
    host = ck.compile(model, opt_level=opt_level, asm=False, input_shapes=shapes)
    ref = host.run(*arrays)
    emu = ck.compile(model, target=target, opt_level=opt_level, asm=False, input_shapes=shapes)
    assert emu.arena_bytes == host.arena_bytes
    out = emu.run(*arrays)
    del host, emu
    gc.collect()
    return out, ref
