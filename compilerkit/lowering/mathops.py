"""Lowering of ONNX's elementwise math and activation ops to Kernel IR: Erf, Gelu (both
`approximate` modes), Mish, Celu, ThresholdedRelu, Shrink, PRelu (its slope broadcast to the
input), Round and CastLike. Each is one elementwise nest (elementwise._map) around scalar math
built from the math library's functions (codegen/mathlib.py: exp, log, tanh, erf), so every
target computes the same values.

Float inputs only, except PRelu (also int32/int64, as ONNX allows) and CastLike (every type
Cast takes); other dtypes are refused as UnsupportedOpError naming node, op and dtype.
"""

from __future__ import annotations

import math

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
