"""Special values and integer edge cases answer as onnxruntime does, on the host and on the
emulated big-endian targets: the math library on subnormals, +-0, +-inf, NaN and huge
values (against numpy's float64, an independent reference); Cast of NaN, inf and out-of-range
floats to integers (onnxruntime's x86-64 answer, on every target); int32 Div on s390x and
ppc64 at every optimisation level; and constant folding of an integer Div by zero or of the
most negative value by -1, which must not answer at compile time what the run time refuses.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from ckhelpers import make_model, ort_run
from onnx import TensorProto, helper

import compilerkit as ck

F32 = np.finfo(np.float32)
SPECIAL = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, F32.max, -F32.max, F32.tiny, -F32.tiny,
     1e-45, -1e-45, 1.4e-42, 3e-39, 1.1754942e-38, 5.9e-39, 1e-30, -1e-30, 1e-7, -1e-7,
     0.5, -0.5, 0.84, 1.0, -1.0, 1.5, 3.9, -3.9, 10.0, -10.0, 88.7, 89.0, -87.5, -103.9,
     -104.5, 1e10, -1e10, 1e30, -1e30, 3.4e38], np.float32)

# float64 references (numpy's libm, or math.erf), rounded to float32
REFERENCE = {
    "Exp": np.exp,
    "Log": np.log,
    "Tanh": np.tanh,
    "Sqrt": np.sqrt,
    "Sigmoid": lambda d: 1.0 / (1.0 + np.exp(-d)),
    "Softplus": lambda d: np.logaddexp(0.0, d),
}
# ulps allowed (subnormal results count in subnormal ulps)
MAX_ULP = {"Exp": 2, "Log": 2, "Tanh": 2, "Sqrt": 0, "Sigmoid": 3, "Erf": 4, "Softplus": 4}


def _unary(op, x):
    return make_model([helper.make_node(op, ["x"], ["y"])], [("x", x)], ["y"])


def _ordered(v):
    i = v.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def _check_special(op, x, got):
    with np.errstate(all="ignore"):
        ref = REFERENCE[op](x.astype(np.float64)).astype(np.float32)
    nan = np.isnan(ref)
    bad = np.flatnonzero(np.isnan(got) != nan)
    assert bad.size == 0, f"{op}({x[bad]}) = {got[bad]}, numpy {ref[bad]}"
    err = np.abs(_ordered(got[~nan]) - _ordered(ref[~nan]))
    k = int(np.argmax(err))
    assert err[k] <= MAX_ULP[op], (f"{op}({x[~nan][k]!r}) = {got[~nan][k]!r}, numpy "
                                   f"{ref[~nan][k]!r}: {err[k]} ulp")
    # zeros keep their sign where the function is odd (or exp/sqrt of -0)
    zero = (ref == 0) & ~nan
    assert np.array_equal(np.signbit(got[zero]), np.signbit(ref[zero])), op


@pytest.mark.parametrize("op", sorted(REFERENCE))
def test_math_functions_on_special_values(op):
    x = SPECIAL.copy()
    got = ck.compile(_unary(op, x), asm=False).run(x)[0]
    _check_special(op, x, got)


def test_log_of_subnormals_is_not_clamped():
    """log(1e-45) is -103.28; the exponent field of a subnormal is 0, and the old code
    answered log of the smallest normal (-87.34) for all of them: off by 16."""
    x = np.array([1e-45, 1e-44, 1e-40, 1e-39, 1.17e-38], np.float32)
    for codegen in ("llvm", "loopnest"):
        got = ck.compile(_unary("Log", x), asm=False, codegen=codegen).run(x)[0]
        np.testing.assert_allclose(got, np.log(x.astype(np.float64)), rtol=1e-6)


@pytest.mark.parametrize("target", ["s390x", "ppc64"])
def test_math_functions_on_emulated_targets(target):
    """The same bits as the host (no libm anywhere) on special values."""
    x = SPECIAL.copy()
    ops = ("Log", "Exp", "Tanh", "Softplus")
    nodes = [helper.make_node(op, ["x"], [op.lower()]) for op in ops]
    model = make_model(nodes, [("x", x)], [op.lower() for op in ops])
    host = ck.compile(model, asm=False).run(x)
    emu = ck.compile(model, target=target, asm=False).run(x)
    for op, h, e in zip(ops, host, emu, strict=True):
        assert np.array_equal(h.view(np.int32), e.view(np.int32)), op
        _check_special(op, x, e)


def test_erf_of_the_math_library():
    """ck_erff (no ONNX op lowers to it yet) called through the JIT: relative accuracy near 0
    (Abramowitz & Stegun's absolute 1.5e-7 made erf(1e-30) 1e-9), +-0, +-inf, NaN."""
    import ctypes

    import llvmlite.binding as llvm
    import llvmlite.ir as ir

    from compilerkit.backends.base import init_llvm
    from compilerkit.codegen.mathlib import MathLib

    init_llvm()
    module = ir.Module(name="erf")
    module.triple = llvm.get_default_triple()
    fn = MathLib(module).get("erf")
    f32p = ir.FloatType().as_pointer()
    wrap = ir.Function(module, ir.FunctionType(ir.VoidType(), [f32p, f32p, ir.IntType(64)]),
                       "erf_all")
    bld = ir.IRBuilder(wrap.append_basic_block())
    src, dst, n = wrap.args
    from compilerkit.codegen.microkernel import counted_loop

    counted_loop(bld, ir.Constant(ir.IntType(64), 0), n, ir.Constant(ir.IntType(64), 1),
                 lambda i: bld.store(bld.call(fn, [bld.load(bld.gep(src, [i]))]),
                                     bld.gep(dst, [i])))
    bld.ret_void()
    mod = llvm.parse_assembly(str(module))
    tm = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    call = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("erf_all"))
    x = np.concatenate([SPECIAL, np.linspace(-5, 5, 2001, dtype=np.float32)])
    got = np.empty_like(x)
    call(x.ctypes.data, got.ctypes.data, x.size)
    ref = np.array([math.erf(v) if not np.isnan(v) else np.nan for v in x.astype(np.float64)])
    ref = ref.astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    ok = ~np.isnan(ref)
    err = np.abs(_ordered(got[ok]) - _ordered(ref[ok]))
    assert err.max() <= 4, (x[ok][np.argmax(err)], got[ok][np.argmax(err)])
    assert np.array_equal(np.signbit(got[ok & (ref == 0)]), np.signbit(ref[ok & (ref == 0)]))


