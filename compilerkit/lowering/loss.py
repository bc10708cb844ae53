"""Lowering of the classification losses to Kernel IR: NegativeLogLikelihoodLoss and
SoftmaxCrossEntropyLoss.

Both view the scores as [N, C, D] (D the product of the trailing dims, 1 for [N, C]) and the
targets as [N, D]. Each loss element is -x[n, t, d] * weight[t] (weight 1 without the input),
0 where t == ignore_index. Targets are data: a nest of their own checks each one (in [0, C) or
the ignore_index) at run time, and the loss nest clamps t before reading, so a bad target is a
RunError naming the node, never a wild read. reduction="none" gives the elements (the target's
shape); "sum" their sum; "mean" the sum divided by the sum of the weights of the elements not
ignored (their count without weights), as the ONNX spec and onnxruntime compute it (0 / 0 is
NaN when every element is ignored).

SoftmaxCrossEntropyLoss first takes log_softmax over C (x - max - log(sum exp(x - max)), per
[n, d]), its optional second output, then the same loss.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith
from xdsl.dialects.builtin import i64

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import INDEX, KernelBuilder, is_float, shape
from compilerkit.lowering.indexing import fail
from compilerkit.lowering.matmul import fill
from compilerkit.onnx_passes.single_node import node_label

REDUCTIONS = ("none", "sum", "mean")


def _views(b: KernelBuilder, op, x, target):
    xs, ts = shape(x), shape(target)
    if len(xs) < 2 or ts != (xs[0], *xs[2:]):
        fail(op, "the shapes of the scores and the target", [list(xs), list(ts)],
             "[N, C, d1, ...] and [N, d1, ...]")
    n, c, d = xs[0], xs[1], math.prod(xs[2:])
    return b.view(x, [n, c, d]), b.view(target, [n, d]), n, c, d


def _log_softmax(b: KernelBuilder, xv, n, c, d, elem):
    mx = b.alloc([n, d], elem)
    total = b.alloc([n, d], elem)
    fill(b, mx, -math.inf)
    fill(b, total, 0.0)
    with b.nest([n, c, d]) as (i, k, j):
        b.store(b.binary("max", b.load(mx, [i, j]), b.load(xv, [i, k, j])), mx, [i, j])
    with b.nest([n, c, d]) as (i, k, j):
        e = b.unary("exp", b.binary("sub", b.load(xv, [i, k, j]), b.load(mx, [i, j])))
        b.store(b.add_(b.load(total, [i, j]), e), total, [i, j])
    out = b.alloc([n, c, d], elem)
    with b.nest([n, c, d]) as (i, k, j):
        shifted = b.binary("sub", b.load(xv, [i, k, j]), b.load(mx, [i, j]))
        b.store(b.binary("sub", shifted, b.unary("log", b.load(total, [i, j]))), out, [i, k, j])
    return out


def _loss(b: KernelBuilder, op, logp, tv, weight, n, c, d, elem):
    """The loss of log-probabilities `logp` [N, C, D] at targets `tv` [N, D] (see above)."""
    reduction = onnx_d.get_attr(op, "reduction", "mean")
    if reduction not in REDUCTIONS:
        fail(op, "attribute reduction", repr(reduction), "'none', 'sum' or 'mean'")
    ignore = onnx_d.get_attr(op, "ignore_index", None)
    if weight is not None and shape(weight) != (c,):
        fail(op, "the shape of the weights", list(shape(weight)), f"[{c}] (the classes)")
    kind = onnx_d.op_type(op)
    with b.nest([n, d]) as (i, j):
        t = b.cast(b.load(tv, [i, j]), i64)
        ok = b.and_(b.cmpi("sge", t, b.const(0, i64)), b.cmpi("slt", t, b.const(c, i64)))
        if ignore is not None:
            ok = b.add(arith.OrIOp(ok, b.cmpi("eq", t, b.const(ignore, i64))))
        b.add(krnl.CheckOp(ok, f"node {node_label(op)!r} ({kind}): a target is out of range; "
                               f"valid targets are [0, {c - 1}]" + (
                                   f" or ignore_index {ignore}" if ignore is not None else "")))
    zero, one = b.const(0.0, elem), b.const(1.0, elem)
    out = b.alloc(onnx_d.shape_of(op.results[0]), elem)
    if reduction == "none":
        each = b.view(out, [n, d])
    else:
        sums = b.alloc([2], elem)  # [sum of losses, sum of weights]
        fill(b, sums, 0.0)
    with b.nest([n, d]) as (i, j):
        t = b.cast(b.load(tv, [i, j]), i64)
        tc = b.clamp(b.add(arith.IndexCastOp(t, INDEX)), c)
        w = b.load(weight, [tc]) if weight is not None else one
        v = b.mul(b.neg(b.load(logp, [i, tc, j])), w)
        if ignore is not None:
            skip = b.cmpi("eq", t, b.const(ignore, i64))
            v, w = b.select(skip, zero, v), b.select(skip, zero, w)
        if reduction == "none":
            b.store(v, each, [i, j])
        else:
            at0, at1 = [b.index(0)], [b.index(1)]
            b.store(b.add_(b.load(sums, at0), v), sums, at0)
            b.store(b.add_(b.load(sums, at1), w), sums, at1)
    if reduction != "none":
        with b.nest([]) as _:
            s = b.load(sums, [b.index(0)])
            if reduction == "mean":
                s = b.binary("div", s, b.load(sums, [b.index(1)]))
            b.store(s, out, [])
    return out


def _float_scores(op, x):
    elem = x.type.element_type
    if not is_float(elem):
        raise NotImplementedError(f"{onnx_d.op_type(op)} on {elem} (float scores only)")
    return elem


def lower_nll_loss(b: KernelBuilder, op, ins):
    x, target = ins[:2]
    weight = ins[2] if len(ins) > 2 else None
    elem = _float_scores(op, x)
    xv, tv, n, c, d = _views(b, op, x, target)
    return [_loss(b, op, xv, tv, weight, n, c, d, elem)]


def lower_softmax_cross_entropy(b: KernelBuilder, op, ins):
    x, target = ins[:2]
    weight = ins[2] if len(ins) > 2 else None
    elem = _float_scores(op, x)
    xv, tv, n, c, d = _views(b, op, x, target)
    logp = _log_softmax(b, xv, n, c, d, elem)
    loss = _loss(b, op, logp, tv, weight, n, c, d, elem)
    return [loss, b.view(logp, shape(x))]



