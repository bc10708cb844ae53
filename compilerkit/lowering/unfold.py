"""Lowering of the ops that put values back into an image to Kernel IR: MaxUnpool, Col2Im and
CenterCropPad.

MaxUnpool writes each input value at its index into the zeroed output, the index counting over
the whole output flattened (as MaxPool's Indices output, batch and channel included; a later
duplicate wins, as in onnxruntime's serial loop). Indices are data: each is checked at run time
(krnl.check names the node and the valid range) and clamped, so a bad one never writes out of
bounds.

Col2Im sums the columns of `input` [N, C * prod(block), L] back into [N, C, *image]: column l
(a position of the block's sliding grid, row-major) adds block element b at image position
l * stride + b * dilation - pad. The sums go into a scratch image covering the whole padded
grid (every index affine and in bounds, no guard), whose interior is then copied out.

CenterCropPad crops or zero-pads each axis to the target length around the centre: output
element i reads input element i + (in - out) // 2 when cropping, i - (out - in) // 2 when
padding (a guarded load gives 0 outside the input), as ONNX's reference slices.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith
from xdsl.dialects.builtin import i64

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import INDEX, KernelBuilder, is_float, shape
from compilerkit.lowering.indexing import fail
from compilerkit.lowering.matmul import fill
from compilerkit.onnx_passes.single_node import node_label


def _zero(elem):
    return 0.0 if is_float(elem) else 0


def lower_max_unpool(b: KernelBuilder, op, ins):
    x, idx = ins[:2]
    xs = shape(x)
    if shape(idx) != xs:
        fail(op, "the shape of I", list(shape(idx)), f"that of X, {list(xs)}")
    elem = x.type.element_type
    out_dims = list(onnx_d.shape_of(op.results[0]))
    total = math.prod(out_dims)
    out = b.alloc(out_dims, elem)
    fill(b, out, _zero(elem))
    if math.prod(xs) == 0:
        return [out]
    flat = b.view(out, [total])
    with b.nest(xs) as ivs:
        raw = b.cast(b.load(idx, ivs), i64)
        ok = b.and_(b.cmpi("sge", raw, b.const(0, i64)), b.cmpi("slt", raw, b.const(total, i64)))
        b.add(krnl.CheckOp(ok, f"node {node_label(op)!r} (MaxUnpool): an index in I is out of "
                               f"range; valid indices are [0, {total - 1}]"))
    with b.nest(xs) as ivs:
        raw = b.cast(b.load(idx, ivs), i64)
        at = b.clamp(b.add(arith.IndexCastOp(raw, INDEX)), total)
        b.store(b.load(x, ivs), flat, [at])
    return [out]


def _const_ints(op, k, module, what):
    value = onnx_d.constant_value(op.operands[k], module)
    if value is None:
        raise NotImplementedError(f"{onnx_d.op_type(op)} with {what} computed at run time "
                                  "(it must be a constant)")
    return [int(v) for v in value.reshape(-1)]


def lower_col2im(b: KernelBuilder, op, ins, module=None):
    x = ins[0]
    n, cb, cols = shape(x)
    image = _const_ints(op, 1, module, "image_shape")
    block = _const_ints(op, 2, module, "block_shape")
    r = len(image)
    if len(block) != r or any(v < 1 for v in block + image):
        fail(op, "image_shape / block_shape", [image, block], "positive sizes of equal length")
    st = onnx_d.get_attr(op, "strides", None) or [1] * r
    dil = onnx_d.get_attr(op, "dilations", None) or [1] * r
    pads = onnx_d.get_attr(op, "pads", None) or [0] * (2 * r)
    grid = [(image[d] + pads[d] + pads[r + d] - dil[d] * (block[d] - 1) - 1) // st[d] + 1
            for d in range(r)]
    nb = math.prod(block)
    if cb % nb or math.prod(grid) != cols or min(grid) < 1:
        fail(op, "the input's shape", [n, cb, cols],
             f"[N, C * {nb}, {math.prod(grid)}] (block elements, sliding positions {grid})")
    c = cb // nb
    elem = x.type.element_type
    padded = [(grid[d] - 1) * st[d] + (block[d] - 1) * dil[d] + 1 for d in range(r)]
    scratch = b.alloc([n, c, *padded], elem)
    fill(b, scratch, _zero(elem))
    xv = b.view(x, [n, c, *block, *grid])
    with b.nest([n, c, *block, *grid]) as ivs:
        bi, li = ivs[2:2 + r], ivs[2 + r:]
        at = ivs[:2] + [b.affine([(li[d], st[d]), (bi[d], dil[d])]) for d in range(r)]
        b.store(b.add_(b.load(scratch, at), b.load(xv, ivs)), scratch, at)
    out = b.alloc([n, c, *image], elem)
    with b.nest([n, c, *image]) as ivs:
        src = ivs[:2] + [b.affine([(ivs[2 + d], 1)], pads[d]) for d in range(r)]
        # Image rows past the grid's reach (a large end pad) are 0; else no guard is needed.
        short = any(pads[d] + image[d] > padded[d] for d in range(r))
        v = b.guarded_load(scratch, src, _zero(elem)) if short else b.load(scratch, src)
        b.store(v, out, ivs)
    return [out]


def lower_center_crop_pad(b: KernelBuilder, op, ins):
    x = ins[0]
    xs = shape(x)
    out_dims = list(onnx_d.shape_of(op.results[0]))
    elem = x.type.element_type
    offsets = [(i - o) // 2 if i >= o else -((o - i) // 2) for i, o in zip(xs, out_dims,
                                                                           strict=True)]
    out = b.alloc(out_dims, elem)
    with b.nest(out_dims) as ivs:
        src = [b.affine([(iv, 1)], off) for iv, off in zip(ivs, offsets, strict=True)]
        v = b.guarded_load(x, src, _zero(elem)) if any(o > i for i, o in zip(
            xs, out_dims, strict=True)) else b.load(x, src)
        b.store(v, out, ivs)
    return [out]
