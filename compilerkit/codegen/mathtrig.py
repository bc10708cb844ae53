"""The math library's trigonometric and hyperbolic functions and their inverses, in f32 LLVM IR
(dispatched by mathlib.MathLib, built as its other functions are: internal, always-inline,
branch-free, fused multiply-adds, no libm).

sin, cos and tan share one range reduction to r in [-pi/4, pi/4] and a quadrant q (Eigen's
psincos_float): below |x| = 71476 q = round(|x| 2/pi) and r = |x| - q pi/2 in three fused
steps (pi/2 in three parts; exact enough there); above it, Payne-Hanek (Eigen's
trig_reduce_huge): |x| times 2/pi as a fixed-point product with 96 bits of 2/pi chosen by |x|'s
exponent from a table, so sin(1e30) is right rather than noise. Both reductions are computed and
a select picks one. sin(r) and cos(r) are Eigen's minimax polynomials (about 1 ulp).

The inverses and the hyperbolic functions follow Cephes (asinf, acosf, atanf, sinhf, coshf,
asinhf, acoshf, atanhf): each branch of the C code is computed and selects pick the result.
Special values as C99 and numpy: sin/cos/tan(+-inf) = NaN, odd functions keep the sign of 0,
asin/acos outside [-1, 1], acosh below 1 and atanh outside [-1, 1] are NaN, atanh(+-1) = +-inf,
sinh/cosh overflow to inf only where the answer does (|x| > 89.4, not exp's 88.7).
"""

from __future__ import annotations

import math

import llvmlite.ir as ir

from compilerkit.codegen.mathir import F32, F64, I32, I64, c, copysign, fma, fn, intrinsic, poly

HUGE = 71476.0625  # from here on, the three-part reduction loses accuracy (Eigen's cos bound)
TWO_OVER_PI_WORDS = (
    0x00000028, 0x000028be, 0x0028be60, 0x28be60db, 0xbe60db93, 0x60db9391, 0xdb939105,
    0x9391054a, 0x91054a7f, 0x054a7f09, 0x4a7f09d5, 0x7f09d5f4, 0x09d5f47d, 0xd5f47d4d,
    0xf47d4d37, 0x7d4d3770, 0x4d377036, 0x377036d8, 0x7036d8a5, 0x36d8a566, 0xd8a5664f,
    0xa5664f10, 0x664f10e4, 0x4f10e410, 0x10e41000, 0xe4100000)  # 2/pi's bits, 8 bits apart
PIO2_PARTS = (-1.57079601287841796875, -3.1391647326017846353352069854736328125e-07,
              -5.390302529957764765544681040410068817436695098876953125e-15)
COS_POLY = (2.4372266125283204019069671630859375e-05, -0.00138865201734006404876708984375,
            0.041666619479656219482421875, -0.5, 1.0)  # in r^2
SIN_POLY = (-0.0001959234114083702898469196984621021329076029360294342041015625,
            0.0083326873655616851693794799871284340042620897293090820312500000,
            -0.1666666203982298255503735617821803316473960876464843750000000000)  # r + r^3 P
PIO2_HI, PIO2_LO = 1.57079637050628662109375, -4.37113900018624283e-8  # pi/2 = hi + lo
LN2 = 0.6931471805599453


def _i(v, t=I32):
    return ir.Constant(t, v)


def _table(module):
    name = "ck_two_over_pi"
    if name in module.globals:
        return module.globals[name]
    at = ir.ArrayType(I32, len(TWO_OVER_PI_WORDS))
    g = ir.GlobalVariable(module, at, name=name)
    g.linkage = "internal"
    g.global_constant = True
    g.initializer = ir.Constant(at, [ir.Constant(I32, w) for w in TWO_OVER_PI_WORDS])
    return g


