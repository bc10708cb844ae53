"""krnl.matmul's clamp (clamp_lo / clamp_hi: a Conv's fused Relu or Clip applied as the product
is stored, not in an epilogue pass): the same bits whichever code generator does it. The host
micro-kernel (clamped as its registers are stored, on the call that ends the product) against
`expand_matmul_clamp` (a nest after the product, what the LoopNest generator runs; the ops of
lowering/elementwise.activation), on shapes that take each of the kernel's paths: the register
blocks and their row tails, the narrow column strip, one row (M = 1), one column (N = 1), K cut
into several pieces and tiles. References: that expanded form through LLVM, numpy, and
onnxruntime for special values."""

import numpy as np
import pytest
from ckhelpers import conv_act_model, make_model, ort_run, seeded
from onnx import helper
from xdsl.utils.exceptions import VerifyException

import compilerkit as ck
from compilerkit.dialects import krnl
from compilerkit.loopnest.matmul_start import expand_matmul_clamp
from compilerkit.pipeline import compile_to


def _matmuls(kmodule):
    return [op for op in kmodule.walk() if isinstance(op, krnl.MatMulOp)]


def _both_ways(model, **kw):
    """(default compile, compile of its Kernel IR with every clamp written out as a nest)."""
    default = ck.compile(model, asm=False, **kw)
    k = compile_to("kernel-ir", model, **kw)
    clamped = [mm.clamp for mm in _matmuls(k) if any(x is not None for x in mm.clamp)]
    assert clamped, "the product has no clamp"
    assert expand_matmul_clamp(k) == len(clamped)
    assert not any(x is not None for mm in _matmuls(k) for x in mm.clamp)
    k.verify()
    return default, ck.compile_kernel(k, asm=False), clamped


# (input shape, weight shape, attrs): the micro-kernel's register blocks with row tails
# (13 rows), a narrow last strip (49 columns), one output channel (M = 1: the one-row path),
# one output pixel read in place (N = 1: the dot products), a depth over one k piece and one
# k tile (1100 channels), im2col panels with padding and stride.
SHAPES = [
    ((1, 16, 7, 7), (13, 16, 1, 1), {}),
    ((1, 24, 9, 9), (32, 24, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 40, 5, 5), (1, 40, 1, 1), {}),
    ((1, 64, 1, 1), (20, 64, 1, 1), {}),
    ((1, 1100, 3, 3), (9, 1100, 1, 1), {}),
    # (54 sums per output: too few for the tap schedule at stride 2, conv_taps.STRIDED_MIN_K)
    ((1, 6, 15, 15), (24, 6, 3, 3), {"strides": [2, 2], "pads": [1, 0, 1, 0]}),
]


@pytest.mark.parametrize("act", ["Relu", "Clip"])
@pytest.mark.parametrize("x_shape, w_shape, attrs", SHAPES)
def test_the_kernels_clamp_is_the_written_out_one(x_shape, w_shape, attrs, act):
    x = seeded(x_shape, 1)
    model = conv_act_model(x, w_shape, act=act, **attrs)
    default, expanded, clamped = _both_ways(model, conv_algorithm="classic")
    assert clamped == [(0.0, None)] * len(clamped) if act == "Relu" else all(
        c == (-0.5, 0.75) for c in clamped)
    got = default.run(x)[0]
    assert np.array_equal(got.view(np.uint32), expanded.run(x)[0].view(np.uint32))
    np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-5, atol=1e-5)


def test_threads_clamp_the_same():
    x = seeded((1, 64, 28, 28), 4)
    model = conv_act_model(x, (96, 64, 1, 1), act="Relu")
    cm = ck.compile(model, asm=False)
    assert np.array_equal(cm.run(x, num_threads=1)[0], cm.run(x, num_threads=2)[0])


def test_special_values_clamp_as_onnxruntime():
    """NaN stays NaN (Relu and Clip propagate it), inf is clamped, -0 becomes +0 under Relu
    (max(-0, +0) is +0, as onnxruntime's)."""
    x = seeded((1, 16, 6, 6), 5)
    x[0, 3, 2, 2], x[0, 5, 1, 4], x[0, 7, 0, 0] = np.nan, np.inf, -np.inf
    for act in ("Relu", "Clip"):
        model = conv_act_model(x, (24, 16, 1, 1), act=act)
        default, expanded, _ = _both_ways(model)
        got, ref = default.run(x)[0], ort_run(model, [x])[0]
        assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.isnan(got).any()
        assert np.array_equal(got, expanded.run(x)[0], equal_nan=True)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    # a zero weight row and a bias of -0: every output of that channel is a -0 sum or +0
    w = np.zeros((3, 2, 1, 1), np.float32)
    w[1] = 1.0
    model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"]),
                        helper.make_node("Relu", ["y"], ["z"])],
                       [("x", -np.abs(seeded((1, 2, 4, 4), 6)))], ["z"],
                       [("w", w), ("b", np.array([-0.0, -0.0, 0.0], np.float32))])
    x0 = -np.abs(seeded((1, 2, 4, 4), 6))
    got = ck.compile(model, asm=False).run(x0)[0]
    assert not np.signbit(got).any(), "Relu left a -0"


@pytest.mark.parametrize("lo, hi, fused", [
    (-np.inf, 6.0, (None, 6.0)), (0.0, np.inf, (0.0, None)), (-1.0, 1.0, (-1.0, 1.0)),
    (np.nan, 1.0, None), (np.inf, np.inf, None)])
def test_which_clips_become_a_clamp(lo, hi, fused):
    """An infinite bound on its own side is no bound; a NaN, or an inf on the other side
    (max with +inf), stays in the epilogue."""
    x = seeded((1, 8, 5, 5), 7)
    w = seeded((16, 8, 1, 1), 8)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"]),
                        helper.make_node("Clip", ["y", "lo", "hi"], ["z"])], [("x", x)], ["z"],
                       [("w", w), ("lo", np.float32(lo)), ("hi", np.float32(hi))])
    k = compile_to("kernel-ir", model)
    clamps = {mm.clamp for mm in _matmuls(k)}
    assert clamps == {fused or (None, None)}
    got = ck.compile(model, asm=False).run(x)[0]
    if np.isnan(lo):  # a NaN bound: ONNX's reference (np.clip) gives NaN; onnxruntime ignores it
        assert np.isnan(got).all()
        return
    ref = ort_run(model, [x])[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_the_verifier_refuses_an_infinite_bound():
    from xdsl.dialects.builtin import ModuleOp, f32
    from xdsl.ir import Block, Region

    from compilerkit.lowering.builder import KernelBuilder, memref_type

    def module(clamp):
        mat = memref_type([4, 4], f32)
        block = Block(arg_types=[mat, mat, mat])
        b = KernelBuilder(block)
        zero = b.index(0)
        with b.nest([4, 4, 4]) as (i, j, k):
            b.block.add_op(krnl.MatMulOp(*block.args, i, j, k, [zero, zero, zero],
                                         sizes=[4, 4, 4], tile=[1, 1, 1], strides=[4, 1, 4, 4],
                                         simd=1, clamp=clamp))
        return ModuleOp(Region(block))

    module((0.0, 6.0)).verify()
    module((None, -2.0)).verify()
    with pytest.raises(VerifyException, match="clamp_hi must be a finite number"):
        module((0.0, np.inf)).verify()
