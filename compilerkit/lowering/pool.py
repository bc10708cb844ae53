"""Lowering of MaxPool / AveragePool (1-D/2-D/3-D: pads, auto_pad, strides, dilations,
ceil_mode, count_include_pad) and GlobalAveragePool / GlobalMaxPool to Kernel IR.

Pooling is Conv's direct schedule without weights (conv.py), and shares its helpers:

- A padded pool first copies the input planes of each batch entry into a scratch buffer
  [1, C, padded spatial...] (one group) whose border holds the padding value, 0 or -inf
  (`conv._scratch`, `conv._copy_in`), so every tap reads without a guard. The scratch is
  indexed by channel, so the copy and the pooling nests can run their channel loop on threads.
  A padded MaxPool with a stride on the last axis splits that axis by column phase instead
  (`conv._phase_scratch`, `conv._copy_phases`), so its taps read consecutive elements too.
- One nest over (channel, output positions) per batch entry after the copy (over the whole
  output when nothing is padded and x is read in place), the last output axis innermost: its
  body folds the window's taps, unrolled in kernel order, into one value that starts at the
  reduction's identity (-inf, or 0), divides it by the window's element count (AveragePool)
  and stores it once. The innermost loop walks an output row, whose loads are consecutive
  (stride 1) or evenly spaced (stride s), so LLVM vectorises it across output positions.
- A window of more than MAX_TAPS taps unrolls only its trailing kernel axes; the leading ones
  become loops outside the output positions, and the running value lives in the output buffer.

Every output sums (or takes the max of) its taps in the kernel's row-major order starting from
the identity, padding included (padding adds 0.0 or maxes with -inf), as before the scratch
buffer: the results are bit for bit those of a plain loop over the window.
The divisor is a constant buffer computed here (window_counts), as onnxruntime counts: taps that
land in the input, or in the padded input when count_include_pad (a dilated window counts its
taps, not its span). The output shape (ceil_mode) comes from shape inference, which drops
windows that would start in the right padding (shape_inference.pool_output_size).

GlobalAveragePool / GlobalMaxPool reduce each (batch entry, channel) plane, read as one flat
axis, in order: a chunk of up to MAX_TAPS consecutive elements is summed unrolled into a value
(the whole plane at once for ResNet's 7 x 7), chunks accumulate in the output. Planes of at
least LANE_MIN elements are folded into LANES running values instead, so the loop vectorises
(`_global_pool_lanes`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering import conv as conv_
from compilerkit.lowering.builder import KernelBuilder, is_float, memref_type, shape
from compilerkit.lowering.conv import MAX_TAPS, conv_geometry
from compilerkit.lowering.matmul import fill

LANES = 16  # running values of a global pool over a large plane (two AVX2 vectors)
LANE_MIN = 256  # planes at least this large use them (14 x 14 = 196 measured faster without)

_COUNTS = itertools.count()


class _Window(conv_._Conv):
    """A pool's sizes in the names Conv's helpers read (`_scratch`, `_copy_in`, `reach`,
    `guarded`): one group holding all C channels, no weights."""

    def __init__(self, x, out_dims, k_sp, st, dil, pads):
        xs = shape(x)
        self.x, self.w, self.bias, self.act = x, None, None, None
        self.n, self.c_in, self.in_sp = xs[0], xs[1], list(xs[2:])
        self.oc, self.cg, self.k_sp = xs[1], xs[1], list(k_sp)
        self.out_sp = list(out_dims[2:])
        self.groups, self.ocg = 1, xs[1]
        self.st, self.dil, self.pads = list(st), list(dil), list(pads)
        self.r = len(k_sp)
        self.elem = x.type.element_type


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


def _split_unrolled(dims) -> int:
    """How many trailing axes of `dims` to unroll: as many as keep the product <= MAX_TAPS
    (at least one; the leading axes become loops)."""
    n, prod = 0, 1
    for d in reversed(dims):
        if n and prod * d > MAX_TAPS:
            break
        n, prod = n + 1, prod * d
    return n


def lower_pool(b: KernelBuilder, op, ins, module=None):
    kind = onnx_d.op_type(op)
    is_max = kind == "MaxPool"
    if len(op.results) > 1 and op.results[1].uses:
        raise NotImplementedError("MaxPool's Indices output is not supported")
    x = ins[0]
    out_dims = list(onnx_d.shape_of(op.results[0]))
    k_sp = onnx_d.get_attr(op, "kernel_shape")
    in_sp, out_sp = list(shape(x)[2:]), out_dims[2:]
    st, dil, pads = conv_geometry(op, in_sp, k_sp, out_sp)
    win = _Window(x, out_dims, k_sp, st, dil, pads)
    r, elem = win.r, win.elem
    # Taps fold with maxNum, which skips a NaN: as ONNX's reference evaluator and onnxruntime's
    # 1D kernel do (its 2D/3D kernels give NaN exactly when a window's last tap is NaN: an
    # artifact of tap order). Its identity is NaN, so padding (read as NaN) is skipped too and
    # a window with no number in it stays NaN.
    identity = (math.nan if is_float(elem) else -math.inf) if is_max else 0.0
    fold = "maxnum" if is_max else "add"
    out = b.alloc(out_dims, elem)
    if math.prod(out_dims) == 0:
        return [out]
    # A padded strided MaxPool copies its input anyway: into column phases.
    phased = is_max and st[-1] > 1 and any(win.guarded(d) for d in range(r))
    if phased:
        scratch = conv_._phase_scratch(b, win)
    else:
        scratch = conv_._scratch(b, win)  # [1, C, padded spatial...]
    count = None
    if not is_max:
        # Every window's element count is known at compile time: a constant buffer over the
        # output positions (exact for dilations and ceil_mode windows that hang over the end).
        cnt = window_counts(op, in_sp, out_sp, st, dil, pads)
        name = f"pool_count_{next(_COUNTS)}"
        count = b.add(krnl.GlobalOp(name, onnx_d.dense_attr(
            cnt.astype(onnx_d.numpy_dtype(elem)), module, name), memref_type(cnt.shape, elem)))
    n_unroll = _split_unrolled(k_sp)
    looped, unrolled = list(k_sp[:r - n_unroll]), list(k_sp[r - n_unroll:])
    def tap(nn, c, pos, kl, ku):
        """The input at o * s + k * d (padded coordinates) for the kernel position given by kl
        (loop variables, leading axes) and ku (numbers, trailing axes)."""
        at = []
        for d, p in enumerate(pos):
            if d < len(kl):
                at.append(b.affine([(p, st[d]), (kl[d], dil[d])]))
            elif phased and d == r - 1:  # column o*s + k*d: phase (k*d) % s, o + (k*d) // s
                kd = ku[d - len(kl)] * dil[d]
                at += [b.index(kd % st[d]), b.affine([(p, 1)], kd // st[d])]
            else:
                at.append(b.affine([(p, st[d])], ku[d - len(kl)] * dil[d]))
        if phased:
            return b.load(scratch, [b.index(0), c] + at)
        if scratch is not None:
            return b.load(scratch, [b.index(0), c] + at)
        return b.load(x, [nn, c] + at)  # nothing padded: every pad is 0

    def window(nn, c, pos, kl, acc):
        """acc folded with the taps of the unrolled kernel axes, in kernel order."""
        for ku in itertools.product(*(range(k) for k in unrolled)):
            acc = b.binary(fold, acc, tap(nn, c, pos, kl, ku))
        return acc

    def pool_planes(nn, c, pos):
        acc = window(nn, c, pos, [], b.const(identity, elem))
        if count is not None:
            acc = b.binary("div", acc, b.load(count, pos))
        b.store(acc, out, [nn, c] + pos)

    if scratch is None and not looped:  # x read in place: one nest over the whole output
        with b.nest(out_dims) as ivs:
            pool_planes(ivs[0], ivs[1], ivs[2:])
        return [out]
    with b.nest([win.n]) as (nn,):
        if phased:
            conv_._copy_phases(b, win, scratch, nn, b.index(0), identity)
        elif scratch is not None:
            conv_._copy_in(b, win, scratch, nn, b.index(0), identity)  # all C planes: one group
        if not looped:
            with b.nest([win.c_in] + out_sp) as ivs:
                pool_planes(nn, ivs[0], ivs[1:])
            return [out]
        # A big window: the leading kernel axes loop outside the output positions, the value
        # runs through out[nn] (still in kernel order per output).
        with b.nest([win.c_in] + out_sp) as ivs:
            b.store(b.const(identity, elem), out, [nn] + ivs)
        with b.nest([win.c_in] + looped + out_sp) as ivs:
            c, kl, pos = ivs[0], ivs[1:1 + len(looped)], ivs[1 + len(looped):]
            at = [nn, c] + pos
            b.store(window(nn, c, pos, kl, b.load(out, at)), out, at)
        if count is not None:
            with b.nest([win.c_in] + out_sp) as ivs:
                at = [nn] + ivs
                b.store(b.binary("div", b.load(out, at), b.load(count, ivs[1:])), out, at)
    return [out]


def lower_global_pool(b: KernelBuilder, op, ins):
    is_max = onnx_d.op_type(op) == "GlobalMaxPool"
    x = ins[0]
    xs = shape(x)
    elem = op.results[0].type.element_type
    out_dims = onnx_d.shape_of(op.results[0])
    out = b.alloc(out_dims, elem)
    n, c, size = xs[0], xs[1], math.prod(xs[2:])
    if n * c == 0:
        return [out]
    identity = -math.inf if is_max else 0.0
    fold = "max" if is_max else "add"
    flat = b.view(x, [n, c, size])
    res = b.view(out, [n, c])
    # chunk: the largest divisor of the plane size up to MAX_TAPS, summed unrolled
    chunk = max((d for d in range(1, min(size, MAX_TAPS) + 1) if size % d == 0), default=1)

    def fold_chunk(ivs, base, acc):
        for t in range(chunk):
            at = b.affine([(base, chunk)], t) if base is not None else b.index(t)
            acc = b.binary(fold, acc, b.load(flat, ivs + [at]))
        return acc

    def finish(acc):
        return acc if is_max else b.binary("div", acc, b.const(float(size), elem))

    if size == 0 or chunk == size:
        with b.nest([n, c]) as ivs:
            b.store(finish(fold_chunk(ivs, None, b.const(identity, elem))), res, ivs)
        return [out]
    if size >= LANE_MIN:
        return _global_pool_lanes(b, flat, res, out, fold, identity, finish)
    fill(b, res, identity)
    with b.nest([n, c, size // chunk]) as ivs:
        b.store(fold_chunk(ivs[:2], ivs[2], b.load(res, ivs[:2])), res, ivs[:2])
    if not is_max:
        with b.nest([n, c]) as ivs:
            b.store(finish(b.load(res, ivs)), res, ivs)
    return [out]


def _global_pool_lanes(b: KernelBuilder, flat, res, out, fold, identity, finish):
    """A large plane (at least LANE_MIN elements) folded into LANES running values: value j
    takes elements j, j + LANES, j + 2 * LANES, ... in order (the last, partial row of LANES
    into the first values), then the LANES values are folded in order. The loop over a row
    of LANES is consecutive and independent, so it vectorises: one sum of the whole plane in
    order was one add per element, each waiting for the last (ResNet-sized planes: 3x slower
    than onnxruntime). A fixed order, the same on every target and thread count."""
    n, c, size = shape(flat)
    rows, tail = divmod(size, LANES)
    acc = b.alloc([n, c, LANES], flat.type.element_type)
    fill(b, acc, identity)
    with b.nest([n, c, rows, LANES]) as (i, ch, r, j):
        at = [i, ch, j]
        v = b.load(flat, [i, ch, b.affine([(r, LANES), (j, 1)])])
        b.store(b.binary(fold, b.load(acc, at), v), acc, at)
    with b.nest([n, c]) as (i, ch):
        total = None
        for j in range(LANES):
            lane = b.load(acc, [i, ch, b.index(j)])
            if j < tail:
                lane = b.binary(fold, lane, b.load(flat, [i, ch, b.index(rows * LANES + j)]))
            total = lane if total is None else b.binary(fold, total, lane)
        b.store(finish(total), res, [i, ch])
    return [out]
