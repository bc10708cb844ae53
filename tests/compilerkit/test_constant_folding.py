"""Constant folding means what the compiled code means: an op whose operands are all constants
is folded at compile time, and its value must be what onnxruntime (and the same op compiled
for run time) gives. ONNX's reference evaluator, which the folder uses, runs
BatchNormalization of opsets 7-13 in training mode (batch statistics), so a BatchNormalization
of a constant input folded to another answer than the one it computes at run time."""

import numpy as np
import pytest
from ckhelpers import make_model, ort_run
from onnx import helper

import compilerkit as ck

N = helper.make_node
F32 = np.float32


def _bn_params(c, rng):
    return [("s", rng.uniform(0.5, 2, c).astype(F32)), ("b", rng.normal(size=c).astype(F32)),
            ("m", rng.normal(size=c).astype(F32)), ("v", rng.uniform(0.5, 3, c).astype(F32))]


@pytest.mark.parametrize("opset", [7, 9, 13, 14, 15])
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 4), (1, 3, 2, 2)])
def test_batchnorm_of_a_constant_folds_to_the_run_time_answer(opset, shape):
    rng = np.random.default_rng(opset)
    x = rng.normal(size=shape).astype(F32)
    params = _bn_params(shape[1], rng)
    node = N("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn", epsilon=1e-3)
    folded = make_model([node], [], ["y"], inits=[("x", x)] + params, opset=opset)
    at_run_time = make_model([node], [("x", x)], ["y"], inits=params, opset=opset)
    ref = ort_run(at_run_time, [x])[0]
    onnx_ir = str(ck.optimize_onnx(ck.import_onnx(folded)))
    assert "BatchNormalization" not in onnx_ir  # it was folded: the case under test
    np.testing.assert_allclose(ck.compile(folded, asm=False).run()[0], ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ck.compile(at_run_time, asm=False).run(x)[0], ref,
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,size", [((2, 3, 2, 2), 3), ((1, 5, 1, 1), 3), ((3, 4, 2, 1), 1),
                                        ((5, 5, 1, 2), 5)])
def test_lrn_of_a_constant_folds_to_the_run_time_answer(shape, size):
    # The reference evaluator's LRN loops over the batch axis, not the channels: right only
    # when N = C (ONNX's node tests), wrong or failing otherwise.
    x = np.random.default_rng(size).normal(size=shape).astype(F32)
    node = N("LRN", ["x"], ["y"], name="lrn", size=size, alpha=0.01, beta=0.6, bias=1.5)
    folded = make_model([node], [], ["y"], inits=[("x", x)])
    ref = ort_run(make_model([node], [("x", x)], ["y"]), [x])[0]
    assert "LRN" not in str(ck.optimize_onnx(ck.import_onnx(folded)))
    np.testing.assert_allclose(ck.compile(folded, asm=False).run()[0], ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_lp_normalization_of_a_constant_folds_to_the_run_time_answer(p, axis):
    # The reference evaluator's L1 norm forgot the absolute value: mixed signs cancelled.
    x = np.array([[1.0, -2.0, 0.5], [3.0, 4.0, -1.0]], F32)
    node = N("LpNormalization", ["x"], ["y"], name="lp", p=p, axis=axis)
    folded = make_model([node], [], ["y"], inits=[("x", x)])
    ref = ort_run(make_model([node], [("x", x)], ["y"]), [x])[0]
    assert "LpNormalization" not in str(ck.optimize_onnx(ck.import_onnx(folded)))
    np.testing.assert_allclose(ck.compile(folded, asm=False).run()[0], ref, rtol=1e-5, atol=1e-6)
