"""Lowering of MaxPool / AveragePool (1-D/2-D/3-D: pads, auto_pad, strides, dilations,
ceil_mode, count_include_pad) and GlobalAveragePool / GlobalMaxPool to Kernel IR.

One krnl.iterate over (output position, kernel position) accumulates into the output; reads
outside the input are the padding value (-inf for max, 0 for average) through guarded loads.
AveragePool then divides by the window's element count, computed with index arithmetic:
the window clipped to the padded input (count_include_pad) or to the input itself.
The divisor is a constant buffer computed here (window_counts), as onnxruntime counts: taps that
land in the input, or in the padded input when count_include_pad (a dilated window counts its
taps, not its span). The output shape (ceil_mode) comes from shape inference, which drops
windows that would start in the right padding (shape_inference.pool_output_size).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, memref_type, shape
from compilerkit.lowering.conv import conv_geometry
from compilerkit.lowering.matmul import fill

_COUNTS = itertools.count()


def window_counts(op, in_sp, out_sp, st, dil, pads):
    """AveragePool divisors, shape out_sp: per dimension, the taps start + t*d (t < k) inside
    [0, in) or, with count_include_pad, inside [-pad_begin, in + pad_end); then the product."""
    k_sp = onnx_d.get_attr(op, "kernel_shape")
    r = len(k_sp)
    include = onnx_d.get_attr(op, "count_include_pad", 0)
    auto = onnx_d.get_attr(op, "auto_pad", "NOTSET")
    all_pads = onnx_d.get_attr(op, "pads", None) or [0] * (2 * r)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        # The total SAME padding minus the begin part (conv_geometry) lies at the end.
        end_pads = [max((out_sp[d] - 1) * st[d] + (k_sp[d] - 1) * dil[d] + 1 - in_sp[d], 0)
                    - pads[d] for d in range(r)]
    else:
        end_pads = all_pads[r:] if auto == "NOTSET" else [0] * r
    total = np.ones(out_sp, dtype=np.int64)
    for d in range(r):
        start = np.arange(out_sp[d]) * st[d] - pads[d]
        taps = start[:, None] + np.arange(k_sp[d])[None, :] * dil[d]
        lo, hi = (-pads[d], in_sp[d] + end_pads[d]) if include else (0, in_sp[d])
        cnt = ((taps >= lo) & (taps < hi)).sum(axis=1)
        total = total * np.maximum(cnt, 1).reshape([-1 if e == d else 1 for e in range(r)])
    return total


def lower_pool(b: KernelBuilder, op, ins, module=None):
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
                   for d, (o, kk) in enumerate(zip(os_, ks, strict=True))]
        v = b.guarded_load(x, lead + spatial, -math.inf if is_max else 0.0)
        dst = lead + os_
        b.store(b.binary("max" if is_max else "add", b.load(out, dst), v), out, dst)
    if not is_max and math.prod(out_dims) > 0:
        # Every window's element count is known at compile time: a constant buffer over the
        # output positions (exact for dilations and ceil_mode windows that hang over the end).
        count = window_counts(op, in_sp, out_sp, st, dil, pads)
        dtype = onnx_d.numpy_dtype(elem)
        name = f"pool_count_{next(_COUNTS)}"
        g = b.add(krnl.GlobalOp(name, onnx_d.dense_attr(count.astype(dtype), module, name),
                                memref_type(count.shape, elem)))
        with b.nest(out_dims) as ivs:
            b.store(b.binary("div", b.load(out, ivs), b.load(g, ivs[2:])), out, ivs)
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
