"""Lowering of TopK to Kernel IR: the k largest (or smallest) elements along an axis, with their
indices, k a compile-time constant.

Each element's rank in its slice is counted: how many elements come before it in the order
TopK sorts by (larger first, or smaller first with largest=0; equal values by lower index
first, as the ONNX spec asks). The order is strict and total, so the ranks of a slice are a
permutation of 0..n-1: every element is stored at its rank in a scratch slice, and the first k
are copied out. NaN counts as larger than every number (and NaNs as equal among themselves),
as in ONNX's reference implementation (numpy's lexsort puts NaN last); -0 and +0 are equal.
The counting is n * n compares per slice: meant for the axis lengths of detection heads and
classifiers, not for sorting millions. sorted=0 leaves the order unspecified; it is sorted.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerType, Signedness, i1, i64

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import INDEX, KernelBuilder, is_float, shape
from compilerkit.lowering.indexing import fail
from compilerkit.lowering.matmul import fill


def check_signless(op, elem):
    """Refuse unsigned integer elements: their order is not the signed compare's."""
    if isinstance(elem, IntegerType) and elem.signedness.data != Signedness.SIGNLESS:
        raise NotImplementedError(f"{onnx_d.op_type(op)} on unsigned {elem} is not supported")


def _greater(b: KernelBuilder, a, c):
    """i1: a sorts above c (NaN above every number)."""
    if not is_float(a.type):
        return b.cmpi("sgt", a, c)
    nan_over = b.and_(b.cmpf("uno", a, a), b.cmpf("ord", c, c))
    return b.add(arith.OrIOp(b.cmpf("ogt", a, c), nan_over))


def _equal(b: KernelBuilder, a, c):
    if not is_float(a.type):
        return b.cmpi("eq", a, c)
    both_nan = b.and_(b.cmpf("uno", a, a), b.cmpf("uno", c, c))
    return b.add(arith.OrIOp(b.cmpf("oeq", a, c), both_nan))


def lower_topk(b: KernelBuilder, op, ins, module=None):
    x = ins[0]
    xs = shape(x)
    rank = len(xs)
    elem = x.type.element_type
    check_signless(op, elem)
    if elem == i1:
        raise NotImplementedError("TopK on bool is not supported")
    axis = onnx_d.get_attr(op, "axis", -1)
    if not -rank <= axis < rank:
        fail(op, "attribute axis", axis, f"a value in [{-rank}, {rank - 1}]")
    axis = axis + rank if axis < 0 else axis
    k_value = onnx_d.constant_value(op.operands[1], module) if len(op.operands) > 1 else None
    if k_value is None:
        k_value = onnx_d.get_attr(op, "k", None)  # opset 1 had k as an attribute
        if k_value is None or len(op.operands) > 1:
            raise NotImplementedError("TopK with a k computed at run time (k must be a "
                                      "constant)")
    k = int(k_value.reshape(-1)[0]) if hasattr(k_value, "reshape") else int(k_value)
    n = xs[axis]
    if not 0 <= k <= n:
        fail(op, "k", k, f"a value in [0, {n}] (the length of axis {axis})")
    largest = onnx_d.get_attr(op, "largest", 1)
    outer, inner = math.prod(xs[:axis]), math.prod(xs[axis + 1:])
    out_dims = onnx_d.shape_of(op.results[0])
    values = b.alloc(out_dims, elem)
    indices = b.alloc(out_dims, i64)
    if k == 0 or outer * inner == 0:
        return [values, indices]
    xv = b.view(x, [outer, n, inner])
    ranks = b.alloc([outer, n, inner], i64)
    fill(b, ranks, 0)
    with b.nest([outer, n, n, inner]) as (o, j, i, t):
        # Does element i come before element j?
        xi, xj = b.load(xv, [o, i, t]), b.load(xv, [o, j, t])
        above = _greater(b, xi, xj) if largest else _greater(b, xj, xi)
        first = b.and_(_equal(b, xi, xj), b.cmpi("slt", i, j))
        before = b.add(arith.OrIOp(above, first))
        count = b.load(ranks, [o, j, t])
        b.store(b.add_(count, b.cast(before, i64)), ranks, [o, j, t])
    sorted_x = b.alloc([outer, n, inner], elem)
    sorted_i = b.alloc([outer, n, inner], i64)
    with b.nest([outer, n, inner]) as (o, j, t):
        at = b.clamp(b.add(arith.IndexCastOp(b.load(ranks, [o, j, t]), INDEX)), n)
        b.store(b.load(xv, [o, j, t]), sorted_x, [o, at, t])
        b.store(b.cast(j, i64), sorted_i, [o, at, t])
    vv, iv = b.view(values, [outer, k, inner]), b.view(indices, [outer, k, inner])
    with b.nest([outer, k, inner]) as (o, r, t):
        b.store(b.load(sorted_x, [o, r, t]), vv, [o, r, t])
        b.store(b.load(sorted_i, [o, r, t]), iv, [o, r, t])
    return [values, indices]
