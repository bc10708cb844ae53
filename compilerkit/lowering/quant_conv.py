"""The int32 convolution behind ConvInteger and QLinearConv (lowering/quant.py), of x and w
already shifted by their zero points into int32 buffers (quant.shifted): one nest over
(batch entry, group, output channel of the group, output position, input channel of the group,
kernel tap) adding each product into the int32 output, which starts as the bias (or 0). Pads
read 0 after the shift, i.e. x's zero point before it, as ONNX defines. Geometry (strides,
dilations, pads, auto_pad) is conv.conv_geometry's.

krnl.matmul and the float Conv schedules are floating point (fused multiply-adds in their
micro-kernel), so the integer Conv is this plain nest: correct and exact, not fast.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import i32

from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ModelError
from compilerkit.lowering.builder import KernelBuilder, shape
from compilerkit.lowering.conv import conv_geometry
from compilerkit.onnx_passes.single_node import node_label


def int_conv(b: KernelBuilder, op, x32, w32, bias):
    """The int32 Conv of op's geometry over x32 [N, C, ...] and w32 [M, C/group, ...]; bias
    (int32 [M]) or None."""
    x, w = x32, w32
    xs, ws = shape(x), shape(w)
    out_dims = list(onnx_d.shape_of(op.results[0]))
    groups = onnx_d.get_attr(op, "group", 1)
    n, c = xs[0], xs[1]
    m = ws[0]
    if groups < 1 or c % groups or m % groups or ws[1] * groups != c:
        raise ModelError(f"node {node_label(op)!r}: group={groups} does not divide input "
                         f"channels {c} and output channels {m} with {ws[1]} weight channels "
                         "per group")
    in_sp, k_sp, out_sp = list(xs[2:]), list(ws[2:]), out_dims[2:]
    st, dil, pads = conv_geometry(op, in_sp, k_sp, out_sp)
    out = b.alloc(out_dims, i32)
    if bias is not None and shape(bias) != (m,):
        raise ModelError(f"node {node_label(op)!r}: the bias has shape {list(shape(bias))}, "
                         f"not [{m}]")
    with b.nest(out_dims) as ivs:
        b.store(b.load(bias, [ivs[1]]) if bias is not None else b.const(0, i32), out, ivs)
    cg, mg = c // groups, m // groups
    if math.prod(out_dims) == 0 or cg * math.prod(k_sp) == 0:
        return out
    r = len(in_sp)
    with b.nest([n, groups, mg] + out_sp + [cg] + k_sp) as ivs:
        nn, g, mm = ivs[:3]
        pos = ivs[3:3 + r]
        cc = ivs[3 + r]
        taps = ivs[4 + r:]
        oc = b.affine([(g, mg), (mm, 1)])
        ic = b.affine([(g, cg), (cc, 1)])
        at = [b.affine([(p, s), (t, d)], -pad)
              for p, t, s, d, pad in zip(pos, taps, st, dil, pads, strict=True)]
        xv = b.guarded_load(x32, [nn, ic] + at, 0)
        wv = b.load(w32, [oc, cc] + list(taps))
        o_at = [nn, oc] + list(pos)
        b.store(b.add_(b.load(out, o_at), b.mul(xv, wv)), out, o_at)
    return out
