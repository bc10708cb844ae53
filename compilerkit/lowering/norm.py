"""Lowering of Softmax / LogSoftmax, LRN and (non-constant) BatchNormalization to Kernel IR.

Softmax works on a [outer, D, inner] view: opset < 13 flattens the input to 2-D at `axis`
(default 1), opset >= 13 normalises along the one axis (default -1). Max is subtracted before
exp, so large logits do not overflow. When the axis is the last one (inner = 1: attention's
scores, a classifier's logits) each row is one nest, so the row stays in cache between its
passes, and the row's max and sum are taken in ROW_PARTIALS running partials, one per
position modulo that count, combined at the end of the row: a single running sum is a chain
of dependent adds that LLVM may not reorder (no fast-math), so that loop, its exp included,
ran one element at a time (9x onnxruntime's time on 4 x 128 x 128 attention scores). The
max is exact in any order; the sum is the same terms added in another order (as
onnxruntime's vectorised kernel does too). LRN first stores the window sums of squares, then
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
    width = ROW_PARTIALS
    if inner == 1 and b.lanes > 1 and d >= width:
        _softmax_rows(b, b.view(x, [outer, d]), b.view(out, [outer, d]), log, width)
        return [out]
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
            v = b.binary("mul", b.load(ov, [o, k, i]), _reciprocal(b, b.load(total, [o, i])))
        b.store(v, ov, [o, k, i])
    return [out]


def _reciprocal(b: KernelBuilder, total):
    """1 / total, which the normalising loop multiplies by: the same in every iteration, so
    LLVM computes it once per row. A divide per element (vdivps) cost 4 x 10 cycles of a
    64-wide row's 210 on AVX-512; onnxruntime (MLAS) scales by the reciprocal too. Within
    1 ulp of the quotient."""
    return b.binary("div", b.const(1.0, total.type), total)


# Partials per row (over_row): a fixed count, not the target's lanes, so every target with
# vectors (AVX2, AVX-512, the 4-lane emulated ones) adds the same terms in the same order and
# gets the same bits; 16 is two AVX2 vectors (two independent add chains), one AVX-512 vector.
# The GPU (1 lane) keeps the plain nests, which its thread mapping takes.
ROW_PARTIALS = 16


def over_row(b: KernelBuilder, d: int, width: int, body):
    """body(column, lane) for every column of a row of d: whole strips of `width`, then the
    tail, column c on lane c % width. Rows of per-lane partials (`width` running sums or
    maxima, indexed by lane) make a row's reduction vector code: the module docstring."""
    full, tail = divmod(d, width)
    with b.nest([full, width]) as (c, lane):
        body(b.affine([(c, width), (lane, 1)]), lane)
    if tail:
        with b.nest([tail]) as (t,):
            body(b.affine([(t, 1)], full * width), t)


def combine_lanes(b: KernelBuilder, buf, spare, o, kind: str, width: int):
    """The buffer (buf or spare, both [rows, width]) whose [o, 0] is the `kind` (add, max)
    of buf[o, :]: halving steps (lane l takes lanes l and l + half), each reading one
    buffer and writing the other, so every nest stores contiguously and reads nothing it
    writes (a vector step each, and what the loopnest code generator takes)."""
    src, dst, half = buf, spare, width // 2
    while half:
        with b.nest([half]) as (lane,):
            far = b.load(src, [o, b.affine([(lane, 1)], half)])
            b.store(b.binary(kind, b.load(src, [o, lane]), far), dst, [o, lane])
        src, dst, half = dst, src, half // 2
    return src


def _softmax_rows(b: KernelBuilder, x, out, log: bool, width: int):
    """(Log)Softmax of each row of x [outer, d] into out, one nest per row, the max and the
    sum in `width` partials per row (the module docstring says why). The partials are
    buffers indexed by the row, so rows stay independent (the row loop may run in
    parallel)."""
    outer, d = shape(x)
    elem = x.type.element_type
    # per-lane partials of the max and the sum, and a second buffer for each one's halving
    mx, total, mx2, total2 = (b.alloc([outer, width], elem) for _ in range(4))
    with b.nest([outer]) as (o,):
        zero = b.index(0)
        with b.nest([width]) as (lane,):
            b.store(b.const(-math.inf, elem), mx, [o, lane])
            b.store(b.const(0.0, elem), total, [o, lane])

        def row_max(j, lane):
            b.store(b.binary("max", b.load(mx, [o, lane]), b.load(x, [o, j])), mx, [o, lane])

        over_row(b, d, width, row_max)
        top = combine_lanes(b, mx, mx2, o, "max", width)

        def row_exp(j, lane):
            e = b.unary("exp", b.binary("sub", b.load(x, [o, j]), b.load(top, [o, zero])))
            if not log:
                b.store(e, out, [o, j])
            b.store(b.add_(b.load(total, [o, lane]), e), total, [o, lane])

        over_row(b, d, width, row_exp)
        den = combine_lanes(b, total, total2, o, "add", width)
        with b.nest([d]) as (k,):
            if log:
                shifted = b.binary("sub", b.load(x, [o, k]), b.load(top, [o, zero]))
                v = b.binary("sub", shifted, b.unary("log", b.load(den, [o, zero])))
            else:
                v = b.binary("mul", b.load(out, [o, k]), _reciprocal(b, b.load(den, [o, zero])))
            b.store(v, out, [o, k])


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