CAST_X = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20, -1e20, 2147483520.0,
                   -2147483648.0, 300.7, -300.7, 70000.5, 2.5, -2.5, 0.0, -0.0, 8589934592.0,
                   -9.3e18, 9.3e18, 1e-40], np.float32)
INT_TYPES = {"int8": TensorProto.INT8, "int16": TensorProto.INT16,
             "int32": TensorProto.INT32, "int64": TensorProto.INT64}


def _cast_model(dtype):
    x = CAST_X.astype(dtype)
    nodes = [helper.make_node("Cast", ["x"], [name], to=to) for name, to in INT_TYPES.items()]
    return make_model(nodes, [("x", x)], list(INT_TYPES)), x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("target", ["host", "s390x", "ppc64"])
def test_cast_of_nan_inf_and_out_of_range_to_int(target, dtype):
    """onnxruntime's answer (x86-64's cvttss2si: NaN, inf and what does not fit in i32 (i64
    for int64) give the most negative integer, narrower types keep its low bits) on every
    target, not each CPU's own (s390x and POWER saturate)."""
    model, x = _cast_model(dtype)
    ref = ort_run(model, [x])
    got = ck.compile(model, target=target, opt_level=2, asm=False).run(x)
    for name, g, r in zip(INT_TYPES, got, ref, strict=True):
        np.testing.assert_array_equal(g, r, err_msg=f"Cast to {name} on {target}")


