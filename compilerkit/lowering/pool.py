"""Lowering of MaxPool / AveragePool (1-D/2-D/3-D: pads, auto_pad, strides, dilations,
ceil_mode, count_include_pad) and GlobalAveragePool / GlobalMaxPool to Kernel IR.

MaxPool / AveragePool read x in place, its output cut into regions (`_pool_peeled`):

- Per axis, the output positions fall into runs whose windows hold the same taps inside the
  input (`_segments`: for a 3 x 3 / 2 pool padded by 1, position 0 and the rest); a region
  is one run per axis, and its values fold just its taps, unrolled in kernel order. Per
  (batch entry, channel) plane, a nest per run of rows holds a nest per run of columns (a
  border column: straight code in the row's loop). Padding is never stored nor read, so
  nothing is copied, filled or guarded per call (a padded pool used to rewrite a scratch
  copy of x, border first, every call). A target without vectors (the GPU) gets one nest per
  region over every plane instead, to map whole.
- The innermost loop walks an output row, its loads consecutive (stride 1) or evenly spaced
  (stride s, which LLVM vectorises with shuffles), so it vectorises across output positions;
  a gap-free row is cut into a multiple of TAIL plus a TAIL-long block at its end that
  recomputes the positions before it, so no scalar remainder is left (`_row_pieces`).
- A float MaxPool folds its taps as v = t if t > v else v, from the first tap
  (`_window`): one vmaxps per tap, where maxNum took three instructions. That is
  maxNum's value wherever the first tap is not NaN, so each (batch entry, channel) plane
  sums what it stores, and where the sum is NaN the plane is redone with maxNum under an
  scf.if (a rare branch: a NaN in the output, or +inf + -inf). loopnest leaves that node to
  LLVM; the GPU folds with maxNum.
  Measured at 1 thread (f32, 2-vCPU AVX-512 Xeon, shared; best of 50-80, interleaved):
  SqueezeNet's MaxPool 3 x 3 / 2 on 64 x 111 x 111 0.26 -> 0.165 ms, on 128 x 55 x 55
  0.11 -> 0.075, on 256 x 27 x 27 0.12 -> 0.066; ResNet-50's stem (pads 1, 64 x 112 x 112)
  0.55 -> 0.18 ms; AveragePool 3 x 3 / 1 pads 1 on 64 x 56 x 56 0.12 -> 0.08 ms.
  Measured and dropped: a column-phase copy of each plane, so that stride-2 taps load
  consecutive floats (the copy cost more than the shuffles it saves: 64 x 111 x 111 0.15 ->
  0.23 ms); an exact fold with no repair (a max and a min per tap, NaN where the min stays
  above the max: 1.3-1.7x slower); a separable max (each row's taps first, through a buffer:
  0.20 ms against the one-pass fast fold's 0.15 on 64 x 111 x 111, and a fast partial fold
  would hide a NaN from the repair's check).

Every output takes the max of (or sums) its taps in the kernel's row-major order starting
from the identity (maxNum's NaN, which a NaN tap or padding never displaces; 0.0, to which
padding would add 0.0): skipping a padding tap changes no bit, so the results are bit for
bit those of a plain loop over the padded window. The fast fold's tie keeps the earlier tap
(-0.0 or +0.0 as the window's first maximum, on every target; in a NaN plane's repair,
maxNum's pick between the two is the target's: the earlier one on x86). MaxPool folds with
maxNum, which skips a NaN: as ONNX's reference evaluator and onnxruntime's 1D kernel do (its
2D/3D kernels give NaN exactly when a window's last tap is NaN: an artifact of tap order); a
window with no number in it stays NaN.

The divisor is a constant buffer computed here (window_counts), as onnxruntime counts: taps that
land in the input, or in the padded input when count_include_pad (a dilated window counts its
taps, not its span). The output shape (ceil_mode) comes from shape inference, which drops
windows that would start in the right padding (shape_inference.pool_output_size).

A window of more than MAX_TAPS taps, or an output of more than MAX_REGIONS regions, takes the
padded scratch instead (`_pool_padded`, Conv's helpers): x copied into planes whose border
holds the identity, the trailing kernel axes unrolled, the leading ones loops outside the
output positions with the running value in the output buffer.

GlobalAveragePool / GlobalMaxPool reduce each (batch entry, channel) plane, read as one flat
axis: a plane of at most MAX_TAPS elements (ResNet's 7 x 7) is summed unrolled into one value,
in order; a larger one is folded into LANES running values, so the loop vectorises
(`_global_pool_lanes`).
"""

