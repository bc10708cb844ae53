"""Lowering of data-movement ops to Kernel IR: Reshape/Flatten/Squeeze/Unsqueeze (a
`krnl.reshape` view, no copy), Transpose, Concat, Split, Pad (constant/edge/reflect/wrap),
Slice, Gather, ConstantOfShape, Tile.

Shapes are static (from shape inference); parameters that ONNX passes as inputs (Pad's pads,
Slice's starts/ends/axes/steps, Split's sizes) must be constants after folding.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import NoneType, i64

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import INDEX, KernelBuilder, shape
from compilerkit.lowering.matmul import fill


def _const_input(op, k, module, what):
    if len(op.operands) <= k or isinstance(op.operands[k].type, NoneType):
        return None
    value = onnx_d.constant_value(op.operands[k], module)
    if value is None:
        raise NotImplementedError(f"{onnx_d.op_type(op)} with a non-constant {what}")
    return [int(v) for v in value.reshape(-1)]


def lower_view(b: KernelBuilder, op, ins):
    return [b.view(ins[0], onnx_d.shape_of(op.results[0]))]


def lower_transpose(b: KernelBuilder, op, ins):
    x = ins[0]
    rank = len(shape(x))
    perm = onnx_d.get_attr(op, "perm", None) or list(reversed(range(rank)))
    out = b.alloc(onnx_d.shape_of(op.results[0]), x.type.element_type)
    with b.nest(shape(out)) as ivs:
        src = [None] * rank
        for k, p in enumerate(perm):
            src[p] = ivs[k]
        b.store(b.load(x, src), out, ivs)
    return [out]


def lower_concat(b: KernelBuilder, op, ins):
    out_dims = onnx_d.shape_of(op.results[0])
    axis = onnx_d.get_attr(op, "axis", 0)
    axis = axis + len(out_dims) if axis < 0 else axis
    out = b.alloc(out_dims, op.results[0].type.element_type)
    # With nothing before the axis but ones, each input fills one contiguous slab of the
    # output: the nest says where, and buffer planning may place the input there instead.
    inner = math.prod(out_dims[axis + 1:])
    slabs = math.prod(out_dims[:axis]) == 1
    offset = 0
    for x in ins:
        with b.nest(shape(x)) as ivs:
            dst = list(ivs)
            dst[axis] = b.affine([(ivs[axis], 1)], offset)
            b.store(b.load(x, ivs), out, dst)
        if slabs and math.prod(shape(x)):
            b.block.last_op.attributes[krnl.CONCAT_SLAB] = onnx_d.to_mlir_attr(offset * inner)
        offset += shape(x)[axis]
    return [out]


def lower_split(b: KernelBuilder, op, ins, module=None):
    x = ins[0]
    axis = onnx_d.get_attr(op, "axis", 0)
    axis = axis + len(shape(x)) if axis < 0 else axis
    outs, offset = [], 0
    for res in op.results:
        dims = onnx_d.shape_of(res)
        out = b.alloc(dims, res.type.element_type)
        with b.nest(dims) as ivs:
            src = list(ivs)
            src[axis] = b.affine([(ivs[axis], 1)], offset)
            b.store(b.load(x, src), out, ivs)
        offset += dims[axis]
        outs.append(out)
    return outs


def lower_pad(b: KernelBuilder, op, ins, module=None, opset=13):
    x = ins[0]
    rank = len(shape(x))
    mode = onnx_d.get_attr(op, "mode", "constant")
    if opset < 11:
        pads = onnx_d.get_attr(op, "pads")
        value = onnx_d.get_attr(op, "value", 0.0)
        axes = None
    else:
        pads = _const_input(op, 1, module, "pads")
        value = 0.0
        if len(op.operands) > 2 and not isinstance(op.operands[2].type, NoneType):
            v = onnx_d.constant_value(op.operands[2], module)
            if v is None:
                raise NotImplementedError("Pad with a non-constant value")
            value = v.reshape(-1)[0].item()
        axes = _const_input(op, 3, module, "axes")
    begin = [0] * rank
    if axes is not None:
        for k, a in enumerate(axes):
            begin[a % rank] = pads[k]
    else:
        begin = list(pads[:rank])
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise NotImplementedError(f"Pad mode {mode!r} (supported: constant, edge, reflect, "
                                  "wrap)")
    dims = shape(x)
    out_dims = onnx_d.shape_of(op.results[0])
    # validate_onnx.py has refused what onnxruntime refuses: reflect pads wider than the axis
    # minus one, and edge/wrap/reflect on an empty axis.
    out = b.alloc(out_dims, x.type.element_type)
    with b.nest(shape(out)) as ivs:
        src = [b.affine([(iv, 1)], -p) for iv, p in zip(ivs, begin, strict=True)]
        if mode == "edge":
            v = b.load(x, [b.clamp(s, d) for s, d in zip(src, dims, strict=True)])
        elif mode == "reflect":
            v = b.load(x, [_reflect(b, s, d, p > 0 or o - p > d) for s, d, p, o in
                           zip(src, dims, begin, out_dims, strict=True)])
        elif mode == "wrap":
            v = b.load(x, [_wrap(b, s, d, p, o) for s, d, p, o in
                           zip(src, dims, begin, out_dims, strict=True)])
        else:
            v = b.guarded_load(x, src, value)
        b.store(v, out, ivs)
    return [out]


def _wrap(b: KernelBuilder, src, d: int, before: int, out: int):
    """src (= out index - pads before) taken modulo d, as numpy.pad's "wrap": the offset added
    first is a multiple of d that makes every src of the loop non-negative (the remainder of
    a negative number would keep its sign)."""
    if before <= 0 and out - before <= d:
        return src  # no padding on this axis: src is already in range
    shift = -(-max(before, 0) // d) * d
    # The clamp changes nothing; it lets the verifier's range analysis see the bound.
    return b.clamp(b.add(arith.RemSIOp(b.affine([(src, 1)], shift), b.index(d))), d)


def _reflect(b: KernelBuilder, src, d: int, padded: bool):
    """src reflected into [0, d) about the first and last element (numpy.pad's "reflect": the
    edge is not repeated), for any pad width: the pattern repeats every 2 (d - 1), so
    m = |src| mod 2 (d - 1), and m past the last element reflects back as 2 (d - 1) - m."""
    if not padded:
        return src
    if d == 1:
        return b.index(0)
    period = 2 * (d - 1)
    neg = b.cmpi("slt", src, b.index(0))
    mag = b.select(neg, b.affine([(src, -1)]), src)
    m = b.add(arith.RemSIOp(mag, b.index(period)))
    back = b.affine([(m, -1)], period)
    # The clamp changes nothing; it lets the verifier's range analysis see the bound.
    return b.clamp(b.select(b.cmpi("sge", m, b.index(d)), back, m), d)


def lower_slice(b: KernelBuilder, op, ins, module=None, opset=13):
    x = ins[0]
    dims = shape(x)
    rank = len(dims)
    if opset < 10:
        starts, ends = onnx_d.get_attr(op, "starts"), onnx_d.get_attr(op, "ends")
        axes, steps = onnx_d.get_attr(op, "axes", None), None
    else:
        starts = _const_input(op, 1, module, "starts")
        ends = _const_input(op, 2, module, "ends")
        axes = _const_input(op, 3, module, "axes")
        steps = _const_input(op, 4, module, "steps")
    axes = list(range(len(starts))) if axes is None else [a % rank for a in axes]
    steps = steps or [1] * len(starts)
    first, step = [0] * rank, [1] * rank
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        # The same clamping rules as numpy's slice.indices.
        first[a] = slice(s, e, st).indices(dims[a])[0]
        step[a] = st
    out = b.alloc(onnx_d.shape_of(op.results[0]), x.type.element_type)
    with b.nest(shape(out)) as ivs:
        src = [b.affine([(iv, st)], f) for iv, st, f in zip(ivs, step, first, strict=True)]
        b.store(b.load(x, src), out, ivs)
    return [out]


def wrapped_index(b: KernelBuilder, raw, d: int):
    """A Gather index as an index value: negative ones count from the end."""
    raw = b.cast(raw, i64)
    neg = b.cmpi("slt", raw, b.const(0, i64))
    return b.cast(b.select(neg, b.add_(raw, b.const(d, i64)), raw), INDEX)


def lower_gather(b: KernelBuilder, op, ins):
    data, indices = ins
    dd, idims = shape(data), shape(indices)
    axis = onnx_d.get_attr(op, "axis", 0)
    axis = axis + len(dd) if axis < 0 else axis
    d, q = dd[axis], len(idims)
    out = b.alloc(onnx_d.shape_of(op.results[0]), data.type.element_type)
    name = op.attributes.get("onnx_node_name")
    # An index out of range is a run-time error, as in onnxruntime (even when the output is
    # empty): each index is checked once, in a nest of its own, and krnl.check reports it
    # after the call.
    with b.nest(idims) as jvs:
        b.add(krnl.CheckOp(b.in_range([(wrapped_index(b, b.load(indices, jvs), d), d)]),
                           f"node {name.data if name else '?'!r} (Gather): an index on axis "
                           f"{axis} is out of range; valid indices are [{-d}, {d - 1}]"))
    if d == 0:
        return [out]  # every index is out of range (reported); nothing to read
    with b.nest(shape(out)) as ivs:
        # Clamped: in range whenever the check passed, and never a wild read when it failed.
        idx = b.clamp(wrapped_index(b, b.load(indices, ivs[axis:axis + q]), d), d)
        src = ivs[:axis] + [idx] + ivs[axis + q:]
        b.store(b.load(data, src), out, ivs)
    return [out]


def lower_constant_of_shape(b: KernelBuilder, op, ins):
    value = onnx_d.get_attr(op, "value", np.zeros(1, np.float32))
    out = b.alloc(onnx_d.shape_of(op.results[0]), op.results[0].type.element_type)
    fill(b, out, np.asarray(value).reshape(-1)[0].item())
    return [out]


def lower_tile(b: KernelBuilder, op, ins):
    x = ins[0]
    out = b.alloc(onnx_d.shape_of(op.results[0]), x.type.element_type)
    with b.nest(shape(out)) as ivs:
        src = [b.add(arith.RemSIOp(iv, b.index(d))) if d != o else iv
               for iv, d, o in zip(ivs, shape(x), shape(out), strict=True)]
        b.store(b.load(x, src), out, ivs)
    return [out]
