"""Lowering of ReduceSum / ReduceMean / ReduceMax / ReduceMin / ReduceProd to Kernel IR.

Axes come from the `axes` attribute (older opsets) or a constant second input (ReduceSum from
13, the others from 18); no axes means all (unless noop_with_empty_axes). The output starts at
the reduction's identity and one krnl.iterate over the input accumulates into it; Mean divides
at the end.
"""

from __future__ import annotations

import math

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, shape
from compilerkit.lowering.matmul import fill

_KIND = {"ReduceSum": ("add", 0.0), "ReduceMean": ("add", 0.0), "ReduceMax": ("max", -math.inf),
         "ReduceMin": ("min", math.inf), "ReduceProd": ("mul", 1.0)}


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
    return sorted(a + rank if a < 0 else a for a in axes)


def _int_identity(init, elem):
    """The float identity (+-inf for min/max) as the integer type's extreme; bool is 0/1."""
    width = elem.width.data
    if not math.isinf(init):
        return int(init)
    if width == 1:
        return 1 if init > 0 else 0
    return 2 ** (width - 1) - 1 if init > 0 else -(2 ** (width - 1))


def lower_reduce(b: KernelBuilder, op, ins, module=None):
    name = onnx_d.op_type(op)
    kind, init = _KIND[name]
    x = ins[0]
    xs = shape(x)
    axes = reduce_axes(op, module, len(xs))
    keep = onnx_d.get_attr(op, "keepdims", 1)
    elem = op.results[0].type.element_type
    out_dims = onnx_d.shape_of(op.results[0])
    out = b.alloc(out_dims, elem)
    fill(b, out, init if elem.__class__.__name__.startswith("Float") else _int_identity(init, elem))
    with b.nest(xs) as ivs:
        if keep:
            zero = b.index(0)
            dst = [zero if k in axes else iv for k, iv in enumerate(ivs)]
        else:
            dst = [iv for k, iv in enumerate(ivs) if k not in axes]
        b.store(b.binary(kind, b.load(out, dst), b.load(x, ivs)), out, dst)
    if name == "ReduceMean":
        n = math.prod(xs[a] for a in axes)
        with b.nest(out_dims) as ivs:
            b.store(b.binary("div", b.load(out, ivs), b.const(float(n), elem)), out, ivs)
    return [out]