from __future__ import annotations

import contextlib
import itertools
import math

import numpy as np

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering import conv as conv_
from compilerkit.lowering.builder import KernelBuilder, is_float, memref_type, shape
from compilerkit.lowering.conv import MAX_TAPS, conv_geometry
from compilerkit.lowering.matmul import fill

# Running values of a global pool over a plane of more than MAX_TAPS elements (two AVX2
# vectors). Planes of 65 to 255 elements were summed in unrolled chunks (the largest divisor of
# the plane up to MAX_TAPS) onto the running value, one add waiting for the last: 1 thread,
# us, chunks -> lanes: 240 channels of 14 x 14 (EfficientNet-B0's squeeze-and-excite) 17.5 ->
# 12.3 (onnxruntime 14.5), 480 of 14 x 14 28.8 -> 17.9, 512 of 12 x 12 25.5 -> 16.0, 512 of
# 9 x 9 17.3 -> 13.5 (onnxruntime 19.4, 13.8); and each chunk was LLVM IR of its own (a
# 14 x 14 plane: 1,800 lines, EfficientNet-B0's compile 2.7 -> 2.4 s without them). Planes of
# up to MAX_TAPS (7 x 7) ran the same either way: they stay one unrolled sum.
LANES = 16
# Positions per vector block of a row (`_row_pieces`): LLVM's vectoriser takes 16 as two 8-lane
# iterations with no remainder (a loop of 8 it leaves scalar, as depthwise.TAIL says).
TAIL = 16
# Most regions of the output (runs of positions with the same taps, per axis, multiplied) that
# get a nest each: 9 for a padded 2-D pool, 27 for 3-D; more fall back to the padded scratch.
MAX_REGIONS = 27
# Runs of at most this many positions on the last axis (border columns) are straight code in
# their row's loop, not a loop of their own.
SHORT_RUN = 2

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
    """MaxPool / AveragePool (module docstring): the peeled schedule (`_pool_peeled`) when the
    window has at most MAX_TAPS taps and the output at most MAX_REGIONS regions, else the
    padded scratch (`_pool_padded`)."""
    kind = onnx_d.op_type(op)
    is_max = kind == "MaxPool"
    if len(op.results) > 1 and op.results[1].uses:
        raise NotImplementedError("MaxPool's Indices output is not supported")
    x = ins[0]
    out_dims = list(onnx_d.shape_of(op.results[0]))
    k_sp = onnx_d.get_attr(op, "kernel_shape")
    in_sp, out_sp = list(shape(x)[2:]), out_dims[2:]
    st, dil, pads = conv_geometry(op, in_sp, k_sp, out_sp)
    elem = x.type.element_type
    out = b.alloc(out_dims, elem)
    if math.prod(out_dims) == 0:
        return [out]
    count = None
    if not is_max:
        # Every window's element count is known at compile time: a constant buffer over the
        # output positions (exact for dilations and ceil_mode windows that hang over the end).
        cnt = window_counts(op, in_sp, out_sp, st, dil, pads)
        name = f"pool_count_{next(_COUNTS)}"
        count = b.add(krnl.GlobalOp(name, onnx_d.dense_attr(
            cnt.astype(onnx_d.numpy_dtype(elem)), module, name), memref_type(cnt.shape, elem)))
    segments = [_segments(out_sp[d], k_sp[d], st[d], dil[d], pads[d], in_sp[d])
                for d in range(len(k_sp))]
    if math.prod(k_sp) <= MAX_TAPS and math.prod(len(s) for s in segments) <= MAX_REGIONS:
        _pool_peeled(b, x, out, k_sp, segments, st, dil, pads, is_max, count)
    else:
        _pool_padded(b, x, out, k_sp, st, dil, pads, is_max, count)
    return [out]


