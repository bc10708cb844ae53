"""Parallel loops on targets without threads (issue 12, item 4): the emulated s390x and ppc64
targets get the same Kernel IR, `krnl.parallel` loops included, and run those loops serially.
The host runs them on 1 to 4 threads; every result must be bit-identical to the emulated one
(and close to onnxruntime, the independent reference)."""

from __future__ import annotations

import numpy as np
import pytest
from emuhelpers import TARGETS
from onnx import TensorProto, helper, numpy_helper

import compilerkit as ck
from compilerkit.dialects import krnl


def parallel_model():
    """Conv + Relu (fused: its loop over output panels, each with its own column buffer, runs
    in parallel at the default -O3), a padded MaxPool (its scratch copy and window nest) and a
    MatMul: small enough to emulate in seconds, so the pool and the MatMul stay under
    parallelize's min_work."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((24, 8, 3, 3)).astype(np.float32) / 8
    m = rng.standard_normal((24 * 12 * 12, 40)).astype(np.float32) / 40
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["p", "shape"], ["f"]),
             helper.make_node("MatMul", ["f", "m"], ["y"])]
    graph = helper.make_graph(
        nodes, "parallel",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8, 24, 24])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 40])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(m, "m"),
         numpy_helper.from_array(np.array([4, -1], np.int64), "shape")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture(scope="module")
def host_results():
    model = parallel_model()
    x = np.random.default_rng(8).standard_normal((4, 8, 24, 24)).astype(np.float32)
    cm = ck.compile(model, asm=False)
    k = cm.provenance.modules["kernel-ir"]
    marked = sum(krnl.parallel_loop(op) is not None for op in k.walk()
                 if isinstance(op, krnl.IterateOp))
    assert marked >= 1, "the model should exercise parallel loops"
    assert "GOMP_parallel" in cm.stages["llvm-ir"]
    outs = {n: cm.run(x, num_threads=n)[0] for n in (1, 2, 3, 4)}
    return model, x, outs


@pytest.mark.parametrize("target", TARGETS)
def test_emulated_serial_run_is_bit_identical_to_host_threads(host_results, target):
    import onnxruntime as ort

    model, x, outs = host_results
    emu = ck.compile(model, target=target, asm=False)
    assert "GOMP" not in emu.stages["llvm-ir"]  # no thread runtime there: serial loops
    out = emu.run(x)[0]
    for n, host in outs.items():
        assert np.array_equal(out, host), f"host at {n} threads differs from {target}"
    ref = ort.InferenceSession(model.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
