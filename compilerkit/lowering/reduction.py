"""Lowering of ReduceSum / ReduceMean / ReduceMax / ReduceMin / ReduceProd, ReduceL1 / L2 /
SumSquare / LogSum / LogSumExp, ArgMax / ArgMin, CumSum and Hardmax to Kernel IR.

Axes come from the `axes` attribute (older opsets) or a constant second input (ReduceSum from
13, the others from 18); no axes means all (unless noop_with_empty_axes). The output starts at
the reduction's identity and one krnl.iterate over the input accumulates into it; Mean divides
at the end. The L1/L2/SumSquare/LogSum family is a sum of a function of each element (|x|,
x^2) with a function of the sum after it (sqrt, log); LogSumExp subtracts the max first (a pass
of its own), so exp never overflows: log(sum exp(x - m)) + m, with m = 0 where the max is
infinite (an all -inf or a +inf slice), which gives -inf and +inf as the plain formula does.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith
from xdsl.dialects.builtin import i64

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, is_float, shape
from compilerkit.lowering.matmul import fill

_KIND = {"ReduceSum": ("add", 0.0), "ReduceL1": ("add", 0.0), "ReduceL2": ("add", 0.0),
         "ReduceSumSquare": ("add", 0.0), "ReduceLogSum": ("add", 0.0),
         "ReduceLogSumExp": ("add", 0.0), "ReduceMean": ("add", 0.0),
         "ReduceMax": ("max", -math.inf), "ReduceMin": ("min", math.inf),
         "ReduceProd": ("mul", 1.0)}


OPS = tuple(_KIND)


def reduce_axes(op, module, rank):
    axes = onnx_d.get_attr(op, "axes", None)
    if axes is None and len(op.operands) > 1 and not onnx_d.is_absent(op.operands[1]):
        value = onnx_d.constant_value(op.operands[1], module)
        if value is None:
            raise NotImplementedError(f"{onnx_d.op_type(op)} with non-constant axes")
        axes = [int(a) for a in value.reshape(-1)]
    if not axes:
        if onnx_d.get_attr(op, "noop_with_empty_axes", 0):
            return []
        return list(range(rank))
    # A repeated axis (0 and -2 on rank 2) is reduced once, as onnxruntime does.
    return sorted({a + rank if a < 0 else a for a in axes})


def _int_identity(init, elem):
    """The float identity (+-inf for min/max) as the integer type's extreme; bool is 0/1."""
    width = elem.width.data
    if not math.isinf(init):
        return int(init)
    if width == 1:
        return 1 if init > 0 else 0
    return 2 ** (width - 1) - 1 if init > 0 else -(2 ** (width - 1))


def _abs(b, v):
    if is_float(v.type):
        return b.unary("abs", v)
    return b.select(b.cmpi("slt", v, b.const(0, v.type)), b.binary("sub", b.const(0, v.type), v),
                    v)


# Applied to each element before summing, and to each sum after.
_BEFORE = {"ReduceL1": _abs, "ReduceL2": lambda b, v: b.mul(v, v),
           "ReduceSumSquare": lambda b, v: b.mul(v, v)}
_AFTER = {"ReduceL2": lambda b, v: b.unary("sqrt", v), "ReduceLogSum": lambda b, v: b.unary(
    "log", v)}
_FLOAT_ONLY = ("ReduceL2", "ReduceLogSum", "ReduceLogSumExp")


def _destination(b, ivs, axes, keep):
    if keep:
        zero = b.index(0)
        return [zero if k in axes else iv for k, iv in enumerate(ivs)]
    return [iv for k, iv in enumerate(ivs) if k not in axes]


def _accumulate(b, x, out, axes, keep, kind, before=None):
    with b.nest(shape(x)) as ivs:
        dst = _destination(b, ivs, axes, keep)
        acc, v = b.load(out, dst), b.load(x, ivs)
        b.store(b.binary(kind, acc, before(v) if before else v), out, dst)