def _segments(n_out: int, k: int, s: int, d: int, pad: int, size: int):
    """The output positions of one axis in runs whose windows hold the same taps inside the
    input: [(lo, hi, taps)], taps the kernel positions t with o * s + t * d - pad in [0, size)
    for every o in [lo, hi)."""
    runs = []
    for o in range(n_out):
        taps = tuple(t for t in range(k) if 0 <= o * s + t * d - pad < size)
        if runs and runs[-1][2] == taps:
            runs[-1] = (runs[-1][0], o + 1, taps)
        else:
            runs.append((o, o + 1, taps))
    return runs


def _pool_peeled(b: KernelBuilder, x, out, k_sp, segments, st, dil, pads, is_max, count):
    """The pool read from x in place, its output cut into regions (one run of `_segments` per
    axis) whose windows hold the same taps, each region's values folding just those taps, in
    kernel order: nothing is copied, no padding is stored and no tap is guarded (skipping a
    padding tap is exact: maxNum skips the NaN it was read as, and x + 0.0 is x for a sum
    that starts at +0.0, which never becomes -0.0; only the rare `_repair` guards its
    loads). On CPUs per (batch entry, channel) plane
    (`one_plane`), so the threads share the channel loop; a float MaxPool folds fast
    (`_window`), sums what it stores, and redoes the plane with maxNum where that may differ:
    where the sum is NaN (a NaN stored; also +inf + -inf, a rare false alarm that only costs
    time)."""
    xs = shape(x)
    out_sp = shape(out)[2:]
    elem = x.type.element_type
    regions = list(itertools.product(*segments))
    fast = is_max and is_float(elem)
    # the plane's running sums, numbered by the innermost loop around each value (a sum per
    # position of the loop that vectorises; one running value would be a chain through
    # memory), one set per plane so that threads share none
    width = max(out_sp)
    sums = b.alloc([xs[0], xs[1], width], elem) if fast else None

    def emit(at, pos, taps, exact, key):
        """The window of output at + pos folded and stored; on the fast path also added into
        the plane's running sum number `key`."""
        fold = "fast" if not exact else "maxnum" if is_max else "add"
        v = _window(b, x, at + pos, taps, fold, st, dil, pads)
        if count is not None:
            v = b.binary("div", v, b.load(count, pos))
        b.store(v, out, at + pos)
        if not exact:
            b.store(b.binary("add", b.load(sums, at + [key]), v), sums, at + [key])

    def every_plane():
        """One nest per region over (n, c, the region's positions), each mapped whole onto
        the GPU's threads."""
        for region in regions:
            taps = list(itertools.product(*(t for _, _, t in region)))
            with b.nest(list(xs[:2]) + [(lo, hi) for lo, hi, _ in region]) as ivs:
                emit(ivs[:2], ivs[2:], taps, True, None)

    def one_plane(nn, c, exact):
        """Plane (nn, c) by rows: one nest per run of the leading axes, holding a nest per
        run of the last axis; a short run (a border column, at most SHORT_RUN positions) a
        nest per position, which unroll-small makes straight code in the row's loop. A
        border column as a nest of its own over the rows would be a loop down a column, which
        LLVM vectorised with gathers (ResNet-50's stem pool: 0.21 -> 0.18 ms without). A value
        is added to the running sum numbered by the innermost loop around it."""
        for lead in itertools.product(*segments[:-1]):
            with (b.nest([(lo, hi) for lo, hi, _ in lead]) if lead
                  else contextlib.nullcontext([])) as lpos:
                for lo, hi, cols in segments[-1]:
                    taps = list(itertools.product(*(t for _, _, t in lead), cols))
                    if hi - lo <= SHORT_RUN < out_sp[-1]:  # a nest per position
                        for o in range(lo, hi):
                            with b.nest([(o, o + 1)]) as (oo,):
                                emit([nn, c], lpos + [oo], taps, exact,
                                     lpos[-1] if lpos else oo)
                        continue
                    last = [t * dil[-1] - pads[-1] for t in cols]
                    for ranges in _row_pieces([(lo, hi)], st[-1], last):
                        with b.nest(ranges) as (o,):
                            emit([nn, c], lpos + [o], taps, exact, o)

    if b.lanes == 1:  # no vectors (the GPU): every nest over all planes, to map whole
        every_plane()
        return
    if not fast:
        with b.nest(xs[:2]) as (nn, c):
            one_plane(nn, c, exact=True)
        return
    with b.nest(xs[:2]) as (nn, c):
        with b.nest([width]) as (j,):
            b.store(b.const(0.0, elem), sums, [nn, c, j])
        one_plane(nn, c, exact=False)
        # a tree, not a chain of dependent adds: any order finds a NaN
        parts = [b.load(sums, [nn, c, b.index(j)]) for j in range(width)]
        while len(parts) > 1:
            parts = [b.binary("add", parts[i], parts[i + 1]) if i + 1 < len(parts)
                     else parts[i] for i in range(0, len(parts), 2)]
        with b.if_then(b.cmpf("uno", parts[0], parts[0])):
            _repair(b, x, out, nn, c, k_sp, segments, st, dil, pads)


