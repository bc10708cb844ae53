"""krnl.matmul's `start` (the product's tiles start from zeros or a per-row bias instead of
from C): the verifier's rules, and the same bits whichever code generator does the start: the
host micro-kernel (a fill of the tile just before it sums), the (1, 1, 1) scalar nest, and the
`expand_matmul_start` (a fill nest before the product, what the LoopNest generator runs).
References: the expanded form through LLVM, numpy in float64, onnxruntime."""

import numpy as np
import pytest
from ckhelpers import make_model, ort_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper
from xdsl.utils.exceptions import VerifyException

import compilerkit as ck
from compilerkit.dialects import krnl
from compilerkit.loopnest.matmul_start import expand_matmul_start

SETTINGS = settings(max_examples=10, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
DIMS = st.sampled_from([1, 2, 5, 8, 9, 17, 33, 49])


def _matmuls(kmodule):
    return [op for op in kmodule.walk() if isinstance(op, krnl.MatMulOp)]


def _both_ways(model, opt_level):
    """(default compile, compile of the Kernel IR with every start expanded into a fill)."""
    default = ck.compile(model, asm=False, opt_level=opt_level)
    k = ck.lower(ck.optimize_onnx(ck.import_onnx(model)), opt_level=opt_level)
    assert any(mm.start is not None for mm in _matmuls(k))
    assert expand_matmul_start(k) >= 1
    assert all(mm.start is None and mm.bias is None for mm in _matmuls(k))
    k.verify()
    return default, ck.compile_kernel(k, opt_level=opt_level, asm=False)


@given(m=DIMS, n=DIMS, k=st.sampled_from([1, 3, 16, 300]), opt=st.sampled_from([1, 3]),
       seed=st.integers(0, 2**16))
@SETTINGS
def test_a_product_that_starts_from_zero_is_the_filled_one(m, n, k, opt, seed):
    """MatMul starts from zeros: the micro-kernel's own start (K over one 256 tile: the start
    happens only on the first k tile) equals the expanded fill bit for bit, and numpy."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", a), ("b", b)],
                       ["y"])
    default, expanded = _both_ways(model, opt)
    got = default.run(a, b)[0]
    assert np.array_equal(got, expanded.run(a, b)[0])
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * k)


def test_gemm_without_c_and_an_empty_depth():
    """Gemm without C starts from zeros; a product of depth 0 still writes its zeros."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal(
        (7, 9)).astype(np.float32)
    model = make_model([helper.make_node("Gemm", ["a", "b"], ["y"], alpha=1.0)],
                       [("a", a), ("b", b)], ["y"])
    np.testing.assert_allclose(ck.compile(model, asm=False).run(a, b)[0],
                               ort_run(model, [a, b])[0], rtol=1e-5, atol=1e-5)
    a0, b0 = np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", a0), ("b", b0)],
                       ["y"])
    out = ck.compile(model, asm=False).run(a0, b0)[0]
    assert out.shape == (3, 4) and np.array_equal(out, np.zeros((3, 4), np.float32))


def test_special_values_start_as_a_fill_would():
    """NaN and inf in A or B reach the outputs their rows and columns reach (a tile's old
    contents never leak in: the output buffer is not filled before the product)."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((17, 40)).astype(np.float32)
    b = rng.standard_normal((40, 33)).astype(np.float32)
    a[3, 5], b[7, 20] = np.nan, np.inf
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", a), ("b", b)],
                       ["y"])
    default, expanded = _both_ways(model, 3)
    got = default.run(a, b)[0]
    ref = ort_run(model, [a, b])[0]
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    assert np.array_equal(got, expanded.run(a, b)[0], equal_nan=True)


def _module_with_matmul(start, bias_len):
    """A Kernel IR module holding one krnl.matmul of M = 4 with the given start and bias."""
    from xdsl.dialects.builtin import ModuleOp, f32
    from xdsl.ir import Block, Region

    from compilerkit.lowering.builder import KernelBuilder, memref_type

    mat = memref_type([4, 4], f32)
    block = Block(arg_types=[mat, mat, mat] + ([memref_type([bias_len], f32)] if bias_len
                                               else []))
    b = KernelBuilder(block)
    zero = b.index(0)
    with b.nest([4, 4, 4]) as (i, j, k):
        b.block.add_op(krnl.MatMulOp(*block.args[:3], i, j, k, [zero, zero, zero],
                                     sizes=[4, 4, 4], tile=[1, 1, 1], strides=[4, 1, 4, 4],
                                     simd=1, start=start,
                                     bias=block.args[3] if bias_len else None))
    return ModuleOp(Region(block))


@pytest.mark.parametrize("start, bias_len, why", [
    ("bias", 0, "exactly when its start"), ("zero", 4, "exactly when its start"),
    ("one", 0, "start must be one of"), ("bias", 3, "at least M = 4")])
def test_the_verifier_names_a_bad_start(start, bias_len, why):
    with pytest.raises(VerifyException, match=why):
        _module_with_matmul(start, bias_len).verify()


def test_a_good_start_verifies():
    _module_with_matmul("bias", 4).verify()
    _module_with_matmul("zero", 0).verify()
    _module_with_matmul(None, 0).verify()