def lower_reduce(b: KernelBuilder, op, ins, module=None):
    name = onnx_d.op_type(op)
    kind, init = _KIND[name]
    x = ins[0]
    xs = shape(x)
    axes = reduce_axes(op, module, len(xs))
    keep = onnx_d.get_attr(op, "keepdims", 1)
    elem = op.results[0].type.element_type
    if name in _FLOAT_ONLY and not is_float(elem):
        raise NotImplementedError(f"{name} on {elem} is not supported (float inputs only)")
    out_dims = onnx_d.shape_of(op.results[0])
    out = b.alloc(out_dims, elem)
    fill(b, out, init if elem.__class__.__name__.startswith("Float") else _int_identity(init, elem))
    shift = None
    if name == "ReduceLogSumExp":
        shift = b.alloc(out_dims, elem)
        fill(b, shift, -math.inf)
        _accumulate(b, x, shift, axes, keep, "max")
        with b.nest(out_dims) as ivs:  # an infinite max (or none) shifts by 0
            m = b.load(shift, ivs)
            inf = b.cmpf("oeq", b.unary("abs", m), b.const(math.inf, elem))
            b.store(b.select(inf, b.const(0.0, elem), m), shift, ivs)
        with b.nest(xs) as ivs:
            dst = _destination(b, ivs, axes, keep)
            e = b.unary("exp", b.binary("sub", b.load(x, ivs), b.load(shift, dst)))
            b.store(b.add_(b.load(out, dst), e), out, dst)
    else:
        before = _BEFORE.get(name)
        _accumulate(b, x, out, axes, keep, kind, before and (lambda v: before(b, v)))
    if name == "ReduceMean":
        n = math.prod(xs[a] for a in axes)
        with b.nest(out_dims) as ivs:
            b.store(b.binary("div", b.load(out, ivs), b.const(float(n), elem)), out, ivs)
    elif name in _AFTER:
        with b.nest(out_dims) as ivs:
            b.store(_AFTER[name](b, b.load(out, ivs)), out, ivs)
    elif shift is not None:
        with b.nest(out_dims) as ivs:
            v = b.add_(b.unary("log", b.load(out, ivs)), b.load(shift, ivs))
            b.store(v, out, ivs)
    return [out]


def lower_arg_extreme(b: KernelBuilder, op, ins):
    """ArgMax / ArgMin along `axis`: one pass keeping the best value and its index per output
    element. As onnxruntime: the first element starts as the best and a later one replaces it
    only where an ordered compare says it is strictly better (or as good, with
    select_last_index), so NaN is never chosen after the first position and a leading NaN
    stays."""
    name = onnx_d.op_type(op)
    x = ins[0]
    xs = shape(x)
    axis = onnx_d.get_attr(op, "axis", 0)
    axis = axis + len(xs) if axis < 0 else axis
    keep = onnx_d.get_attr(op, "keepdims", 1)
    last = onnx_d.get_attr(op, "select_last_index", 0)
    elem = x.type.element_type
    out_dims = onnx_d.shape_of(op.results[0])
    out = b.alloc(out_dims, op.results[0].type.element_type)
    best = b.alloc(out_dims, elem)
    pred = ("g" if name == "ArgMax" else "l") + ("e" if last else "t")
    with b.nest(xs) as ivs:
        dst = _destination(b, ivs, [axis], keep)
        v, old = b.load(x, ivs), b.load(best, dst)
        better = b.cmpf("o" + pred, v, old) if is_float(elem) else b.cmpi("s" + pred, v, old)
        first = b.cmpi("eq", ivs[axis], b.index(0))
        take = b.add(arith.OrIOp(first, better))
        b.store(b.select(take, v, old), best, dst)
        k = b.cast(ivs[axis], out.type.element_type)
        b.store(b.select(take, k, b.load(out, dst)), out, dst)
    return [out]