def _reduce_huge(b, module, ax):
    """(r, q) for |x| >= HUGE (Eigen's trig_reduce_huge): x 2/pi in 2.62-bit fixed point from
    the 24-bit mantissa times three 32-bit words of 2/pi picked by the exponent; q the nearest
    integer, r = (x 2/pi - q) pi/2 in f64. Smaller |x| are replaced by HUGE first, so the table
    reads stay inside the table for every input (inf and NaN included)."""
    ax = b.select(b.fcmp_ordered(">=", ax, c(HUGE)), ax, c(HUGE))
    xi = b.bitcast(ax, I32)
    e = b.sub(b.lshr(xi, _i(23)), _i(118))
    m = b.shl(b.or_(b.and_(xi, _i(0x7FFFFF)), _i(0x800000)), b.and_(e, _i(7)))
    k = b.lshr(e, _i(3))
    table = _table(module)

    def word(offset):
        p = b.gep(table, [_i(0), b.add(k, _i(offset))])
        return b.load(p)

    w1, w2, w3 = word(-1), word(3), word(7)
    m64 = b.zext(m, I64)
    p = b.mul(m64, b.zext(w3, I64))
    p = b.add(b.mul(m64, b.zext(w2, I64)), b.lshr(p, _i(32, I64)))
    p = b.add(b.shl(b.zext(b.mul(m, w1), I64), _i(32, I64)), p)
    q = b.lshr(b.add(p, _i(1 << 61, I64)), _i(62, I64))
    p = b.sub(p, b.shl(q, _i(62, I64)))
    r = b.fmul(b.sitofp(p, F64), c(3.4061215800865545e-19, F64))  # pi/2 * 2^-62
    return b.fptrunc(r, F32), b.trunc(q, I32)


def _reduce(b, module, ax):
    """(r, q): |x| = q pi/2 + r, |r| <= pi/4; q as an i32 whose two low bits are right."""
    magic = c(12582912.0)  # 1.5 * 2^23: adding it rounds to an integer kept in the low bits
    y = fma(b, ax, c(2.0 / math.pi), magic)
    q = b.bitcast(y, I32)
    y = b.fsub(y, magic)
    r = ax
    for part in PIO2_PARTS:
        r = fma(b, y, c(part), r)
    rh, qh = _reduce_huge(b, module, ax)
    huge = b.fcmp_ordered(">=", ax, c(HUGE))
    return b.select(huge, rh, r), b.select(huge, qh, q)


def _sin_cos_polys(b, r):
    r2 = b.fmul(r, r)
    cos = poly(b, r2, COS_POLY)
    sin = fma(b, b.fmul(poly(b, r2, SIN_POLY), r2), r, r)
    return sin, cos


def _flip(b, y, sign_bits):
    """y with its sign bit xor-ed with bit 31 of sign_bits."""
    s = b.and_(sign_bits, _i(-0x80000000))
    return b.bitcast(b.xor(b.bitcast(y, I32), s), F32)


def _nan_at_inf(b, ax, y):
    return b.select(b.fcmp_ordered("==", ax, c(math.inf)), c(math.nan), y)


def _sincos(module, name, want_sin):
    f, b = fn(module, name)
    x = f.args[0]
    ax = b.call(intrinsic(module, "fabs"), [x])
    r, q = _reduce(b, module, ax)
    sin, cos = _sin_cos_polys(b, r)
    even = b.icmp_signed("==", b.and_(q, _i(1)), _i(0))
    if want_sin:  # sin(x) = sign(x) (-1)^(q>>1) (q even ? sin r : cos r)
        y = _flip(b, b.select(even, sin, cos), b.xor(b.bitcast(x, I32), b.shl(q, _i(30))))
    else:  # cos(x) = (-1)^((q+1)>>1) (q even ? cos r : sin r)
        y = _flip(b, b.select(even, cos, sin), b.shl(b.add(q, _i(1)), _i(30)))
    b.ret(_nan_at_inf(b, ax, y))
    return f


def build_sin(module):
    return _sincos(module, "ck_sinf", True)


def build_cos(module):
    return _sincos(module, "ck_cosf", False)


def build_tan(module):
    """tan(|x|) = sin r / cos r for even q, -cos r / sin r for odd q; the sign of x copied."""
    f, b = fn(module, "ck_tanf")
    x = f.args[0]
    ax = b.call(intrinsic(module, "fabs"), [x])
    r, q = _reduce(b, module, ax)
    sin, cos = _sin_cos_polys(b, r)
    even = b.icmp_signed("==", b.and_(q, _i(1)), _i(0))
    y = b.select(even, b.fdiv(sin, cos), b.fsub(c(-0.0), b.fdiv(cos, sin)))
    y = _flip(b, y, b.bitcast(x, I32))
    b.ret(_nan_at_inf(b, ax, y))
    return f