def _div_model(dtype, n=8):
    a = np.zeros(n, dtype)
    return make_model([helper.make_node("Div", ["a", "b"], ["q"], name="quot")],
                      [("a", a), ("b", a)], ["q"])


@pytest.mark.parametrize("n", [8, 37])
@pytest.mark.parametrize("opt_level", [0, 1, 2, 3])
@pytest.mark.parametrize("target", ["s390x", "ppc64"])
def test_int32_division_on_emulated_targets(target, opt_level, n):
    """8 elements: one unrolled body, where s390x's -O2/-O3 code kept divisors in high
    words and divided by garbage (a divide exception, or zeros)."""
    rng = np.random.default_rng(opt_level)
    a = rng.integers(-2**31 + 1, 2**31, n).astype(np.int32)
    b = rng.integers(-1000, 1000, n).astype(np.int32)
    b[b == 0] = 7
    a[:4] = [7, -7, 2**31 - 1, -2**31]
    b[:4] = [2, 2, -3, 5]
    model = _div_model(np.int32, n)
    cm = ck.compile(model, target=target, opt_level=opt_level, asm=False)
    np.testing.assert_array_equal(cm.run(a, b)[0], ort_run(model, [a, b])[0])
    with pytest.raises(ck.RunError, match="node 'quot': integer division by zero"):
        cm.run(a, 0 * b)


def test_s390x_code_uses_no_high_word_instructions():
    """Unicorn's s390x misexecutes RISBLG (high-word facility); the emulated target turns
    the facility off, so no high-word instruction may appear in its code."""
    cm = ck.compile(_div_model(np.int32), target="s390x", opt_level=3)
    asm = cm.stages["asm"]
    for insn in ("risblg", "risbhg", "lfh", "stfh", "cih", "aih", "llhfr"):
        assert f"\t{insn}\t" not in asm, insn


def _const_div(a, b, dtype):
    """q = a / b with both constants (folded when it is safe), plus x so there is an input."""
    x = np.zeros(len(a), dtype)
    return make_model(
        [helper.make_node("Div", ["a", "b"], ["q"], name="quot"),
         helper.make_node("Add", ["q", "x"], ["y"], name="add")],
        [("x", x)], ["y"],
        inits=[("a", np.array(a, dtype)), ("b", np.array(b, dtype))]), x


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("case", ["zero", "overflow"])
def test_constant_integer_division_that_would_fault_is_left_to_run_time(case, dtype):
    """The same data as constants and as inputs: both raise RunError naming the node (the
    folded node answered 0, or the wrapped INT_MIN, in silence)."""
    lo = np.iinfo(dtype).min
    a, b = ([7, -7, 9], [2, 0, 3]) if case == "zero" else ([lo, 8, 9], [-1, 2, 3])
    model, x = _const_div(a, b, dtype)
    cm = ck.compile(model, asm=False)
    what = "by zero" if case == "zero" else "overflows"
    with pytest.raises(ck.RunError, match=f"node 'quot': integer division {what}"):
        cm.run(x)


def test_safe_constant_integer_division_still_folds():
    model, x = _const_div([7, -7, -9, 2**31 - 1], [2, 2, 4, -1], np.int32)
    cm = ck.compile(model, asm=False)
    assert "onnx.Div" not in str(cm.provenance.modules["onnx-ir"])
    np.testing.assert_array_equal(cm.run(x)[0], ort_run(model, [x])[0])
    np.testing.assert_array_equal(cm.run(x)[0], [3, -3, -2, -(2**31 - 1)])



# ---- special values through the tiled Conv algorithms ---------------------------------------

TILED = ["winograd", "winograd-f2", "winograd-f6", "winograd-fused", "winograd-f2-fused",
         "fft", "fft-fused", "fft-t8", "auto", "auto-f4"]


