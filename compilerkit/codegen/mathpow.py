"""The math library's pow(x, y), in f64 LLVM IR (dispatched by mathlib.MathLib, which widens
f32 operands to f64 and rounds the result back once).

x^y = exp(y log|x|) loses about |y log x| ulps when computed in the result's precision (at
f32's overflow edge, y log x is 88: ~40 ulps). Here log and exp work in f64 (the Cephes/fdlibm
reduction, series long enough for ~1e-16), so an f32 result is within one rounding of the true
value, as libm's powf; an f64 Pow is good to about |y log x| 2^-52 (1e-13 relative at worst):
better than the f64 versions of the other math functions (computed through f32), short of
libm's pow.

The special cases are C99's (Annex F), as onnxruntime's std::pow answers them: x^0 = 1 and
1^y = 1 even for NaN; a negative finite x to a finite non-integer y is NaN; the sign of a
negative base (-0 and -inf included) survives an odd integer exponent; (-1)^(+-inf) = 1;
0^y<0 is inf, |x| < 1 to +inf is 0, and so on through the log and exp of 0 and inf.
"""

from __future__ import annotations

import math

import llvmlite.ir as ir

from compilerkit.codegen.mathir import F64, I64, c, fma, fn, intrinsic, poly

LN2_HI, LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # fdlibm's split
LOG_TERMS = tuple(2.0 / (2 * k + 1) for k in range(10, -1, -1))  # 2 atanh(s) = s P(s^2)
EXP_TERMS = tuple(1.0 / math.factorial(k) for k in range(14, -1, -1))  # e^r, |r| <= ln2 / 2
SMALLEST_NORMAL = 2.2250738585072014e-308


def _d(v):
    return c(v, F64)


def _i(v):
    return ir.Constant(I64, v)


def _log(b, x):
    """log(x) for x >= 0 (not NaN, not inf: pow's selects handle those): x = 2^e m,
    m in [sqrt(1/2), sqrt(2)), log m = 2 atanh((m - 1) / (m + 1)) as a series; subnormal x
    scaled by 2^54 first, 0 gives -inf."""
    tiny = b.fcmp_ordered("<", x, _d(SMALLEST_NORMAL))
    xs = b.select(tiny, b.fmul(x, _d(2.0 ** 54)), x)
    bits = b.bitcast(xs, I64)
    e = b.sub(b.and_(b.lshr(bits, _i(52)), _i(0x7FF)), b.select(tiny, _i(1023 + 54), _i(1023)))
    m = b.bitcast(b.or_(b.and_(bits, _i((1 << 52) - 1)), _i(0x3FF0000000000000)), F64)
    big = b.fcmp_ordered(">", m, _d(math.sqrt(2.0)))
    m = b.select(big, b.fmul(m, _d(0.5)), m)
    e = b.sitofp(b.select(big, b.add(e, _i(1)), e), F64)
    s = b.fdiv(b.fsub(m, _d(1.0)), b.fadd(m, _d(1.0)))
    p = b.fmul(poly(b, b.fmul(s, s), LOG_TERMS), s)
    y = fma(b, e, _d(LN2_HI), fma(b, e, _d(LN2_LO), p))
    return b.select(b.fcmp_ordered("==", x, _d(0.0)), _d(-math.inf), y)


def _pow2(b, n):
    """2^n as an f64, for n in [-1022, 1023]."""
    return b.bitcast(b.shl(b.add(n, _i(1023)), _i(52)), F64)


def _exp(b, t):
    """e^t: n = round(t / ln2), r = t - n ln2 (two fused steps), e^r by its Taylor series,
    2^n applied as two factors (t clamped to +-1400, where both stay normal), so results past
    the f64 range become inf or round once into the subnormals. NaN stays NaN."""
    tc = b.select(b.fcmp_ordered(">", t, _d(-1400.0)), t, _d(-1400.0))
    tc = b.select(b.fcmp_ordered("<", tc, _d(1400.0)), tc, _d(1400.0))
    n = b.call(intrinsic(b.module, "floor", F64), [fma(b, tc, _d(1 / math.log(2)), _d(0.5))])
    r = fma(b, n, _d(-LN2_HI), tc)
    r = fma(b, n, _d(-LN2_LO), r)
    p = poly(b, r, EXP_TERMS)
    ni = b.fptosi(n, I64)
    n1 = b.ashr(ni, _i(1))
    y = b.fmul(b.fmul(p, _pow2(b, n1)), _pow2(b, b.sub(ni, n1)))
    return b.select(b.fcmp_unordered("uno", t, t), t, y)


def build_pow(module):
    f, b = fn(module, "ck_pow", 2, F64)
    x, y = f.args
    floor = intrinsic(module, "floor", F64)
    ax = b.call(intrinsic(module, "fabs", F64), [x])
    r = _exp(b, b.fmul(y, _log(b, ax)))
    r = b.select(b.fcmp_ordered("==", ax, _d(math.inf)),  # log(inf) = inf, outside _log
                 b.select(b.fcmp_ordered(">", y, _d(0.0)), _d(math.inf), _d(0.0)), r)
    r = b.select(b.fcmp_unordered("uno", y, y), y, b.select(b.fcmp_unordered("uno", x, x), x, r))
    ay = b.call(intrinsic(module, "fabs", F64), [y])
    finite_y = b.fcmp_ordered("<", ay, _d(math.inf))
    integer = b.and_(finite_y, b.fcmp_ordered("==", b.call(floor, [y]), y))
    half = b.fmul(y, _d(0.5))
    odd = b.and_(b.and_(integer, b.fcmp_ordered("<", ay, _d(2.0 ** 53))),
                 b.fcmp_ordered("!=", b.call(floor, [half]), half))
    negative = b.icmp_signed("<", b.bitcast(x, I64), _i(0))  # the sign bit: -0 and -inf too
    r = b.select(b.and_(negative, odd), b.fsub(_d(-0.0), r), r)
    finite_neg = b.and_(b.fcmp_ordered("<", x, _d(0.0)), b.fcmp_ordered(">", x, _d(-math.inf)))
    r = b.select(b.and_(b.and_(finite_neg, finite_y), b.not_(integer)), _d(math.nan), r)
    one = b.or_(b.or_(b.fcmp_ordered("==", x, _d(1.0)), b.fcmp_ordered("==", y, _d(0.0))),
                b.and_(b.fcmp_ordered("==", x, _d(-1.0)), b.fcmp_ordered("==", ay, _d(math.inf))))
    b.ret(b.select(one, _d(1.0), r))
    return f
