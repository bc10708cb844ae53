"""The IR-level math library: exp, log, tanh, erf written in LLVM IR by compilerkit; the
trigonometric and hyperbolic functions and their inverses (mathtrig.py) and pow (mathpow.py)
are built alike and dispatched from here (MathLib).

Calling the C library would make results depend on each target's libm; these functions are
plain float arithmetic (range reduction + polynomials, as in Cephes), so every target computes
the same values. sqrt, floor, ceil, fabs, copysign and fma are LLVM intrinsics: IEEE-exact
everywhere (llvm.fma is one rounding of a * b + c on every target: x86-64 vfmadd, s390x
maebr, POWER fmadds/xvmaddasp, PTX fma.rn; libm's exact fmaf where a CPU has none). Polynomials
and range reductions use it (about a third fewer instructions than separate multiply and add,
and one rounding fewer per step). No fast-math flags, so LLVM may not reassociate or contract
on its own: a vectorised loop computes each lane exactly as the scalar code does, on every
target.

All are internal and always-inline, and branch-free (range checks are selects, 2^n is built
from the exponent bits with shl + bitcast): after inlining, a loop that calls them is a
straight-line body that LLVM's loop vectoriser turns into `<8 x float>` code (AVX2).
Whether it does also depends on the loop: LLVM leaves a loop of fewer than 16 iterations scalar
when it would need run-time alias checks, which is why lowering/elementwise.py merges short
trailing dimensions (sin and cos read a 2/pi table for huge arguments: a gather, still no
branch). tests/compilerkit/test_mathlib_vector.py checks both (accuracy in ulps
against numpy's float64, vector code in the optimised IR).
"""

from __future__ import annotations

import llvmlite.ir as ir

from compilerkit.codegen import mathpow, mathtrig
from compilerkit.codegen.mathir import F32, F64, I32, copysign, fma, intrinsic, poly, select
from compilerkit.codegen.mathir import c as _c
from compilerkit.codegen.mathir import fn as _fn

# The helpers under the names this file's functions use.
_fma, _poly, _select = fma, poly, select

# The numbers of exp and log. The loopnest generator's vector code (loopnest/leaf.py) computes
# the same sequences from these, so the two code generators agree bit for bit.
EXP_RANGE = (-104.0, 89.0)  # exp is 0 below, inf above
LOG2E = 1.4426950408889634
LN2_PARTS = (-0.693359375, 2.12194440e-4)  # -ln2 = first + second (Cody-Waite)
# P(r) in pairs (a, b) -> a r + b, highest degree first (Estrin)
EXP_PAIRS = ((1.9875691500e-4, 1.3981999507e-3), (8.3334519073e-3, 4.1665795894e-2),
             (1.6666665459e-1, 5.0000001201e-1))
SQRT2 = 1.41421356
LN2 = 0.6931471805599453
LOG_SERIES = (2.0 / 11, 2.0 / 9, 2.0 / 7, 2.0 / 5, 2.0 / 3, 2.0)  # in s^2, highest first
SMALLEST_NORMAL = 1.17549435e-38
SUBNORMAL_SHIFT = 23  # log scales a subnormal by 2^23 (exact) before reading its exponent


# The functions that are LLVM intrinsics, exact in every precision: f64 values call their f64
# form (the others, compilerkit's own f32 code, are applied to f64 through f32).
EXACT_INTRINSICS = ("sqrt", "floor", "ceil", "fabs")


def intrinsic_f64(module, name):
    """llvm.<name>.f64, for a name in EXACT_INTRINSICS: an f64 Floor, Sqrt or Abs through the
    f32 intrinsic lost every bit past the 24th (Floor(16777217.5) gave 16777218)."""
    full = f"llvm.{name}.f64"
    if full in module.globals:
        return module.globals[full]
    return ir.Function(module, ir.FunctionType(ir.DoubleType(), [ir.DoubleType()]), full)