def _conv_model(c=16, k=16, side=12, kernel=3, dims=2, seed=0):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, c) + (kernel,) * dims) * 0.2).astype(np.float32)
    bias = rng.standard_normal(k).astype(np.float32)
    x = rng.standard_normal((1, c) + (side,) * dims).astype(np.float32)
    pads = [kernel // 2] * (2 * dims)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=pads, name="conv")
    return make_model([node], [("x", x)], ["y"], inits=[("w", w), ("b", bias)]), x


def _assert_like_ort(got, ref, what):
    """NaN and inf exactly where onnxruntime has them; elsewhere finite and close."""
    assert np.array_equal(np.isnan(got), np.isnan(ref)), (
        f"{what}: {int((np.isnan(got) & ~np.isnan(ref)).sum())} NaN where onnxruntime has "
        f"none, {int((~np.isnan(got) & np.isnan(ref)).sum())} the reverse")
    assert np.array_equal(np.isinf(got), np.isinf(ref)), what
    fin = np.isfinite(ref)
    scale = np.abs(ref[fin])
    err = np.abs(got[fin] - ref[fin]) / (1.0 + scale)
    assert err.max() < 1e-4, f"{what}: error {err.max():.3g} on a finite output"


@pytest.mark.parametrize("algo", TILED)
def test_special_input_values_stay_local_under_tiled_convs(algo):
    """One NaN, inf, 1e30 or 1e37 pixel: onnxruntime makes the outputs whose window holds
    it NaN/inf (or large), and leaves the rest finite and right; the transforms spread it
    over every output of its tiles (hundreds of them) unless those tiles are recomputed."""
    model, x = _conv_model()
    cm = ck.compile(model, asm=False, conv_algorithm=algo)
    for value in (np.nan, np.inf, -np.inf, 1e30, 1e37, -3e38):
        xx = x.copy()
        xx[0, 3, 5, 6] = value
        xx[0, 9, 11, 0] = value  # at an edge: tiles hanging over the output's end
        _assert_like_ort(cm.run(xx)[0], ort_run(model, [xx])[0], f"{algo}, x = {value}")
    _assert_like_ort(cm.run(x)[0], ort_run(model, [x])[0], f"{algo}, plain input")


@pytest.mark.parametrize("algo", ["winograd-f2", "fft", "winograd-fused"])
def test_special_values_in_3d_tiled_convs(algo):
    model, x = _conv_model(c=4, k=4, side=6, dims=3)
    cm = ck.compile(model, asm=False, conv_algorithm=algo)
    xx = x.copy()
    xx[0, 1, 2, 3, 4] = np.nan
    xx[0, 2, 5, 5, 5] = 1e30
    _assert_like_ort(cm.run(xx)[0], ort_run(model, [xx])[0], algo)


def test_special_values_with_a_larger_fft_kernel():
    model, x = _conv_model(c=4, k=4, side=16, kernel=5)
    cm = ck.compile(model, asm=False, conv_algorithm="fft-t16")
    xx = x.copy()
    xx[0, 0, 0, 15] = np.inf
    xx[0, 3, 7, 7] = 1e30
    _assert_like_ort(cm.run(xx)[0], ort_run(model, [xx])[0], "fft-t16, kernel 5")


@pytest.mark.parametrize("target", ["s390x", "ppc64"])
def test_special_values_under_winograd_on_emulated_targets(target):
    """F(4, 3) (F(2, 3)'s transforms keep a NaN local by their zeros, F(4, 3)'s do not)."""
    model, x = _conv_model(c=4, k=4, side=8)
    cm = ck.compile(model, target=target, asm=False, conv_algorithm="winograd")
    xx = x.copy()
    xx[0, 1, 2, 3] = np.nan
    xx[0, 2, 7, 0] = 1e30
    _assert_like_ort(cm.run(xx)[0], ort_run(model, [xx])[0], f"winograd on {target}")
