"""Lowering of ONNX's comparison, logic, selection and integer ops to Kernel IR: Equal, Less,
Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor, Where, IsNaN, IsInf, Sign, Mod and the
Bitwise ops. Each is one elementwise nest (elementwise._map: numpy broadcasting, short trailing
dims merged) around a scalar function of the loaded inputs.

Semantics follow onnxruntime, which is what the tests compare with:
- float comparisons are ordered (NaN compares false, so Equal(NaN, NaN) is false), -0 == +0;
- Sign keeps NaN and gives +0 for -0;
- Mod on integers: fmod=0 takes the divisor's sign (Python's %), fmod=1 the dividend's (C's %);
  a zero divisor is a RunError, as for Div (codegen's guarded remainder). x % -1 is 0 (the
  divisor -1 is replaced by 1 here, so INT_MIN % -1 never reaches the overflowing division).
- BitShift (signed types, opset 28): the right shift is arithmetic; a shift amount that is
  negative or at least the width gives what the sign extension alone gives (0, or -1 for a
  right shift of a negative x), so LLVM's shift never sees an amount it leaves undefined.
- float Mod is exact (_float_mod: integer arithmetic on the mantissas): fmod=1 C's fmod,
  fmod=0 numpy's mod (ONNX's reference; onnxruntime refuses float Mod with fmod=0).
Not (lower_not, x == false) is registered apart from OPS: its own ONNX node tests are opset 1,
run once old opsets are upgraded on import; the expanded Attention cases use it too. ONNX's
unsigned BitShift is refused with the unsigned types.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects import math as math_d
from xdsl.dialects.builtin import IntegerType, f64, i1

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, is_float
from compilerkit.lowering.elementwise import _map

# ONNX comparison -> (ordered float predicate, signed integer predicate)
COMPARE = {"Equal": ("oeq", "eq"), "Less": ("olt", "slt"), "Greater": ("ogt", "sgt"),
           "LessOrEqual": ("ole", "sle"), "GreaterOrEqual": ("oge", "sge")}


def _ori(b, x, y):
    return b.add(arith.OrIOp(x, y))


def _xori(b, x, y):
    if x.type == i1:
        return b.cmpi("ne", x, y)
    return b.add(arith.XOrIOp(x, y))


def _compare(b, op, x, y):
    fp, ip = COMPARE[onnx_d.op_type(op)]
    if is_float(x.type):
        return b.cmpf(fp, x, y)
    return b.cmpi(ip, x, y)


def _sign(b, op, x):
    t = x.type
    zero, one, minus = b.const(0, t), b.const(1, t), b.const(-1, t)
    if is_float(t):
        rest = b.select(b.cmpf("uno", x, x), x, zero)  # NaN stays NaN; -0 and +0 give +0
        return b.select(b.cmpf("ogt", x, zero), one, b.select(b.cmpf("olt", x, zero), minus,
                                                                rest))
    return b.select(b.cmpi("sgt", x, zero), one, b.select(b.cmpi("slt", x, zero), minus, zero))


def _is_inf(b, op, x):
    pos = onnx_d.get_attr(op, "detect_positive", 1)
    neg = onnx_d.get_attr(op, "detect_negative", 1)
    hits = [b.cmpf("oeq", x, b.const(v, x.type))
            for v, on in ((float("inf"), pos), (float("-inf"), neg)) if on]
    if not hits:
        return b.const(0, i1)
    return hits[0] if len(hits) == 1 else _ori(b, *hits)


def _bitshift(b, op, x, y):
    t = x.type
    width = t.width.data
    left = onnx_d.get_attr(op, "direction", "") == "LEFT"
    fits = b.and_(b.cmpi("sge", y, b.const(0, t)), b.cmpi("slt", y, b.const(width, t)))
    if left:
        shifted = b.add(arith.ShLIOp(x, b.select(fits, y, b.const(0, t))))
        return b.select(fits, shifted, b.const(0, t))
    # Shifting by width - 1 is the sign extension alone: 0 or -1.
    return b.add(arith.ShRSIOp(x, b.select(fits, y, b.const(width - 1, t))))


# Per float width: (mantissa bits, exponent mask, exponent bias + mantissa bits, bits of the
# largest exponent difference).
_FLOAT_LAYOUT = {32: (23, 0xFF, 150, 8), 64: (52, 0x7FF, 1075, 11)}


def _pow2_f64(b, e):
    """2^e as an f64 for an i64 e in [-1022, 1023]: the biased exponent shifted into place."""
    i64 = IntegerType(64)
    bits = b.add(arith.ShLIOp(b.binary("add", e, b.const(1023, i64)), b.const(52, i64)))
    return b.add(arith.BitcastOp(bits, f64))


def _mulmod(b, u, v, m):
    """u v mod m for i64 u, v in [0, m), m < 2^53: q estimates u v / m in f64 (within 3 of
    the quotient), u v - q m is computed wrapping in i64 (exact: the true value is small), then
    moved into [0, m) by up to three additions or subtractions of m."""
    i64 = IntegerType(64)
    uf, vf, mf = (b.cast(w, f64) for w in (u, v, m))
    q = b.cast(b.unary("floor", b.binary("div", b.mul(uf, vf), mf)), i64)
    r = b.binary("sub", b.mul(u, v), b.mul(q, m))
    zero = b.const(0, i64)
    for _ in range(3):
        r = b.select(b.cmpi("slt", r, zero), b.binary("add", r, m), r)
        r = b.select(b.cmpi("sge", r, m), b.binary("sub", r, m), r)
    return r


def _float_mod(b, op, x, y):
    """Float Mod, exact: |x| = mx 2^ex, |y| = my 2^ey (integer mantissas), so
    |x| mod |y| = ((mx mod my) (2^(ex - ey) mod my) mod my) 2^ey, the power of two by
    square-and-multiply over the bits of ex - ey, in i64 (f32: every product is below 2^48;
    f64: `_mulmod`). fmod=1 is C's fmod (the sign of x); fmod=0 numpy's mod (a non-zero
    remainder whose sign differs from y's moves by y, rounded; a zero one takes y's sign)."""
    i64, t = IntegerType(64), x.type
    frac_bits, exp_mask, shift, d_bits = _FLOAT_LAYOUT[t.bitwidth]

    def parts(v):  # (integer mantissa, effective biased exponent) of |v|, as i64
        bits = b.cast(b.add(arith.BitcastOp(v, IntegerType(t.bitwidth))), i64)
        e = b.and_(b.add(arith.ShRSIOp(bits, b.const(frac_bits, i64))), b.const(exp_mask, i64))
        frac = b.and_(bits, b.const((1 << frac_bits) - 1, i64))
        normal = b.cmpi("sgt", e, b.const(0, i64))
        m = b.select(normal, _ori(b, frac, b.const(1 << frac_bits, i64)), frac)
        return m, b.binary("max", e, b.const(1, i64))

    mx, ex = parts(x)
    my, ey = parts(y)
    my1 = b.select(b.cmpi("eq", my, b.const(0, i64)), b.const(1, i64), my)  # y = 0: NaN below

    def rem(v):
        return b.add(arith.RemSIOp(v, my1))

    def mulmod(u, v):  # u v mod my, for u, v in [0, my)
        return rem(b.mul(u, v)) if t.bitwidth == 32 else _mulmod(b, u, v, my1)

    d = b.binary("sub", ex, ey)
    d0 = b.binary("max", d, b.const(0, i64))
    power, base = rem(b.const(1, i64)), rem(b.const(2, i64))
    for k in range(d_bits):
        bit = b.cmpi("ne", b.and_(d0, b.const(1 << k, i64)), b.const(0, i64))
        power = b.select(bit, mulmod(power, base), power)
        if k < d_bits - 1:
            base = mulmod(base, base)
    r = mulmod(rem(mx), power)
    # r 2^(ey - shift), in f64 by two normal powers of two (exact: the remainder is a float of
    # x's type, maybe subnormal), then x's type.
    e = b.binary("sub", ey, b.const(shift, i64))
    half = b.add(arith.ShRSIOp(e, b.const(1, i64)))
    r = b.mul(b.mul(b.cast(r, f64), _pow2_f64(b, half)), _pow2_f64(b, b.binary("sub", e, half)))
    r = b.cast(r, t)
    ax, ay = b.unary("abs", x), b.unary("abs", y)
    r = b.select(b.cmpi("slt", d, b.const(0, i64)), ax, r)
    r = b.select(b.cmpf("olt", ax, ay), ax, r)
    r = b.add(math_d.CopySignOp(r, x))
    # NaN for a NaN, an infinite x or a zero y; x itself for an infinite y.
    bad = _ori(b, _ori(b, b.cmpf("uno", x, y), b.cmpf("oeq", ax, b.const(float("inf"), t))),
               b.cmpf("oeq", ay, b.const(0.0, t)))
    r = b.select(bad, b.const(float("nan"), t), r)
    if onnx_d.get_attr(op, "fmod", 0):
        return r
    zero = b.const(0.0, t)
    moved = b.and_(b.cmpf("one", r, zero),
                   b.cmpi("ne", b.cmpf("olt", r, zero), b.cmpf("olt", y, zero)))
    r = b.select(moved, b.add_(r, y), r)
    return b.select(b.cmpf("oeq", r, zero), b.add(math_d.CopySignOp(zero, y)), r)


def _mod(b, op, x, y):
    t = x.type
    if is_float(t):
        return _float_mod(b, op, x, y)
    zero, one = b.const(0, t), b.const(1, t)
    # x % -1 is 0: dividing by 1 instead gives it and keeps INT_MIN / -1 out of the remainder.
    y1 = b.select(b.cmpi("eq", y, b.const(-1, t)), one, y)
    r = b.add(arith.RemSIOp(x, y1))
    if onnx_d.get_attr(op, "fmod", 0):
        return r
    # Python's %: a non-zero remainder whose sign differs from the divisor's moves by y.
    differ = b.cmpi("ne", b.cmpi("slt", r, zero), b.cmpi("slt", y, zero))
    fix = b.and_(b.cmpi("ne", r, zero), differ)
    return b.select(fix, b.binary("add", r, y), r)


UNARY = {
    "IsNaN": lambda b, op, x: b.cmpf("uno", x, x),
    "IsInf": _is_inf,
    "Sign": _sign,
    "BitwiseNot": lambda b, op, x: b.binary("sub", b.const(-1, x.type), x),
}

BINARY = {
    **{name: _compare for name in COMPARE},
    "And": lambda b, op, x, y: b.and_(x, y),
    "Or": lambda b, op, x, y: _ori(b, x, y),
    "Xor": lambda b, op, x, y: _xori(b, x, y),
    "BitwiseAnd": lambda b, op, x, y: b.and_(x, y),
    "BitwiseOr": lambda b, op, x, y: _ori(b, x, y),
    "BitwiseXor": lambda b, op, x, y: _xori(b, x, y),
    "Mod": _mod,
    "BitShift": _bitshift,
}

OPS = (*UNARY, *BINARY, "Where")


def _refuse(op, what: str):
    # lower_to_krnl turns NotImplementedError into UnsupportedOpError naming node and op.
    raise NotImplementedError(what)


def _check(op, ins):
    kind = onnx_d.op_type(op)
    elem = ins[0].type.element_type
    if kind in ("IsNaN", "IsInf") and not is_float(elem):
        _refuse(op, f"{kind} on {elem}: ONNX defines it on floating-point inputs")
    if kind.startswith("Bit") and (is_float(elem) or elem == i1):
        _refuse(op, f"{kind} on {elem}: ONNX defines it on integer inputs")
    if kind == "Sign" and elem == i1:
        _refuse(op, "Sign on bool: ONNX defines it on numeric inputs")


def lower_logic(b: KernelBuilder, op, ins):
    """out = f(inputs) elementwise, f from UNARY / BINARY, or Where's select."""
    _check(op, ins)
    kind = onnx_d.op_type(op)
    out = b.alloc(onnx_d.shape_of(op.results[0]), op.results[0].type.element_type)
    if kind == "Where":
        scalar = lambda v: b.select(v[0], v[1], v[2])  # noqa: E731
        _map(b, ins[:3], out, scalar)
    elif kind in UNARY:
        _map(b, ins[:1], out, lambda v: UNARY[kind](b, op, v[0]))
    else:
        _map(b, ins[:2], out, lambda v: BINARY[kind](b, op, v[0], v[1]))
    return [out]


def lower_not(b: KernelBuilder, op, ins):
    """Not: x == false, one elementwise nest (ONNX defines it on bool only)."""
    out = b.alloc(onnx_d.shape_of(op.results[0]), i1)
    _map(b, ins[:1], out, lambda v: b.cmpi("eq", v[0], b.const(0, i1)))
    return [out]
