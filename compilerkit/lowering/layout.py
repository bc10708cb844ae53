"""Lowering of layout and index-pattern ops to Kernel IR: DepthToSpace, SpaceToDepth (both
modes, DCR and CRD), Trilu and Range.

DepthToSpace and SpaceToDepth are one copy nest each over the larger tensor's dims split by the
block size: the spatial dims H*b and W*b are viewed as [H, b] and [W, b] (a krnl.reshape, no
copy), so every index is affine and the nest can run in parallel. In DCR order the channel is
(i*b + j)*C + c, in CRD order c*b*b + i*b + j, with (i, j) the position inside the block, as
ONNX's reshape-transpose-reshape definitions give. Trilu keeps element (.., r, c) where
c - r >= k (upper) or c - r <= k (lower); k is read at run time. Range's length must be known at
compile time (shape inference needs constant start/limit/delta), its elements are computed as
start + i * delta, as numpy.arange and onnxruntime compute them.
"""

from __future__ import annotations

from xdsl.dialects.builtin import i64

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, shape
from compilerkit.lowering.indexing import fail


def _block_args(op, x):
    dims = shape(x)
    if len(dims) != 4:
        raise NotImplementedError(f"{onnx_d.op_type(op)} on a rank-{len(dims)} input "
                                  "(ONNX defines it for [N, C, H, W])")
    bs = onnx_d.get_attr(op, "blocksize")
    if bs is None or int(bs) < 1:
        fail(op, "attribute blocksize", bs, "a positive integer")
    mode = onnx_d.get_attr(op, "mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise NotImplementedError(f"{onnx_d.op_type(op)} mode {mode!r} (DCR or CRD)")
    return dims, int(bs), mode


def _channel(b: KernelBuilder, mode, c, i, j, bs: int, small_c: int):
    """The channel of the deep tensor holding block position (i, j) of channel c."""
    if mode == "DCR":
        return b.affine([(i, bs * small_c), (j, small_c), (c, 1)])
    return b.affine([(c, bs * bs), (i, bs), (j, 1)])


def lower_depth_to_space(b: KernelBuilder, op, ins):
    x = ins[0]
    (n, ch, h, w), bs, mode = _block_args(op, x)
    if ch % (bs * bs):
        fail(op, "the input's channel count", ch, f"a multiple of blocksize^2 = {bs * bs}")
    small_c = ch // (bs * bs)
    out = b.alloc(onnx_d.shape_of(op.results[0]), x.type.element_type)
    ov = b.view(out, [n, small_c, h, bs, w, bs])
    with b.nest([n, small_c, h, bs, w, bs]) as (nn, c, hh, i, ww, j):
        src = [nn, _channel(b, mode, c, i, j, bs, small_c), hh, ww]
        b.store(b.load(x, src), ov, [nn, c, hh, i, ww, j])
    return [out]


def lower_space_to_depth(b: KernelBuilder, op, ins):
    x = ins[0]
    (n, c_in, hb, wb), bs, mode = _block_args(op, x)
    if hb % bs or wb % bs:
        fail(op, "the input's [height, width]", [hb, wb], f"multiples of blocksize {bs}")
    h, w = hb // bs, wb // bs
    out = b.alloc(onnx_d.shape_of(op.results[0]), x.type.element_type)
    xv = b.view(x, [n, c_in, h, bs, w, bs])
    with b.nest([n, c_in, h, bs, w, bs]) as (nn, c, hh, i, ww, j):
        dst = [nn, _channel(b, mode, c, i, j, bs, c_in), hh, ww]
        b.store(b.load(xv, [nn, c, hh, i, ww, j]), out, dst)
    return [out]


def _scalar(b: KernelBuilder, mem):
    """The one element of a scalar (rank 0) or one-element tensor."""
    return b.load(mem, [b.index(0) for _ in shape(mem)])


def lower_trilu(b: KernelBuilder, op, ins):
    x = ins[0]
    dims = shape(x)
    if len(dims) < 2:
        raise NotImplementedError(f"Trilu on a rank-{len(dims)} input (rank 2 or more)")
    upper = onnx_d.get_attr(op, "upper", 1)
    elem = x.type.element_type
    out = b.alloc(dims, elem)
    k = b.cast(_scalar(b, ins[1]), i64) if len(ins) > 1 else b.const(0, i64)
    zero = b.const(0, elem)
    with b.nest(dims) as ivs:
        diff = b.cast(b.affine([(ivs[-1], 1), (ivs[-2], -1)]), i64)  # column - row
        keep = b.cmpi("sge" if upper else "sle", diff, k)
        b.store(b.select(keep, b.load(x, ivs), zero), out, ivs)
    return [out]


def lower_range(b: KernelBuilder, op, ins):
    start, _limit, delta = ins
    elem = op.results[0].type.element_type
    out = b.alloc(onnx_d.shape_of(op.results[0]), elem)
    s, d = _scalar(b, start), _scalar(b, delta)
    with b.nest(shape(out)) as (i,):
        b.store(b.add_(s, b.mul(b.cast(b.cast(i, i64), elem), d)), out, [i])
    return [out]
