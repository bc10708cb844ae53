"""Lowering of LpPool and GlobalLpPool to Kernel IR: the p-norm of each window,
(sum of |x|^p over the window) ^ (1 / p), padding counting as 0.

One nest over the output positions and the kernel offsets accumulates |x|^p (p an integer,
ONNX's attribute type: repeated multiplication, exact for the small p models use) into the
output, reading through guarded loads (0 outside the input, so pads, auto_pad and ceil_mode
windows need nothing else); a second nest takes the root: the sum itself for p = 1, sqrt for
p = 2, exp(log(s) / p) otherwise (0 for a zero sum). Geometry (strides, dilations, pads,
auto_pad) is Conv's (conv.conv_geometry); the output shape is ONNX's inference.

GlobalLpPool (one window over all spatial dims, no guards) is lowered here too but not
registered in LOWERINGS: onnx 1.23 has no node test for it, and every registered op must pass
one (tests/compilerkit/test_onnx_backend.py); registering it is one line once one exists.
"""

from __future__ import annotations

import math

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, is_float, shape
from compilerkit.lowering.conv import conv_geometry
from compilerkit.lowering.indexing import fail
from compilerkit.lowering.matmul import fill


def _power(b: KernelBuilder, v, p: int):
    a = b.unary("abs", v)
    acc = a
    for _ in range(p - 1):
        acc = b.mul(acc, a)
    return acc


def _root(b: KernelBuilder, s, p: int):
    if p == 1:
        return s
    if p == 2:
        return b.unary("sqrt", s)
    return b.unary("exp", b.binary("div", b.unary("log", s), b.const(float(p), s.type)))


def lower_lp_pool(b: KernelBuilder, op, ins):
    x = ins[0]
    xs = shape(x)
    elem = x.type.element_type
    if not is_float(elem):
        raise NotImplementedError(f"{onnx_d.op_type(op)} on {elem} (float inputs only)")
    p = onnx_d.get_attr(op, "p", 2)
    if not isinstance(p, int) or p < 1 or p > 64:
        fail(op, "attribute p", p, "an integer from 1 to 64")
    out_dims = list(onnx_d.shape_of(op.results[0]))
    in_sp = list(xs[2:])
    is_global = onnx_d.op_type(op) == "GlobalLpPool"
    if is_global:
        k_sp, st, dil, pads = in_sp, [1] * len(in_sp), [1] * len(in_sp), [0] * len(in_sp)
    else:
        k_sp = onnx_d.get_attr(op, "kernel_shape")
        st, dil, pads = conv_geometry(op, in_sp, k_sp, out_dims[2:])
    r = len(in_sp)
    out = b.alloc(out_dims, elem)
    fill(b, out, 0.0)
    if math.prod(out_dims) == 0:
        return [out]
    with b.nest(out_dims + list(k_sp)) as ivs:
        o, kk = ivs[:2 + r], ivs[2 + r:]
        src = o[:2] + [b.affine([(o[2 + d], st[d]), (kk[d], dil[d])], -pads[d])
                       for d in range(r)]
        # A global pool's windows are the input itself: nothing to guard.
        v = b.load(x, src) if is_global else b.guarded_load(x, src, 0.0)
        b.store(b.add_(b.load(out, o), _power(b, v, p)), out, o)
    with b.nest(out_dims) as ivs:
        b.store(_root(b, b.load(out, ivs), p), out, ivs)
    return [out]
