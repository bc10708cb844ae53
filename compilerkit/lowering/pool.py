"""Lowering of MaxPool / AveragePool (1-D/2-D/3-D: pads, auto_pad, strides, dilations,
ceil_mode, count_include_pad) and GlobalAveragePool / GlobalMaxPool to Kernel IR.

One krnl.iterate over (output position, kernel position) accumulates into the output; reads
outside the input are the padding value (-inf for max, 0 for average) through guarded loads.
AveragePool then divides by the window's element count, computed with index arithmetic:
the window clipped to the padded input (count_include_pad) or to the input itself.
The output shape (ceil_mode) comes from shape inference.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith
from xdsl.dialects.builtin import i64

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, shape
from compilerkit.lowering.conv import conv_geometry
from compilerkit.lowering.matmul import fill


def lower_pool(b: KernelBuilder, op, ins):
    kind = onnx_d.op_type(op)
    is_max = kind == "MaxPool"
    if len(op.results) > 1 and op.results[1].uses:
        raise NotImplementedError("MaxPool's Indices output is not supported")
    x = ins[0]
    xs = shape(x)
    out_dims = onnx_d.shape_of(op.results[0])
    k_sp = onnx_d.get_attr(op, "kernel_shape")
    in_sp, out_sp = list(xs[2:]), list(out_dims[2:])
    st, dil, pads = conv_geometry(op, in_sp, k_sp, out_sp)
    r = len(k_sp)
    elem = op.results[0].type.element_type
    out = b.alloc(out_dims, elem)
    fill(b, out, -math.inf if is_max else 0.0)
    with b.nest(list(out_dims) + list(k_sp)) as ivs:
        lead, os_, ks = ivs[:2], ivs[2:2 + r], ivs[2 + r:]
        spatial = [b.affine([(o, st[d]), (kk, dil[d])], -pads[d])
                   for d, (o, kk) in enumerate(zip(os_, ks))]
        v = b.guarded_load(x, lead + spatial, -math.inf if is_max else 0.0)
        dst = lead + os_
        b.store(b.binary("max" if is_max else "add", b.load(out, dst), v), out, dst)
    if not is_max:
        include = onnx_d.get_attr(op, "count_include_pad", 0)
        all_pads = onnx_d.get_attr(op, "pads", None) or [0] * (2 * r)
        auto = onnx_d.get_attr(op, "auto_pad", "NOTSET")
        end_pads = all_pads[r:] if auto == "NOTSET" else [0] * r
        with b.nest(out_dims) as ivs:
            count = None
            for d in range(r):
                start = b.affine([(ivs[2 + d], st[d])], -pads[d])
                lo_lim = -pads[d] if include else 0
                hi_lim = in_sp[d] + end_pads[d] if include else in_sp[d]
                end = b.add(arith.MinSIOp(b.affine([(start, 1)], k_sp[d]), b.index(hi_lim)))
                begin = b.add(arith.MaxSIOp(start, b.index(lo_lim)))
                size = b.add(arith.SubiOp(end, begin))
                count = size if count is None else b.add(arith.MuliOp(count, size))
            cf = b.cast(b.cast(count, i64), elem)
            b.store(b.binary("div", b.load(out, ivs), cf), out, ivs)
    return [out]


def lower_global_pool(b: KernelBuilder, op, ins):
    is_max = onnx_d.op_type(op) == "GlobalMaxPool"
    x = ins[0]
    xs = shape(x)
    elem = op.results[0].type.element_type
    out = b.alloc(onnx_d.shape_of(op.results[0]), elem)
    fill(b, out, -math.inf if is_max else 0.0)
    zeros = [b.index(0)] * (len(xs) - 2)
    with b.nest(xs) as ivs:
        dst = ivs[:2] + zeros
        b.store(b.binary("max" if is_max else "add", b.load(out, dst), b.load(x, ivs)), out, dst)
    if not is_max:
        n = math.prod(xs[2:])
        with b.nest(shape(out)) as ivs:
            b.store(b.binary("div", b.load(out, ivs), b.const(float(n), elem)), out, ivs)
    return [out]
