"""Lowering of ConvTranspose (1-D/2-D/3-D: groups, strides, dilations, pads, auto_pad,
output_padding, output_shape, bias) to Kernel IR, as a GEMM and a col2im scatter.

    out[n, g*Cg_out + co, i*s + k*d - pad] += x[n, g*Cg_in + ci, i] * w[g*Cg_in + ci, co, k]

For each (batch entry, group) and panel of input rows (the first spatial axis):

1. col[co, k..., i] = sum_ci W[ci, co, k...] x[ci, i] for the panel's input positions i: one
   `krnl.matmul` (the micro-kernel, -O3 tiled) of M = Cg_out * prod(kernel) rows, K = Cg_in,
   N = the panel's positions. W is read in place, transposed by its strides (row stride 1,
   depth stride Cg_out * prod(kernel)), x in place as B (a panel is contiguous in x). The
   column buffer starts at zero.
2. out[.., i*s + k*d - pad] += col[co, k..., i] for every tap inside the output (cropped
   taps add 0 at a clamped address); out started as the bias. Where each output takes exactly
   one tap (kernel == stride, no dilation or padding: the U-Net's up-convolutions), col starts
   from the bias instead and step 2 only copies: no fill of the output, no read of it.

This is the GEMM + col2im of Caffe's and onnxruntime's ConvTranspose. Before it, each
product was its own scalar multiply-add into the output: a 3-D U-Net's 2x2x2 stride-2
up-convolutions ran at about 14 GFLOP/s (64 -> 32 channels onto 64^3: 76 ms at 1 thread).
Each output sums its products per tap over the input channels first (a chain of fused
multiply-adds), then over the taps that reach it: not the old scalar order, so results differ
from it in the last bits (onnxruntime's MLAS sums the same way).

Panels hold at most PANEL_BYTES of column buffer. Where no two panels write the same output
rows (stride >= the kernel's reach along the first axis: the U-Net's kernel == stride) and all
panels' buffers together fit COL_BYTES, each panel has its own buffer, so threads can take the
panels (the parallelize pass proves the writes disjoint); otherwise one buffer, a serial panel
loop, and threads share each panel's product. ConvTranspose is defined for floats only (the
ONNX schema; float16 is refused at import), which the micro-kernel multiplies.
"""

from __future__ import annotations

import math

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, shape
from compilerkit.lowering.conv import conv_geometry, output_with_bias
from compilerkit.lowering.conv_common import COL_BYTES, PANEL_BYTES
from compilerkit.lowering.matmul import emit_matmul


def lower_conv_transpose(b: KernelBuilder, op, ins):
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    xs, ws = shape(x), shape(w)
    out_dims = onnx_d.shape_of(op.results[0])
    groups = onnx_d.get_attr(op, "group", 1)
    geo = _Geometry(xs, ws, out_dims, groups, *conv_geometry(
        op, list(xs[2:]), list(ws[2:]), list(out_dims[2:]), transpose=True))
    elem = op.results[0].type.element_type
    if geo.one_tap_each():  # every output is written once, by step 2: no fill first
        out = b.alloc(out_dims, elem)
    else:
        out = output_with_bias(b, out_dims, elem, bias)
    _gemm(b, geo, x, w, out, elem, bias)
    return [out]


class _Geometry:
    def __init__(self, xs, ws, out_dims, groups, st, dil, pads):
        self.n, self.c_in, self.in_sp = xs[0], xs[1], list(xs[2:])
        self.cg_out, self.k_sp = ws[1], list(ws[2:])
        self.groups, self.cg_in = groups, xs[1] // groups
        self.out_dims, self.out_sp = list(out_dims), list(out_dims[2:])
        self.st, self.dil, self.pads, self.r = st, dil, pads, len(self.k_sp)

    def one_tap_each(self) -> bool:
        """Whether each output position gets exactly one tap: kernel == stride, no
        dilation, padding or output padding (the U-Net's 2x2x2 stride-2 up-convolutions)."""
        return all(k == s and d == 1 and o == i * s for k, s, d, i, o in zip(
            self.k_sp, self.st, self.dil, self.in_sp, self.out_sp, strict=True)) and not any(
            self.pads)

    def out_index(self, b, isp, ks):
        """Output positions i*s + k*d - pad for input positions `isp`, taps `ks`."""
        return [b.affine([(i, self.st[d]), (k, self.dil[d])], -self.pads[d])
                for d, (i, k) in enumerate(zip(isp, ks, strict=True))]