ASIN_POLY = (4.2163199048e-2, 2.4181311049e-2, 4.5470025998e-2, 7.4953002686e-2,
             1.6666752422e-1)  # Cephes asinf: asin(u) = u + u z P(z), z = u^2, |u| <= 1/2


def _asin_small(b, u):
    z = b.fmul(u, u)
    return fma(b, b.fmul(poly(b, z, ASIN_POLY), z), u, u)


def _asin_reduction(module, b, x):
    """|x|, whether |x| > 1/2, and sqrt((1 - |x|) / 2): the argument asin and acos take
    above 1/2 (asin(|x|) = pi/2 - 2 asin of it)."""
    ax = b.call(intrinsic(module, "fabs"), [x])
    big = b.fcmp_ordered(">", ax, c(0.5))
    s = b.call(intrinsic(module, "sqrt"), [b.fmul(c(0.5), b.fsub(c(1.0), ax))])
    return ax, big, s


def build_asin(module):
    """|x| <= 1/2: the polynomial; above, pi/2 - 2 asin(sqrt((1 - |x|) / 2)); |x| > 1 gives
    NaN (through the square root of a negative)."""
    f, b = fn(module, "ck_asinf")
    x = f.args[0]
    ax, big, s = _asin_reduction(module, b, x)
    p = _asin_small(b, b.select(big, s, ax))
    far = b.fadd(c(PIO2_HI), b.fsub(c(PIO2_LO), b.fadd(p, p)))
    y = b.select(big, far, p)
    b.ret(b.call(copysign(module), [y, x]))
    return f


def build_acos(module):
    """x > 1/2: 2 asin(sqrt((1 - x) / 2)); x < -1/2: pi - that of -x; else pi/2 - asin(x)."""
    f, b = fn(module, "ck_acosf")
    x = f.args[0]
    _, big, s = _asin_reduction(module, b, x)
    p = _asin_small(b, b.select(big, s, x))
    twice = b.fadd(p, p)
    neg = b.fadd(c(2 * PIO2_HI), b.fsub(c(2 * PIO2_LO), twice))
    mid = b.fadd(c(PIO2_HI), b.fsub(c(PIO2_LO), p))
    y = b.select(big, b.select(b.fcmp_ordered("<", x, c(0.0)), neg, twice), mid)
    b.ret(y)
    return f


def build_atan(module):
    """Cephes atanf: |x| > tan(3pi/8): pi/2 + atan(-1/|x|); > tan(pi/8): pi/4 +
    atan((|x| - 1) / (|x| + 1)); the polynomial on what is left; the sign of x copied."""
    f, b = fn(module, "ck_atanf")
    x = f.args[0]
    ax = b.call(intrinsic(module, "fabs"), [x])
    big = b.fcmp_ordered(">", ax, c(2.414213562373095))
    mid = b.fcmp_ordered(">", ax, c(0.4142135623730950))
    t = b.select(big, b.fdiv(c(-1.0), ax),
                 b.select(mid, b.fdiv(b.fsub(ax, c(1.0)), b.fadd(ax, c(1.0))), ax))
    base = b.select(big, c(math.pi / 2), b.select(mid, c(math.pi / 4), c(0.0)))
    z = b.fmul(t, t)
    p = poly(b, z, (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1))
    y = b.fadd(base, fma(b, b.fmul(p, z), t, t))
    b.ret(b.call(copysign(module), [y, x]))
    return f


def _exp_halves(b, exp, ax):
    """(e^|x|, (e^(|x|/2) / 2) e^(|x|/2)): the second is finite up to |x| = 89.4, where
    e^|x| / 2 still is but e^|x| is not."""
    w = b.call(exp, [b.fmul(ax, c(0.5))])
    return b.call(exp, [ax]), b.fmul(b.fmul(w, c(0.5)), w)


