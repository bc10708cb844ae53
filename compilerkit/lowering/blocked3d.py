"""PZnet-style 3-D Conv (`conv_algorithm="pznet"`): channel-blocked layout, direct schedule.

Lowers an onnx.Conv that `applies` accepts (3-D, f32, one group, stride 1, dilation 1,
kernel at most MAX_KERNEL per axis, constant weights and bias) to three parts, each a
Kernel IR nest tagged with a `layout` attribute where it changes layout:

    to_nchw8c     x [N, C, D, H, W] -> xb [N, ceil(C/8), D, H, W, 8], missing channels zero
    the Conv      on blocked buffers only (below)
    from_nchw8c   yb [N, ceil(K/8), D', H', W', 8] -> y [N, K, D', H', W'], padded lanes dropped

The Conv itself, after PZnet (Popovych, Zlateski et al., ZNNphi/PZnet: each layer compiled
with its sizes as constants, channels blocked by the SIMD width, statically scheduled direct
convolution): the weights are re-laid at compile time as [K/8, C/8, kd, kh, kw, 8 in, 8 out]
(zeros for the missing channels), the input is copied into zero-bordered blocked planes
when the Conv pads, then per output row (n, output block, od, oh): a row buffer [W', 8] is
set to the bias; per input block and tap row (cb, kd, kh) each tile of TILE_W output
positions x 8 output channels is updated with kw x 8 taps unrolled: every tap is one input
value broadcast against the 8-wide weight vector of that tap, so the innermost loop (the 8
output channels, static trip count, kept a loop so LLVM's loop vectoriser makes it one AVX2
vector) does one vector multiply-add per tap and position, and the TILE_W positions are
TILE_W independent accumulators sharing each weight load; the row goes out through the fused
activation. The row buffer is shared by the row loop's iterations, so the parallelize pass
leaves that loop serial (a parallel body loses `noalias`, and with it the vector loop):
this lowering is for one thread.

Between two pznet Convs the from/to pair is removed by the Kernel IR pass `fold-layout`
(krnl_passes/fold_layout.py), so in a chain of Convs the layout changes only at its edges.
Padded output lanes hold act(0), not zero: every consumer is a pznet Conv whose weights for
those input channels are zero, so they never reach a result.

Anything else (and Convs with more than MAX_CHANNELS input channels, where the direct
schedule's products cost more than Winograd's or im2col's) returns a reason from `applies`,
and conv_algorithm.choose gives it what "auto" picks (an existing lowering, never a
different answer).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import StringAttr, f32

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.krnl_passes.schedule import block
from compilerkit.lowering.builder import KernelBuilder, fill_outside, shape
from compilerkit.lowering.elementwise import activation
from compilerkit.onnx_passes.fuse_conv import fused_activation
from compilerkit.onnx_passes.single_node import node_label

LANES = 8  # channels per block: one AVX2 vector of f32
TILE_W = 8  # output positions along W updated together (independent accumulators)
MAX_KERNEL = 7  # largest kernel extent per axis (the unrolled body holds kw x 8 taps)
# Most input channels taken: the direct schedule does every product, and from 32 input
# channels on, Winograd F(4,3) (fewer products) and im2col ran faster on the 3-D U-Net's
# layers at 1 thread (64^3 U-Net, per layer: 4->16 ch 20 ms blocked / 24 im2col / 48
# Winograd, 16->32 117 / 128 / 122, 32->32 at 64^3 228 / 299 / 157).
MAX_CHANNELS = 16


def blocks(c: int) -> int:
    """Number of LANES-channel blocks holding c channels."""
    return -(-c // LANES)


def _module_of(op):
    module = op
    while module.parent_op() is not None:
        module = module.parent_op()
    return module


def applies(op) -> str | None:
    """None when this lowering takes the Conv `op` (ONNX IR), else why not."""
    ws = onnx_d.shape_of(op.operands[1])
    if len(ws) != 5:
        return f"{len(ws) - 2}-D (pznet lowers 3-D Convs)"
    if op.operands[0].type.element_type != f32:
        return "not an f32 Conv"
    if onnx_d.get_attr(op, "group", 1) != 1:
        return "grouped"
    if any(s != 1 for s in (onnx_d.get_attr(op, "strides", None) or [1])):
        return "strided"
    if any(d != 1 for d in (onnx_d.get_attr(op, "dilations", None) or [1])):
        return "dilated"
    if ws[1] > MAX_CHANNELS:
        return f"{ws[1]} input channels (direct up to {MAX_CHANNELS})"
    if max(ws[2:]) > MAX_KERNEL:
        return f"kernel {'x'.join(map(str, ws[2:]))} (at most {MAX_KERNEL} per axis)"
    module = _module_of(op)
    if onnx_d.constant_value(op.operands[1], module) is None:
        return "weights not constant"
    if len(op.operands) > 2 and not onnx_d.is_absent(op.operands[2]) and (
            onnx_d.constant_value(op.operands[2], module) is None):
        return "bias not constant"
    return None


def _tag(nest_op, kind: str):
    nest_op.attributes["layout"] = StringAttr(kind)


def _last_iterate(b: KernelBuilder):
    op = b.block.last_op
    assert isinstance(op, krnl.IterateOp)
    return op


def to_blocked(b: KernelBuilder, x):
    """xb [N, C/8, D, H, W, 8] from x [N, C, D, H, W] (channels past C read as zero)."""
    n, c, *sp = shape(x)
    elem = x.type.element_type
    xb = b.alloc([n, blocks(c), *sp, LANES], elem)
    with b.nest([n, blocks(c), *sp, LANES]) as ivs:
        nn, cb, pos, j = ivs[0], ivs[1], ivs[2:-1], ivs[-1]
        ch = b.affine([(cb, LANES), (j, 1)])
        if c % LANES:
            v = b.guarded_load(x, [nn, ch] + pos, 0.0)
        else:
            v = b.load(x, [nn, ch] + pos)
        b.store(v, xb, ivs)
    _tag(_last_iterate(b), krnl.LAYOUT_TO_BLOCKED)
    return xb


def from_blocked(b: KernelBuilder, yb, y):
    """y [N, K, D, H, W] from yb [N, K/8, D, H, W, 8]: one nest over the whole blocks, one
    over the channels of a last partial block (lanes past K are dropped)."""
    n, k, *sp = shape(y)
    full, rest = divmod(k, LANES)
    if full:
        with b.nest([n, full, *sp, LANES]) as ivs:
            nn, cb, pos, j = ivs[0], ivs[1], ivs[2:-1], ivs[-1]
            b.store(b.load(yb, ivs), y, [nn, b.affine([(cb, LANES), (j, 1)])] + pos)
        _tag(_last_iterate(b), krnl.LAYOUT_FROM_BLOCKED)
    if rest:
        with b.nest([n, *sp, rest]) as ivs:
            nn, pos, j = ivs[0], ivs[1:-1], ivs[-1]
            cb = b.index(full)
            b.store(b.load(yb, [nn, cb] + pos + [j]), y,
                    [nn, b.affine([(j, 1)], full * LANES)] + pos)
        _tag(_last_iterate(b), krnl.LAYOUT_FROM_BLOCKED)


def blocked_weights(w: np.ndarray) -> np.ndarray:
    """[K, C, kd, kh, kw] -> [K/8, C/8, kd, kh, kw, 8 in, 8 out], zero-filled."""
    k, c, *ks = w.shape
    wp = np.zeros((blocks(k) * LANES, blocks(c) * LANES, *ks), w.dtype)
    wp[:k, :c] = w
    wp = wp.reshape(blocks(k), LANES, blocks(c), LANES, *ks)
    return np.ascontiguousarray(wp.transpose(0, 2, 4, 5, 6, 3, 1))


def tile_width(ow: int) -> int:
    """The largest tile of at most TILE_W positions that divides the output row."""
    return max(t for t in range(1, min(TILE_W, ow) + 1) if ow % t == 0)


def blocked_conv(b: KernelBuilder, op, xb, pads):
    """The Conv `op` on the blocked input xb; returns the blocked output yb."""
    module = _module_of(op)
    w = onnx_d.constant_value(op.operands[1], module).astype(np.float32)
    k, c, *ks = w.shape
    out_dims = onnx_d.shape_of(op.results[0])
    n, out_sp = out_dims[0], list(out_dims[2:])
    in_sp = shape(xb)[2:-1]
    kb, cb_n = blocks(k), blocks(c)
    label = node_label(op)
    wb = b.constant(blocked_weights(w), module, f"pznet_w_{label}", f32)
    bias = np.zeros(kb * LANES, np.float32)
    if len(op.operands) > 2 and not onnx_d.is_absent(op.operands[2]):
        bias[:k] = onnx_d.constant_value(op.operands[2], module)
    bb = b.constant(bias.reshape(kb, LANES), module, f"pznet_b_{label}", f32)
    # The positions the taps read, zero-bordered when the Conv pads.
    ext = [o + kk - 1 for o, kk in zip(out_sp, ks, strict=True)]
    if any(pads) or ext != list(in_sp):
        xp = b.alloc([n, cb_n, *ext, LANES], f32)
        inner = [min(i, e - p) for i, e, p in zip(in_sp, ext, pads, strict=True)]
        # zeros only where the copy below does not write (builder.fill_outside)
        fill_outside(b, xp, [], [None, None] + [(p, p + i) for p, i in zip(
            pads, inner, strict=True)] + [None], 0.0)
        with b.nest([n, cb_n, *inner, LANES]) as ivs:
            at = [b.affine([(i, 1)], p) for i, p in zip(ivs[2:-1], pads, strict=True)]
            b.store(b.load(xb, ivs), xp, ivs[:2] + at + [ivs[-1]])
    else:
        xp = xb
    yb = b.alloc([n, kb, *out_sp, LANES], f32)
    t = tile_width(out_sp[2])
    ci_n = min(c, LANES)  # a single, partial input block: only its real channels
    ow_n = out_sp[2]
    # One output row of one block at a time, summed in `row` (L1-resident, and shared by
    # the row loop's iterations, which keeps that loop serial: parallel bodies lose
    # `noalias`, and with it the vectorised channel loop).
    row = b.alloc([ow_n, LANES], f32)
    act = fused_activation(op)
    with b.nest([n, kb, out_sp[0], out_sp[1]]) as (nn, ob, od, oh):
        with b.nest([ow_n, LANES]) as (ow, j):
            b.store(b.load(bb, [ob, j]), row, [ow, j])
        with b.nest([cb_n, ks[0], ks[1], ow_n // t, LANES]) as (cb, kd, kh, owt, j):
            zd, zh = b.affine([(od, 1), (kd, 1)]), b.affine([(oh, 1), (kh, 1)])
            ows = [b.affine([(owt, t)], p) for p in range(t)]
            accs = [b.load(row, [ow, j]) for ow in ows]
            for kw in range(ks[2]):
                ikw = b.index(kw)
                at = [b.affine([(owt, t)], p + kw) for p in range(t)]
                for ci in range(ci_n):
                    ici = b.index(ci)
                    wv = b.load(wb, [ob, cb, kd, kh, ikw, ici, j])
                    for p in range(t):
                        xv = b.load(xp, [nn, cb, zd, zh, at[p], ici])
                        accs[p] = b.add_(accs[p], b.mul(xv, wv))
            for ow, acc in zip(ows, accs, strict=True):
                b.store(acc, row, [ow, j])
        # The channel loop stays a loop (a tile of its whole length is no loop for
        # unroll-small to unroll): LLVM's loop vectoriser makes it one 8-wide vector;
        # unrolled, the SLP vectoriser packed it worse (3x slower, measured).
        block(_last_iterate(b), 4, LANES)
        with b.nest([ow_n, LANES]) as (ow, j):
            v = b.load(row, [ow, j])
            v = activation(b, v, *act) if act is not None else v
            b.store(v, yb, [nn, ob, od, oh, ow, j])
    return yb


def lower_blocked(b: KernelBuilder, op, ins, pads):
    """Lower the Conv `op` (which `applies` accepted; `pads` its begin pads): to blocked,
    the blocked Conv, back; returns the NCDHW output buffer."""
    xb = to_blocked(b, ins[0])
    yb = blocked_conv(b, op, xb, list(pads))
    y = b.alloc(onnx_d.shape_of(op.results[0]), f32)
    from_blocked(b, yb, y)
    return y


__all__ = ["applies", "lower_blocked", "to_blocked", "from_blocked", "blocked_weights",
           "blocks", "tile_width", "LANES"]