def _repair(b: KernelBuilder, x, out, nn, c, k_sp, segments, st, dil, pads):
    """Plane (nn, c) of a float MaxPool the plain way: per output, maxNum from NaN over every
    tap in kernel order, a tap outside x read as NaN (a guarded load on the axes with
    padding), which maxNum skips: the values of `_window`'s "maxnum" fold over the region's
    taps. One nest, the least code: it runs only where a plane holds a NaN."""
    elem = x.type.element_type
    in_sp = shape(x)[2:]
    guarded = [any(len(t) < k for _, _, t in runs) for runs, k in zip(segments, k_sp,
                                                                       strict=True)]
    nan = b.const(math.nan, elem)
    with b.nest(list(shape(out)[2:])) as pos:
        index = _tap_index(b, pos, st, dil, pads)
        made = {}

        def tap_at(d, k):
            """(clamped index, i1 inside x or None) on axis d for kernel position k."""
            if (d, k) not in made:
                i = index(d, k)
                made[d, k] = ((b.clamp(i, in_sp[d]), b.in_range([(i, in_sp[d])]))
                              if guarded[d] else (i, None))
            return made[d, k]

        v = nan
        for ks in itertools.product(*(range(k) for k in k_sp)):
            at, inside = zip(*(tap_at(d, k) for d, k in enumerate(ks)), strict=True)
            t = b.load(x, [nn, c] + list(at))
            for ok in (i for i in inside if i is not None):
                t = b.select(ok, t, nan)
            v = b.binary("maxnum", v, t)
        b.store(v, out, [nn, c] + pos)


def _row_pieces(ranges, s: int, offsets):
    """A region's nest ranges split so that its innermost loop vectorises with no scalar
    remainder: a length that is a multiple of TAIL, then one TAIL-long nest ending at the
    range's end that recomputes the few positions before it (each stores the same value
    again). Only where the loads leave no gap (stride 1, or taps at `offsets` covering whole
    stride-s groups): for a 3-tap stride-2 row LLVM keeps a scalar epilogue anyway, so that
    the last wide load never reads past the last tap, and the split measured slower."""
    lo, hi = ranges[-1]
    n = hi - lo
    whole = (s == 1 or not offsets  # (no tap: nothing is read)
             or offsets == list(range(offsets[0], offsets[0] + len(offsets)))
             and len(offsets) % s == 0)
    if not whole or n < TAIL or n % TAIL == 0:
        return [ranges]
    main = n - n % TAIL
    return [ranges[:-1] + [(lo, lo + main)], ranges[:-1] + [(hi - TAIL, hi)]]


def _identity(elem, is_max: bool):
    """The fold's start: maxNum's NaN (a window of no number stays NaN), an integer type's
    least value (onnxruntime's start for an integer MaxPool), or 0 for a sum."""
    if not is_max:
        return 0.0
    return math.nan if is_float(elem) else int(np.iinfo(onnx_d.numpy_dtype(elem)).min)


def _tap_index(b: KernelBuilder, pos, st, dil, pads):
    """index(d, k): the input position o * s + k * d - pad on axis d of kernel position k for
    output positions `pos`, made once per (axis, k) and shared by the window's taps (a 3 x 3
    window: 6 index values, not 18: a smaller body for the lowering to build and LLVM to
    optimise)."""
    made = {}

    def index(d, k):
        if (d, k) not in made:
            made[d, k] = b.affine([(pos[d], st[d])], k * dil[d] - pads[d])
        return made[d, k]
    return index