def _add_inside(b, geo, out, target_lead, osp, value, elem):
    """out[target_lead + osp] += value where osp lies inside the output; a cropped tap adds 0
    at a clamped (valid) address: no branch."""
    inside = b.in_range(list(zip(osp, geo.out_sp, strict=True)))
    safe = [b.clamp(o, d) for o, d in zip(osp, geo.out_sp, strict=True)]
    target = target_lead + safe
    old = b.load(out, target)
    value = b.select(inside, value, b.const(0.0, elem))
    b.store(b.add_(old, value), out, target)


def _panels(geo, rows_bytes: int) -> tuple[int, bool]:
    """(input rows per panel, whether each panel has its own column buffer)."""
    rows = geo.in_sp[0]
    height = max(1, min(rows, PANEL_BYTES // max(rows_bytes, 1)))
    reach = geo.dil[0] * (geo.k_sp[0] - 1) + 1
    disjoint = geo.st[0] >= reach  # panels write different output rows
    own = disjoint and height < rows and rows * rows_bytes <= COL_BYTES
    return height, own


def _gemm(b, geo, x, w, out, elem, bias):
    taps = math.prod(geo.k_sp)
    m = geo.cg_out * taps  # col's rows: (co, k...)
    inner = math.prod(geo.in_sp[1:])
    positions = geo.in_sp[0] * inner
    esize = onnx_d.numpy_dtype(elem).itemsize
    height, own = _panels(geo, m * inner * esize)
    n_full, rest = divmod(geo.in_sp[0], height)
    panels = [(count, h, first) for count, h, first in
              ((n_full, height, 0), (1 if rest else 0, rest, n_full * height)) if count]
    cols = [b.alloc([count if own else 1, m, h * inner], elem) for count, h, _ in panels]
    xv = b.view(x, [geo.n, geo.c_in, positions])
    with b.nest([geo.n, geo.groups]) as (nn, g):
        for (count, h, first), col in zip(panels, cols, strict=True):
            with b.nest([count]) as (jp,):
                slot = jp if own else b.index(0)
                _panel(b, geo, xv, w, out, bias, col, nn, g, jp, slot, h, first, m, inner,
                       elem)


def _panel(b, geo, xv, w, out, bias, col, nn, g, jp, slot, h, first, m, inner, elem):
    width = h * inner
    positions = geo.in_sp[0] * inner
    taps = math.prod(geo.k_sp)
    once = geo.one_tap_each()
    # 1. col = W^T x over the panel's positions, starting from zero (or, where each output
    # takes one tap, from the bias: col is then the output's values)
    with b.nest([geo.cg_out, taps, width]) as (co, kk, q):
        if once and bias is not None:
            v = b.load(bias, [b.affine([(g, geo.cg_out), (co, 1)])])
        else:
            v = b.const(0.0, elem)
        b.store(v, col, [slot, b.affine([(co, taps), (kk, 1)]), q])
    a_off = b.affine([(g, geo.cg_in * m)])
    b_off = b.affine([(nn, geo.c_in * positions), (g, geo.cg_in * positions),
                      (jp, h * inner)], first * inner)
    c_off = b.affine([(slot, m * width)])
    emit_matmul(b, w, xv, col, m, width, geo.cg_in, [a_off, b_off, c_off],
                (1, geo.cg_out * taps), positions, width)
    # 2. col2im: every tap of every position into the output. Loops (co, i0, k0, i1, k1, ...):
    # the innermost pair walks an output row in order (with kernel == stride, contiguously).
    bounds = [geo.cg_out]
    for d in range(geo.r):
        bounds += [h if d == 0 else geo.in_sp[d], geo.k_sp[d]]
    with b.nest(bounds) as ivs:
        co, isp, ks = ivs[0], ivs[1::2], ivs[2::2]
        hh, rest = isp[0], isp[1:]
        row = b.affine([(jp, h), (hh, 1)], first)
        k_flat = b.affine([(k, math.prod(geo.k_sp[d + 1:])) for d, k in enumerate(ks)])
        i = b.affine([(co, taps), (k_flat, 1)])
        q = b.affine([(hh, inner)] + [(v, math.prod(geo.in_sp[2 + d:]))
                                       for d, v in enumerate(rest)])
        value = b.load(col, [slot, i, q])
        cout = b.affine([(g, geo.cg_out), (co, 1)])
        osp = geo.out_index(b, [row] + rest, ks)
        if once:
            b.store(value, out, [nn, cout] + osp)
        else:
            _add_inside(b, geo, out, [nn, cout], osp, value, elem)