def lower_cumsum(b: KernelBuilder, op, ins, module=None):
    """CumSum along a constant `axis` (exclusive, reverse). The running sums live in an
    accumulator indexed by the other dims, as a reduction's do (so the scheduler never runs the
    axis loop in parallel), and each output element is the accumulator before (exclusive) or
    after adding its input; reverse walks the axis from its end."""
    x = ins[0]
    xs = shape(x)
    axis = onnx_d.constant_value(op.operands[1], module)
    if axis is None:
        raise NotImplementedError("CumSum with a non-constant axis")
    axis = int(axis.reshape(-1)[0])
    axis = axis + len(xs) if axis < 0 else axis
    return [running_scan(b, op, x, axis, 0, b.add_)]


def running_scan(b: KernelBuilder, op, x, axis: int, identity, combine):
    """CumSum's and CumProd's nest: `combine`(running value, element) along `axis`, from
    `identity`, honouring the op's exclusive and reverse attributes; returns the output."""
    xs = shape(x)
    exclusive = onnx_d.get_attr(op, "exclusive", 0)
    reverse = onnx_d.get_attr(op, "reverse", 0)
    elem = x.type.element_type
    out = b.alloc(xs, elem)
    acc = b.alloc([d for k, d in enumerate(xs) if k != axis] or [1], elem)
    fill(b, acc, float(identity) if is_float(elem) else int(identity))
    n = xs[axis]
    with b.nest(xs) as ivs:
        at = [iv for k, iv in enumerate(ivs) if k != axis] or [b.index(0)]
        pos = list(ivs)
        if reverse:
            pos[axis] = b.affine([(ivs[axis], -1)], n - 1)
        before = b.load(acc, at)
        after = combine(before, b.load(x, pos))
        b.store(after, acc, at)
        b.store(before if exclusive else after, out, pos)
    return out


def lower_hardmax(b: KernelBuilder, op, ins, opset=13):
    """Hardmax: 1 at the first maximum along `axis` (opset >= 13; before, along the input
    flattened to 2-D at `axis`), 0 elsewhere. NaN counts as the maximum (the first NaN gets
    the 1), as in ONNX's reference implementation (numpy's argmax): onnxruntime's answer on a
    slice with NaN depends on how its SIMD max reduction meets the NaN (a row [NaN, 5, 1, 2]
    gives all zeros, a column [NaN, 5, 2, ...] gives the 5), so it is no reference there."""
    x = ins[0]
    xs = shape(x)
    rank = len(xs)
    axis = onnx_d.get_attr(op, "axis", 1 if opset < 13 else -1)
    axis = axis + rank if axis < 0 else axis
    outer = math.prod(xs[:axis])
    d, inner = (math.prod(xs[axis:]), 1) if opset < 13 else (xs[axis], math.prod(xs[axis + 1:]))
    elem = x.type.element_type
    if not is_float(elem):
        raise NotImplementedError(f"Hardmax on {elem} (float inputs only)")
    xv = b.view(x, [outer, d, inner])
    out = b.alloc(xs, elem)
    ov = b.view(out, [outer, d, inner])
    best = b.alloc([outer, inner], elem)
    where = b.alloc([outer, inner], i64)
    with b.nest([outer, d, inner]) as (o, k, i):
        v, old = b.load(xv, [o, k, i]), b.load(best, [o, i])
        first = b.cmpi("eq", k, b.index(0))
        nan_first = b.and_(b.cmpf("uno", v, v), b.cmpf("ord", old, old))
        better = b.add(arith.OrIOp(b.cmpf("ogt", v, old), nan_first))
        take = b.add(arith.OrIOp(first, better))
        b.store(b.select(take, v, old), best, [o, i])
        b.store(b.select(take, b.cast(k, i64), b.load(where, [o, i])), where, [o, i])
    with b.nest([outer, d, inner]) as (o, k, i):
        hit = b.cmpi("eq", b.cast(k, i64), b.load(where, [o, i]))
        b.store(b.select(hit, b.const(1.0, elem), b.const(0.0, elem)), ov, [o, k, i])
    return [out]