def _window(b: KernelBuilder, x, at, taps, fold: str, st, dil, pads):
    """The taps of the window of output `at` ([n, c, positions...]) folded in kernel order:
    `taps` the kernel positions, each read from x at o * s + k * d - pad. fold "add": a sum
    from 0.0; "maxnum": maxNum from `_identity` (NaN: a window with no number stays NaN);
    "fast": v = t if t > v else v from the first tap, one vmaxps per tap on x86 where
    maxNum takes three (it checks v for NaN too). "fast" is maxNum's value
    (a tie keeps the earlier tap, so -0.0 and +0.0 come out the same; a NaN tap is skipped)
    except where the first tap is NaN: v then stays NaN, which the caller looks for. A window
    with no tap (all padding) is NaN, as maxNum's."""
    elem = x.type.element_type
    nn, c, pos = at[0], at[1], at[2:]
    index = _tap_index(b, pos, st, dil, pads)

    def load(ks):
        return b.load(x, [nn, c] + [index(d, k) for d, k in enumerate(ks)])

    if fold == "fast":
        if not taps:
            return b.const(math.nan, elem)
        v = load(taps[0])
        for ks in taps[1:]:
            t = load(ks)
            v = b.select(b.cmpf("ogt", t, v), t, v)
        return v
    v = b.const(_identity(elem, fold == "maxnum"), elem)
    for ks in taps:
        v = b.binary(fold, v, load(ks))
    return v


def _pool_padded(b: KernelBuilder, x, out, k_sp, st, dil, pads, is_max, count):
    """A window of more than MAX_TAPS taps, or an output of more than MAX_REGIONS regions: the
    input planes of each batch entry copied into a scratch buffer [1, C, padded spatial...]
    whose border holds the padding value (`conv._scratch`, `conv._copy_in`), every tap read
    from it unguarded; the trailing kernel axes unrolled (at most MAX_TAPS taps), the leading
    ones loops outside the output positions, the value running through the output."""
    out_dims = list(shape(out))
    out_sp = out_dims[2:]
    win = _Window(x, out_dims, k_sp, st, dil, pads)
    r, elem = win.r, win.elem
    identity = _identity(elem, is_max)
    fold = "maxnum" if is_max else "add"
    scratch = conv_._scratch(b, win)  # [1, C, padded spatial...], or None: nothing padded
    n_unroll = _split_unrolled(k_sp)
    looped, unrolled = list(k_sp[:r - n_unroll]), list(k_sp[r - n_unroll:])

    def window(nn, c, pos, kl, acc):
        """acc folded with the taps of the unrolled kernel axes, in kernel order: the input at
        o * s + k * d (padded coordinates) for the kernel position kl (loop variables, leading
        axes) + ku (numbers, trailing axes)."""
        for ku in itertools.product(*(range(k) for k in unrolled)):
            at = [b.affine([(p, st[d]), (kl[d], dil[d])]) if d < len(kl)
                  else b.affine([(p, st[d])], ku[d - len(kl)] * dil[d])
                  for d, p in enumerate(pos)]
            v = (b.load(scratch, [b.index(0), c] + at) if scratch is not None
                 else b.load(x, [nn, c] + at))  # nothing padded: every pad is 0
            acc = b.binary(fold, acc, v)
        return acc

    with b.nest([win.n]) as (nn,):
        if scratch is not None:
            conv_._copy_in(b, win, scratch, nn, b.index(0), identity)  # all C planes: one group
        # The leading kernel axes loop outside the output positions, the value runs through
        # out[nn] (still in kernel order per output).
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

    def finish(acc):
        return acc if is_max else b.binary("div", acc, b.const(float(size), elem))

    if size > MAX_TAPS:
        return _global_pool_lanes(b, flat, res, out, fold, identity, finish)
    with b.nest([n, c]) as ivs:  # the whole plane, unrolled, in order
        acc = b.const(identity, elem)
        for t in range(size):
            acc = b.binary(fold, acc, b.load(flat, ivs + [b.index(t)]))
        b.store(finish(acc), res, ivs)
    return [out]


def _global_pool_lanes(b: KernelBuilder, flat, res, out, fold, identity, finish):
    """A large plane (more than MAX_TAPS elements) folded into LANES running values: value j
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