def build_exp(module):
    """exp(x) = 2^n * exp(r), n = round(x / ln2), |r| <= ln2/2 (Cephes expf: Cody-Waite
    reduction, degree-6 polynomial; about 1 ulp). 2^n is applied as two exact power-of-two
    factors 2^(n>>1) * 2^(n - (n>>1)), so results that are subnormal (x < -87.3) round once,
    correctly, and results past FLT_MAX (x > 88.72) overflow to +inf, with no special case."""
    f, b = _fn(module, "ck_expf")
    x = f.args[0]
    # Clamp to [-104, 89] (exp is 0 below, inf above). An ordered compare sends NaN to -104,
    # so the integer conversion below never sees NaN; NaN is put back at the end.
    lo, hi = EXP_RANGE
    xc = _select(b, b.fcmp_ordered(">", x, _c(lo)), x, _c(lo))
    xc = _select(b, b.fcmp_ordered("<", xc, _c(hi)), xc, _c(hi))
    n = b.call(intrinsic(module, "floor"), [_fma(b, xc, _c(LOG2E), _c(0.5))])
    # ln2 in two parts (Cody-Waite): x - n * 0.693359375 is exact, the fused second step
    # subtracts n * 2.12e-4 with one rounding.
    r = _fma(b, n, _c(LN2_PARTS[0]), xc)
    r = _fma(b, n, _c(LN2_PARTS[1]), r)
    # 1 + r + r^2 P(r), P of degree 5 evaluated in pairs (Estrin) rather than by Horner: three
    # short dependency chains instead of one long one, so more loop iterations are in flight.
    r2 = b.fmul(r, r)
    p0, p1, p2 = (_fma(b, _c(hi_), r, _c(lo_)) for hi_, lo_ in EXP_PAIRS)
    p = _fma(b, _fma(b, p0, r2, p1), r2, p2)
    p = b.fadd(_fma(b, p, r2, r), _c(1.0))
    ni = b.fptosi(n, I32)  # in [-150, 128]
    n1 = b.ashr(ni, ir.Constant(I32, 1))  # both halves in [-75, 64]: normal powers of two
    n2 = b.sub(ni, n1)
    y = b.fmul(b.fmul(p, _pow2(b, n1)), _pow2(b, n2))
    y = _select(b, b.fcmp_unordered("uno", x, x), x, y)
    b.ret(y)
    return f


def _pow2(b, n):
    """2^n as a float, for n in [-126, 127]: the biased exponent shifted into place."""
    return b.bitcast(b.shl(b.add(n, ir.Constant(I32, 127)), ir.Constant(I32, 23)), F32)


def build_log(module):
    """log(x) = e ln2 + log(m), m in [sqrt(1/2), sqrt(2)), log(m) from the series in
    s = (m - 1) / (m + 1). A subnormal x has no implicit leading bit, so its exponent field
    does not give e: it is first scaled by 2^SUBNORMAL_SHIFT (exact), which makes it normal,
    and e is corrected by the shift (log(1e-45) is -103.28, not the -87.34 of the smallest
    normal)."""
    f, b = _fn(module, "ck_logf")
    x = f.args[0]
    tiny = b.fcmp_ordered("<", x, _c(SMALLEST_NORMAL))
    xs = _select(b, tiny, b.fmul(x, _c(float(1 << SUBNORMAL_SHIFT))), x)
    bits = b.bitcast(xs, I32)
    e = b.sub(b.and_(b.lshr(bits, ir.Constant(I32, 23)), ir.Constant(I32, 255)),
              _select(b, tiny, ir.Constant(I32, 127 + SUBNORMAL_SHIFT), ir.Constant(I32, 127)))
    m = b.bitcast(b.or_(b.and_(bits, ir.Constant(I32, 0x7FFFFF)), ir.Constant(I32, 0x3F800000)),
                  F32)
    big = b.fcmp_ordered(">", m, _c(SQRT2))
    m = _select(b, big, b.fmul(m, _c(0.5)), m)
    e = _select(b, big, b.add(e, ir.Constant(I32, 1)), e)
    fm = b.fsub(m, _c(1.0))
    s = b.fdiv(fm, b.fadd(fm, _c(2.0)))
    s2 = b.fmul(s, s)
    p = _poly(b, s2, LOG_SERIES)
    y = b.fadd(b.fmul(p, s), b.fmul(b.sitofp(e, F32), _c(LN2)))
    # Special cases: log(+-0) = -inf, log(x<0) = nan, log(inf) = inf, log(nan) = nan.
    y = _select(b, b.fcmp_ordered("==", x, _c(0.0)), _c(float("-inf")), y)
    y = _select(b, b.fcmp_ordered("<", x, _c(0.0)), _c(float("nan")), y)
    y = _select(b, b.fcmp_ordered("==", x, _c(float("inf"))), x, y)
    y = _select(b, b.fcmp_unordered("uno", x, x), x, y)
    b.ret(y)
    return f