def build_sinh(module, exp):
    """Cephes sinhf: |x| <= 1 an odd polynomial, above (e - 1/e) / 2, above 88 e/2 from two
    halves; the sign of x copied."""
    f, b = fn(module, "ck_sinhf")
    x = f.args[0]
    ax = b.call(intrinsic(module, "fabs"), [x])
    z = b.fmul(ax, ax)
    small = fma(b, b.fmul(poly(b, z, (2.03721912945e-4, 8.33028376239e-3,
                                      1.66667160211e-1)), z), ax, ax)
    e, half_e = _exp_halves(b, exp, ax)
    large = b.fsub(b.fmul(c(0.5), e), b.fdiv(c(0.5), e))
    y = b.select(b.fcmp_ordered(">", ax, c(88.0)), half_e,
                 b.select(b.fcmp_ordered(">", ax, c(1.0)), large, small))
    b.ret(b.call(copysign(module), [y, x]))
    return f


def build_cosh(module, exp):
    """(e + 1/e) / 2, above |x| = 88 e/2 from two halves."""
    f, b = fn(module, "ck_coshf")
    x = f.args[0]
    ax = b.call(intrinsic(module, "fabs"), [x])
    e, half_e = _exp_halves(b, exp, ax)
    y = b.fadd(b.fmul(c(0.5), e), b.fdiv(c(0.5), e))
    b.ret(b.select(b.fcmp_ordered(">", ax, c(88.0)), half_e, y))
    return f


def build_asinh(module, log):
    """Cephes asinhf: |x| < 1/2 an odd polynomial, above log(|x| + sqrt(x^2 + 1)), above 1500
    log(|x|) + ln 2 (x^2 would overflow); the sign of x copied."""
    f, b = fn(module, "ck_asinhf")
    x = f.args[0]
    ax = b.call(intrinsic(module, "fabs"), [x])
    z = b.fmul(ax, ax)
    p = poly(b, z, (2.0122003309e-2, -4.2699340972e-2, 7.4847586088e-2, -1.6666288134e-1))
    small = fma(b, b.fmul(p, z), ax, ax)
    root = b.call(intrinsic(module, "sqrt"), [b.fadd(z, c(1.0))])
    mid = b.call(log, [b.fadd(ax, root)])
    big = b.fadd(b.call(log, [ax]), c(LN2))
    y = b.select(b.fcmp_ordered(">", ax, c(1500.0)), big,
                 b.select(b.fcmp_ordered("<", ax, c(0.5)), small, mid))
    b.ret(b.call(copysign(module), [y, x]))
    return f


def build_acosh(module, log):
    """Cephes acoshf: x - 1 < 1/2 a polynomial times sqrt(x - 1), above
    log(x + sqrt((x - 1)(x + 1))), above 1500 log(x) + ln 2; below 1 NaN."""
    f, b = fn(module, "ck_acoshf")
    x = f.args[0]
    z = b.fsub(x, c(1.0))
    sqrt = intrinsic(module, "sqrt")
    p = poly(b, z, (1.7596881071e-3, -7.5272886713e-3, 2.6454905019e-2, -1.1784741703e-1,
                    1.4142135263))
    small = b.fmul(p, b.call(sqrt, [z]))
    mid = b.call(log, [b.fadd(x, b.call(sqrt, [b.fmul(z, b.fadd(x, c(1.0)))]))])
    big = b.fadd(b.call(log, [x]), c(LN2))
    y = b.select(b.fcmp_ordered(">", x, c(1500.0)), big,
                 b.select(b.fcmp_ordered("<", z, c(0.5)), small, mid))
    b.ret(b.select(b.fcmp_ordered("<", x, c(1.0)), c(math.nan), y))
    return f


def build_atanh(module, log):
    """Cephes atanhf: |x| < 1/2 an odd polynomial, above log((1 + |x|) / (1 - |x|)) / 2
    (inf at 1, NaN above: the log's own special cases); the sign of x copied."""
    f, b = fn(module, "ck_atanhf")
    x = f.args[0]
    ax = b.call(intrinsic(module, "fabs"), [x])
    z = b.fmul(ax, ax)
    p = poly(b, z, (1.81740078349e-1, 8.24370301058e-2, 1.46691431730e-1, 1.99782164500e-1,
                    3.33337300303e-1))
    small = fma(b, b.fmul(p, z), ax, ax)
    big = b.fmul(c(0.5), b.call(log, [b.fdiv(b.fadd(c(1.0), ax), b.fsub(c(1.0), ax))]))
    y = b.select(b.fcmp_ordered("<", ax, c(0.5)), small, big)
    b.ret(b.call(copysign(module), [y, x]))
    return f
