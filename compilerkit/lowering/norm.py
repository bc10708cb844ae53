"""Lowering of Softmax / LogSoftmax, LRN and (non-constant) BatchNormalization to Kernel IR.

Softmax works on a [outer, D, inner] view: opset < 13 flattens the input to 2-D at `axis`
(default 1), opset >= 13 normalises along the one axis (default -1). Max is subtracted before
exp, so large logits do not overflow. LRN first stores the window sums of squares, then
x / (bias + alpha/size * sum)^beta with the power as exp(beta * log(.)).
"""

from __future__ import annotations

import math

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, shape
from compilerkit.lowering.matmul import fill


def lower_softmax(b: KernelBuilder, op, ins, opset=13):
    x = ins[0]
    xs = shape(x)
    rank = len(xs)
    log = onnx_d.op_type(op) == "LogSoftmax"
    axis = onnx_d.get_attr(op, "axis", 1 if opset < 13 else -1)
    axis = axis + rank if axis < 0 else axis
    outer = math.prod(xs[:axis])
    if opset < 13:
        d, inner = math.prod(xs[axis:]), 1
    else:
        d, inner = xs[axis], math.prod(xs[axis + 1:])
    elem = x.type.element_type
    out = b.alloc(xs, elem)
    xv = b.view(x, [outer, d, inner])
    ov = b.view(out, [outer, d, inner])
    mx = b.alloc([outer, inner], elem)
    total = b.alloc([outer, inner], elem)
    fill(b, mx, -math.inf)
    fill(b, total, 0.0)
    with b.nest([outer, d, inner]) as (o, k, i):
        b.store(b.binary("max", b.load(mx, [o, i]), b.load(xv, [o, k, i])), mx, [o, i])
    with b.nest([outer, d, inner]) as (o, k, i):
        e = b.unary("exp", b.binary("sub", b.load(xv, [o, k, i]), b.load(mx, [o, i])))
        b.store(e, ov, [o, k, i])
        b.store(b.add_(b.load(total, [o, i]), e), total, [o, i])
    with b.nest([outer, d, inner]) as (o, k, i):
        if log:
            shifted = b.binary("sub", b.load(xv, [o, k, i]), b.load(mx, [o, i]))
            v = b.binary("sub", shifted, b.unary("log", b.load(total, [o, i])))
        else:
            v = b.binary("div", b.load(ov, [o, k, i]), b.load(total, [o, i]))
        b.store(v, ov, [o, k, i])
    return [out]


def lower_lrn(b: KernelBuilder, op, ins):
    x = ins[0]
    xs = shape(x)
    size = onnx_d.get_attr(op, "size")
    alpha = onnx_d.get_attr(op, "alpha", 1e-4)
    beta = onnx_d.get_attr(op, "beta", 0.75)
    bias = onnx_d.get_attr(op, "bias", 1.0)
    elem = x.type.element_type
    out = b.alloc(xs, elem)
    fill(b, out, 0.0)
    lo = (size - 1) // 2
    with b.nest(list(xs) + [size]) as ivs:
        pos, k = ivs[:-1], ivs[-1]
        c = b.affine([(pos[1], 1), (k, 1)], -lo)
        v = b.guarded_load(x, [pos[0], c] + pos[2:], 0.0)
        b.store(b.add_(b.load(out, pos), b.mul(v, v)), out, pos)
    with b.nest(xs) as ivs:
        s = b.add_(b.const(bias, elem), b.mul(b.const(alpha / size, elem), b.load(out, ivs)))
        p = b.unary("exp", b.mul(b.const(beta, elem), b.unary("log", s)))
        b.store(b.binary("div", b.load(x, ivs), p), out, ivs)
    return [out]


def lower_batchnorm(b: KernelBuilder, op, ins):
    x, scale, bias, mean, var = ins[:5]
    eps = onnx_d.get_attr(op, "epsilon", 1e-5)
    xs = shape(x)
    elem = x.type.element_type
    out = b.alloc(xs, elem)
    with b.nest(xs) as ivs:
        c = [ivs[1]]
        denom = b.unary("sqrt", b.add_(b.load(var, c), b.const(eps, elem)))
        norm = b.binary("div", b.binary("sub", b.load(x, ivs), b.load(mean, c)), denom)
        b.store(b.add_(b.mul(norm, b.load(scale, c)), b.load(bias, c)), out, ivs)
    return [out]