def build_tanh(module, exp):
    """Cephes tanhf on |x|: below 0.625 an odd polynomial |x| + |x|^3 P(x^2) (no cancellation
    near 0), above it (1 - t) / (1 + t) with t = exp(-2|x|) (t <= 0.29, so 1 - t loses nothing;
    t = 0 gives 1 for large |x|). Both are computed, a select picks one, and the sign is copied
    from x (so tanh(-0) = -0). NaN fails the ordered compare and stays NaN through exp."""
    f, b = _fn(module, "ck_tanhf")
    x = f.args[0]
    ax = b.call(intrinsic(module, "fabs"), [x])
    z = b.fmul(ax, ax)
    p = _poly(b, z, [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2,
                     1.33314422036e-1, -3.33332819422e-1])
    small = _fma(b, b.fmul(p, z), ax, ax)
    t = b.call(exp, [b.fmul(ax, _c(-2.0))])
    large = b.fdiv(b.fsub(_c(1.0), t), b.fadd(_c(1.0), t))
    y = _select(b, b.fcmp_ordered("<", ax, _c(0.625)), small, large)
    b.ret(b.call(copysign(module), [y, x]))
    return f


# Cephes erff below |x| = 1: erf(x) = x P(x^2), highest degree first (relative error ~1e-7)
ERF_SMALL = (7.853861353153693e-5, -8.010193625184903e-4, 5.188327685732524e-3,
             -2.685381193529856e-2, 1.128358514861418e-1, -3.761262582423300e-1,
             1.128379165726710)


def build_erf(module, exp):
    """Below |x| = 1 Cephes' odd polynomial x P(x^2): relative accuracy down to the
    subnormals, erf(+-0) = +-0. From 1 on Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7, an
    absolute bound: near 0 it was the whole answer, erf(1e-30) came out 1e-9); inf gives 1,
    NaN fails the ordered compares and stays NaN."""
    f, b = _fn(module, "ck_erff")
    x = f.args[0]
    ax = b.call(intrinsic(module, "fabs"), [x])
    small = b.fmul(x, _poly(b, b.fmul(x, x), ERF_SMALL))
    t = b.fdiv(_c(1.0), b.fadd(_c(1.0), b.fmul(_c(0.3275911), ax)))
    p = _poly(b, t, [1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592])
    p = b.fmul(p, t)
    y = b.fsub(_c(1.0), b.fmul(p, b.call(exp, [b.fsub(_c(0.0), b.fmul(ax, ax))])))
    large = _select(b, b.fcmp_ordered("<", x, _c(0.0)), b.fsub(_c(0.0), y), y)
    b.ret(_select(b, b.fcmp_ordered("<", ax, _c(1.0)), small, large))
    return f


# name -> (builder, the math functions it calls); the builders of mathtrig and mathpow
# take the module and those functions, in that order.
_BUILT = {
    "exp": (build_exp, ()), "log": (build_log, ()), "tanh": (build_tanh, ("exp",)),
    "erf": (build_erf, ("exp",)),
    "sin": (mathtrig.build_sin, ()), "cos": (mathtrig.build_cos, ()),
    "tan": (mathtrig.build_tan, ()), "asin": (mathtrig.build_asin, ()),
    "acos": (mathtrig.build_acos, ()), "atan": (mathtrig.build_atan, ()),
    "sinh": (mathtrig.build_sinh, ("exp",)), "cosh": (mathtrig.build_cosh, ("exp",)),
    "asinh": (mathtrig.build_asinh, ("log",)), "acosh": (mathtrig.build_acosh, ("log",)),
    "atanh": (mathtrig.build_atanh, ("log",)),
    "powf": (mathpow.build_pow, ()),
}


class MathLib:
    """Builds each function on first use in the module being generated."""

    def __init__(self, module):
        self.module = module
        self.funcs = {}

    def get(self, name):
        if name not in self.funcs:
            if name in _BUILT:
                build, needs = _BUILT[name]
                self.funcs[name] = build(self.module, *(self.get(n) for n in needs))
            elif name in EXACT_INTRINSICS:
                self.funcs[name] = intrinsic(self.module, name)
            else:
                raise NotImplementedError(f"math function {name}")
        return self.funcs[name]

    def call(self, b, name, args):
        """name(args) for f32 or f64 values: the exact intrinsics in the values' own precision;
        powf, whose function works in f64, on the values widened; every other function is
        compilerkit's f32 code, applied to f64 through f32."""
        t = args[0].type
        if name == "copysign":  # exact in every precision
            return b.call(copysign(self.module, t), args)
        if name == "fma":  # one rounding in every precision (math.fma)
            return _fma(b, *args)
        if name == "powf":
            wide = [a if a.type == F64 else b.fpext(a, F64) for a in args]
            y = b.call(self.get(name), wide)
            return y if t == F64 else b.fptrunc(y, t)
        if t == F64 and name in EXACT_INTRINSICS:
            return b.call(intrinsic_f64(self.module, name), args)
        fn = self.get(name)
        if t == F64:
            return b.fpext(b.call(fn, [b.fptrunc(a, F32) for a in args]), F64)
        return b.call(fn, args)
