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
from compilerkit.lowering.matmul import fill
from compilerkit.onnx_passes.single_node import node_label


def int_conv(b: KernelBuilder, op, xs, load_x, w32, bias):
    """The int32 Conv of op's geometry over an input of shape xs [N, C, ...], read through
    load_x(ivs) (the shifted int32 value), and w32 [M, C/group, ...]; bias (int32 [M]) or
    None. The input is copied into a zero-bordered int32 buffer first, so the product nest
    reads it unguarded with the output's last axis innermost (a vector loop at stride 1)."""
    ws = shape(w32)
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
    # Each axis as long as the farthest tap of the last window reaches (or the padded input).
    padded = [max(i + p, (o - 1) * s + (k - 1) * d + 1)
              for i, p, o, s, k, d in zip(in_sp, pads, out_sp, st, k_sp, dil, strict=True)]
    xp = b.alloc([n, c] + padded, i32)
    if padded != in_sp:
        fill(b, xp, 0)
    with b.nest(xs) as ivs:
        at = [b.affine([(iv, 1)], p) for iv, p in zip(ivs[2:], pads, strict=True)]
        b.store(load_x(ivs), xp, ivs[:2] + at)
    r = len(in_sp)
    with b.nest([n, groups, mg, cg] + k_sp + out_sp) as ivs:
        nn, g, mm, cc = ivs[:4]
        taps = ivs[4:4 + r]
        pos = ivs[4 + r:]
        oc = b.affine([(g, mg), (mm, 1)])
        ic = b.affine([(g, cg), (cc, 1)])
        at = [b.affine([(p, s), (t, d)])
              for p, t, s, d in zip(pos, taps, st, dil, strict=True)]
        xv = b.load(xp, [nn, ic] + at)
        wv = b.load(w32, [oc, cc] + list(taps))
        o_at = [nn, oc] + list(pos)
        b.store(b.add_(b.load(out, o_at), b.mul(xv, wv)), out, o_at)
    return out
