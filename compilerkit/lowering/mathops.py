"""Lowering of ONNX's elementwise math and activation ops to Kernel IR: Erf, Gelu (both
`approximate` modes), Mish, Celu, ThresholdedRelu, Shrink, PRelu (its slope broadcast to the
input), Round, CastLike and Pow. Each is one elementwise nest (elementwise._map) around scalar
math built from the math library's functions (codegen/mathlib.py: exp, log, tanh, erf, pow),
so every target computes the same values.

Pow (`lower_pow`), as onnxruntime computes it:
- a float base: the library's pow (C99's special cases: negative bases to integer exponents,
  0^0 = 1, infinities, NaN), an integer or f64 exponent taken exactly (the base widened to f64,
  the result rounded back once); a constant one-element exponent 2 or 3 is x * x or x * x * x,
  which is what onnxruntime computes for it;
- an integer base to an integer exponent: exact, by squaring (wrapping as numpy's power);
  a negative exponent is (1 / x)^-y in integers (1, +-1 or 0), so 0 to a negative power is
  the run-time error of an integer division by zero;
- an integer base to a float exponent: pow in f64, truncated to the integer type as
  onnxruntime's cast of std::pow (a result within 2^-40 of an integer is that integer first:
  4^0.5 must not truncate to 1 from 1.9999999999999998).

Float inputs only, except PRelu (also int32/int64, as ONNX allows), CastLike (every type
Cast takes) and Pow; other dtypes are refused as UnsupportedOpError naming node, op and dtype.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects import math as math_d
from xdsl.dialects.builtin import IntegerType, f64, i1

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, is_float
from compilerkit.lowering.elementwise import _map, _softplus, lower_cast


def _gelu(b, op, x):
    t = x.type
    half, one = b.const(0.5, t), b.const(1.0, t)
    if onnx_d.get_attr(op, "approximate", "none") == "tanh":
        # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as the ONNX function body
        inner = b.mul(b.const(math.sqrt(2.0 / math.pi), t),
                      b.add_(x, b.mul(b.const(0.044715, t), b.mul(x, b.mul(x, x)))))
        return b.mul(b.mul(half, x), b.add_(one, b.unary("tanh", inner)))
    e = b.unary("erf", b.mul(x, b.const(1.0 / math.sqrt(2.0), t)))
    return b.mul(b.mul(half, x), b.add_(one, e))


def _celu(b, op, x):
    # max(0, x) + min(0, alpha (exp(x / alpha) - 1))
    t = x.type
    alpha = b.const(onnx_d.get_attr(op, "alpha", 1.0), t)
    zero = b.const(0.0, t)
    neg = b.mul(alpha, b.binary("sub", b.unary("exp", b.binary("div", x, alpha)),
                                b.const(1.0, t)))
    return b.add_(b.binary("max", x, zero), b.binary("min", neg, zero))


def _thresholded_relu(b, op, x):
    alpha = b.const(onnx_d.get_attr(op, "alpha", 1.0), x.type)
    return b.select(b.cmpf("ogt", x, alpha), x, b.const(0.0, x.type))


def _shrink(b, op, x):
    t = x.type
    lambd = onnx_d.get_attr(op, "lambd", 0.5)
    bias = b.const(onnx_d.get_attr(op, "bias", 0.0), t)
    low = b.cmpf("olt", x, b.const(-lambd, t))
    high = b.cmpf("ogt", x, b.const(lambd, t))
    # NaN fails both compares: ONNX's and onnxruntime's answer there is 0.
    return b.select(low, b.add_(x, bias),
                    b.select(high, b.binary("sub", x, bias), b.const(0.0, t)))


# Floats from 2^23 on (f32; 2^52 for f64) are integers already, and x + 0.5 would round there.
_INTEGRAL = {32: 2.0 ** 23, 64: 2.0 ** 52}


def _round(b, op, x):
    # Half to even: r = floor(x + 0.5), one less where x was exactly halfway and r is odd.
    t = x.type
    half, one, two = b.const(0.5, t), b.const(1.0, t), b.const(2.0, t)
    r = b.unary("floor", b.add_(x, half))
    tie = b.cmpf("oeq", b.binary("sub", r, x), half)
    odd = b.cmpf("one", b.binary("sub", r, b.mul(two, b.unary("floor", b.binary(
        "div", r, two)))), b.const(0.0, t))
    r = b.select(b.and_(tie, odd), b.binary("sub", r, one), r)
    # A zero result keeps x's sign (round(-0.3) is -0, as nearbyint): x * 0 has it.
    r = b.select(b.cmpf("oeq", r, b.const(0.0, t)), b.mul(x, b.const(0.0, t)), r)
    # Large, infinite and NaN inputs are their own rounding (the unordered compare keeps NaN).
    big = b.cmpf("uge", b.unary("abs", x), b.const(_INTEGRAL[t.bitwidth], t))
    return b.select(big, x, r)


UNARY = {
    "Erf": lambda b, op, x: b.unary("erf", x),
    "Gelu": _gelu,
    "Mish": lambda b, op, x: b.mul(x, b.unary("tanh", _softplus(b, x, op))),
    "Celu": _celu,
    "ThresholdedRelu": _thresholded_relu,
    "Shrink": _shrink,
    "Round": _round,
}

OPS = (*UNARY, "PRelu", "CastLike")


def _prelu(b, x, slope):
    if is_float(x.type):
        neg = b.cmpf("olt", x, b.const(0.0, x.type))
    else:
        neg = b.cmpi("slt", x, b.const(0, x.type))
    return b.select(neg, b.mul(slope, x), x)


def lower_mathop(b: KernelBuilder, op, ins):
    kind = onnx_d.op_type(op)
    if kind == "CastLike":
        return lower_cast(b, op, ins[:1])
    elem = ins[0].type.element_type
    if not is_float(elem) and not (kind == "PRelu" and elem.bitwidth in (32, 64)):
        raise NotImplementedError(f"{kind} on {elem} is not supported (float inputs only)")
    out = b.alloc(onnx_d.shape_of(op.results[0]), op.results[0].type.element_type)
    if kind == "PRelu":
        _map(b, ins[:2], out, lambda v: _prelu(b, v[0], v[1]))
    else:
        _map(b, ins[:1], out, lambda v: UNARY[kind](b, op, v[0]))
    return [out]


def _pow_float(b, x, y):
    """x^y for a float x: math.powf in x's type when y has it, else in f64 (exact for every
    integer exponent up to 2^53) rounded back to x's type."""
    if y.type == x.type:
        return b.add(math_d.PowFOp(x, y))
    r = b.add(math_d.PowFOp(b.cast(x, f64), b.cast(y, f64)))
    return b.cast(r, x.type)


