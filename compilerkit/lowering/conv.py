"""Lowering of Conv (1-D/2-D/3-D: pads, auto_pad, strides, dilations, groups, bias) and
ConvTranspose to Kernel IR.

Conv is im2col + matrix multiply, per batch entry and group: the input patches are copied into
a column buffer [C/g * prod(kernel), prod(out spatial)] (padding read as 0 through guarded
loads), then out[oc, p] += W[oc, :] . col[:, p] with `krnl.matmul` (see matmul.py). A 1x1,
stride-1, unpadded Conv reads the input directly as the B matrix. The output starts as the bias.
ConvTranspose is a scatter: each input element adds its products into the output window.
"""

from __future__ import annotations

import math

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, shape
from compilerkit.lowering.matmul import emit_matmul, fill


def _output_with_bias(b, out_dims, elem, bias):
    """The output buffer, holding the bias broadcast over channels (or zeros): both Conv and
    ConvTranspose then only accumulate into it."""
    out = b.alloc(out_dims, elem)
    if bias is not None:
        with b.nest(out_dims) as ivs:
            b.store(b.load(bias, [ivs[1]]), out, ivs)
    else:
        fill(b, out, 0.0)
    return out

def conv_geometry(op, in_spatial, k_spatial, out_spatial, transpose=False):
    """(strides, dilations, begin pads) with auto_pad resolved."""
    r = len(in_spatial)
    st = onnx_d.get_attr(op, "strides", None) or [1] * r
    dil = onnx_d.get_attr(op, "dilations", None) or [1] * r
    pads = onnx_d.get_attr(op, "pads", None) or [0] * (2 * r)
    auto = onnx_d.get_attr(op, "auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        # ONNX: SAME_UPPER puts the odd padding element at the end, for Conv and ConvTranspose
        # alike (onnxruntime follows; older runtimes swapped it for ConvTranspose).
        out_pad = onnx_d.get_attr(op, "output_padding", None) or [0] * r
        begin = []
        for i in range(r):
            if transpose:
                total = max(st[i] * (in_spatial[i] - 1) + out_pad[i]
                            + (k_spatial[i] - 1) * dil[i] + 1 - out_spatial[i], 0)
            else:
                total = max((out_spatial[i] - 1) * st[i] + (k_spatial[i] - 1) * dil[i] + 1
                            - in_spatial[i], 0)
            begin.append(total // 2 if auto == "SAME_UPPER" else total - total // 2)
        pads = begin
    elif transpose and onnx_d.get_attr(op, "output_shape", None):
        out_pad = onnx_d.get_attr(op, "output_padding", None) or [0] * r
        pads = []
        for i in range(r):
            total = max(st[i] * (in_spatial[i] - 1) + out_pad[i]
                        + (k_spatial[i] - 1) * dil[i] + 1 - out_spatial[i], 0)
            pads.append(total - total // 2)
    elif auto == "VALID":
        pads = [0] * r
    return list(st), list(dil), list(pads[:r])


def lower_conv(b: KernelBuilder, op, ins):
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    xs, ws = shape(x), shape(w)
    out_dims = onnx_d.shape_of(op.results[0])
    n_batch, c_in, in_sp = xs[0], xs[1], list(xs[2:])
    oc, cg, k_sp = ws[0], ws[1], list(ws[2:])
    out_sp = list(out_dims[2:])
    groups = onnx_d.get_attr(op, "group", 1)
    ocg = oc // groups
    st, dil, pads = conv_geometry(op, in_sp, k_sp, out_sp)
    elem = op.results[0].type.element_type
    out = _output_with_bias(b, out_dims, elem, bias)
    p = math.prod(out_sp)
    kdim = cg * math.prod(k_sp)
    hw = math.prod(in_sp)
    direct = all(k == 1 for k in k_sp) and all(s == 1 for s in st) and not any(pads)
    col = None if direct else b.alloc([cg] + k_sp + out_sp, elem)
    with b.nest([n_batch, groups]) as (nn, g):
        if direct:
            src, b_off = x, b.affine([(nn, c_in * hw), (g, cg * hw)])
        else:
            r = len(k_sp)
            with b.nest([cg] + k_sp + out_sp) as ivs:
                c, ks, os_ = ivs[0], ivs[1:1 + r], ivs[1 + r:]
                spatial = [b.affine([(o, st[d]), (kk, dil[d])], -pads[d])
                           for d, (o, kk) in enumerate(zip(os_, ks, strict=True))]
                channel = b.affine([(g, cg), (c, 1)])
                v = b.guarded_load(x, [nn, channel] + spatial, 0.0)
                b.store(v, col, ivs)
            src, b_off = col, b.index(0)
        a_off = b.affine([(g, ocg * kdim)])
        c_off = b.affine([(nn, oc * p), (g, ocg * p)])
        emit_matmul(b, w, src, out, ocg, p, kdim, [a_off, b_off, c_off], (kdim, 1), p, p)
    return [out]


def lower_conv_transpose(b: KernelBuilder, op, ins):
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    xs, ws = shape(x), shape(w)
    out_dims = onnx_d.shape_of(op.results[0])
    groups = onnx_d.get_attr(op, "group", 1)
    c_in, cg_out, k_sp = xs[1], ws[1], list(ws[2:])
    cg_in = c_in // groups
    r = len(k_sp)
    st, dil, pads = conv_geometry(op, list(xs[2:]), k_sp, list(out_dims[2:]), transpose=True)
    elem = op.results[0].type.element_type
    out = _output_with_bias(b, out_dims, elem, bias)
    # out[n, g*cg_out + co, i*s + k*d - pad] += x[n, g*cg_in + ci, i] * w[g*cg_in + ci, co, k]
    with b.nest([xs[0], groups, cg_in, cg_out] + list(xs[2:]) + k_sp) as ivs:
        nn, g, ci, co = ivs[:4]
        isp, ks = ivs[4:4 + r], ivs[4 + r:]
        cin = b.affine([(g, cg_in), (ci, 1)])
        cout = b.affine([(g, cg_out), (co, 1)])
        osp = [b.affine([(i, st[d]), (kk, dil[d])], -pads[d])
               for d, (i, kk) in enumerate(zip(isp, ks, strict=True))]
        prod = b.mul(b.load(x, [nn, cin] + isp), b.load(w, [cin, co] + ks))
        inside = b.in_range(list(zip(osp, out_dims[2:], strict=True)))
        safe = [b.clamp(o, d) for o, d in zip(osp, out_dims[2:], strict=True)]
        target = [nn, cout] + safe
        old = b.load(out, target)
        # Out-of-range contributions add 0 at a clamped (valid) address: no branch needed.
        b.store(b.add_(old, b.select(inside, prod, b.const(0.0, elem))), out, target)
    return [out]