def _pow_int(b, x, y):
    """x^y for integers, by squaring over the 64 bits of y (a fixed count: branch-free),
    wrapping in x's type."""
    t, e_t = x.type, IntegerType(64)
    e = b.cast(y, e_t)
    one = b.const(1, t)
    neg = b.cmpi("slt", e, b.const(0, e_t))
    # 1 / x is 1, -1 or 0, or (x = 0) the division's run-time check; divided only where y < 0
    base = b.select(neg, b.add(arith.DivSIOp(one, b.select(neg, x, one))), x)
    e = b.select(neg, b.binary("sub", b.const(0, e_t), e), e)
    acc = one
    for k in range(64):
        mask = b.const(-(1 << 63) if k == 63 else 1 << k, e_t)
        bit = b.cmpi("ne", b.and_(e, mask), b.const(0, e_t))
        acc = b.select(bit, b.mul(acc, base), acc)
        if k < 63:
            base = b.mul(base, base)
    return acc


def _pow_int_by_float(b, x, y):
    """int x to a float y: std::pow in f64, snapped to an integer within 2^-40, truncated."""
    r = b.add(math_d.PowFOp(b.cast(x, f64), b.cast(y, f64)))
    near = b.unary("floor", b.add_(r, b.const(0.5, f64)))
    gap = b.unary("abs", b.binary("sub", r, near))
    scale = b.binary("max", b.unary("abs", r), b.const(1.0, f64))
    snap = b.cmpf("ole", gap, b.mul(scale, b.const(2.0 ** -40, f64)))
    return b.cast(b.select(snap, near, r), x.type)


def _small_constant_exponent(op, module):
    """2 or 3 where the exponent is a one-element constant holding it, else None."""
    v = onnx_d.constant_value(op.operands[1], module)
    if v is None or v.size != 1:
        return None
    v = float(np.asarray(v).reshape(-1)[0])
    return int(v) if v in (2.0, 3.0) else None


def lower_pow(b: KernelBuilder, op, ins, module=None):
    x, y = ins[:2]
    ex, ey = x.type.element_type, y.type.element_type
    if ex == i1 or ey == i1:
        raise NotImplementedError(f"Pow on {ex} ^ {ey}: ONNX defines it on numbers")
    out = b.alloc(onnx_d.shape_of(op.results[0]), op.results[0].type.element_type)
    if is_float(ex):
        k = _small_constant_exponent(op, module) if module is not None else None
        if k is not None:
            def scalar(v):
                sq = b.mul(v[0], v[0])
                return sq if k == 2 else b.mul(sq, v[0])
            _map(b, ins[:1], out, scalar)
            return [out]
        _map(b, ins[:2], out, lambda v: _pow_float(b, v[0], v[1]))
    elif is_float(ey):
        _map(b, ins[:2], out, lambda v: _pow_int_by_float(b, v[0], v[1]))
    else:
        _map(b, ins[:2], out, lambda v: _pow_int(b, v[0], v[1]))
    return [out]
