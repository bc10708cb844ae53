"""Conv's tap schedule: out^T = X^T W^T with X^T read in place from the zero-bordered input
planes, one product per panel of output rows, no im2col.

Stride 1 makes output position o read input position o + k*d for kernel tap k. Over the padded
planes laid out flat (position q = sum o_d * pitch_d, pitch the padded strides), tap k is then a
fixed offset, tap_k = sum k_d * d_d * pitch_d, and channel c a fixed plane further: the GEMM

    t[q, oc] = bias[oc] + sum over (c, k) of planes[c * plane + tap_k + q] * W[oc, c, k]

has A = the planes themselves, row r at position q0 + r (row stride 1), column (c, k) at
c * plane + tap_k: krnl.matmul's `a_taps`, which the micro-kernel reads through a table of
column offsets, one entry per k shared by its 8 rows' broadcasts. B = W^T, stored in strips of
the kernel's width (conv.py's `_columns_weights`) and read in place. A panel's rows are whole
rows of the padded grid: positions past an axis's output extent (the padding's columns) are
computed and thrown away; the planes get one spare row so that the last panel's throw-away
positions read inside them. Convs of 3 or more spatial axes (EXACT_MIN_AXES) instead take one
product per line of outputs (a run along the last axis, `_line_products`), each line's rows
read at its first position in the planes: only real positions are computed, and t holds
them packed. Per panel: t = bias, the product(s), then the epilogue writes the panel's real
positions to the NCHW output, transposed, with the activation.

A stride s > 1 on an axis splits the padded planes by phase first (`_phase_planes`): padded
position P goes to phase P % s, grid position P // s, so output position o's tap k reads grid
position o + (k*d) // s of phase (k*d) % s, and the sums above hold on the phase grids with
each tap's plane the channel's plane of its phase (ResNet's and DenseNet's 7x7 stride-2
stems, stride-2 3x3 Convs with 8 or more input channels; `taps_pay` says where it pays).

Against im2col (the GEMM panels, conv_panels.py, and `_transposed_panels`): no column buffer,
C/g x taps times the input written and read back per panel; the same sums over (c, k) in the
same order from the bias, so the same bits. Against Winograd: direct sums, classic's error.
"""

from __future__ import annotations

import math

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, shape
from compilerkit.lowering.conv_common import (
    _bias_rows,
    _Conv,
    _copy_in,
    _finish,
    _scratch,
    transposing_nests,
)
from compilerkit.lowering.conv_common import phase_pieces as _pieces
from compilerkit.lowering.matmul import emit_matmul, emit_strip_matmul

T_BYTES = 512 * 1024  # most bytes of one panel's t (in L2 while the epilogue reads it back)
MIN_POSITIONS = 64  # fewest positions per panel (the rows of the micro-kernel's blocks)
# Where no height gives an even count of panels of MIN_POSITIONS or more (55 rows:
# SqueezeNet's first 3x3s), the panels that fit stay, each with a t of its own, the threads
# taking panels in turn (`_panel_rows`), if there are at least RAGGED_PANELS of them and their
# t's take at most SLOTS_BYTES. Before, such Convs ran as one chunk, the threads sharing each
# panel's product and epilogue (3 parallel loops of a few tens of microseconds per panel): 2
# threads, 16 -> 64 at 55 x 55 (5 panels of 11 rows) 0.42 -> 0.33 ms, 1 thread 0.49 -> 0.51
# (within the noise), against 1.12x over 1 thread before and 1.56x at 56 x 56 (2 chunks).
RAGGED_PANELS = 3
SLOTS_BYTES = 2 * 1024 * 1024
# Most positions computed per real one (the throw-away columns of the padding, `waste`).
# 1 thread, AVX-512, 3x3 pad 1 + Relu, ms im2col (the GEMM or transposed panels) -> taps:
# 16 -> 64 at 55 x 55 0.567 -> 0.501, 32 -> 128 at 27 x 27 0.502 -> 0.445, 128 -> 128 at
# 28 x 28 2.16 -> 1.75, 256 -> 256 at 14 x 14 2.38 -> 1.98, 128 -> 32 at 56 x 56 3.13 -> 1.87,
# at 14 x 14 0.223 -> 0.127; 3x3x3 32 -> 32 at 32^3 29.5 -> 19.0, 64 -> 32 87.6 -> 44.1, 4 ->
# 16 at 64^3 24.5 -> 20.0. Slower on small planes, where 15 of 13 or 9 of 7 columns are
# computed: 64 -> 256 at 13 x 13 0.416 -> 0.448, 48 -> 192 0.245 -> 0.277, 512 -> 512 at 7 x 7
# 2.59 -> 2.80.
MAX_WASTE = 1.15
# Fewest output channels (the micro-kernel's vector axis here): half of AVX-512's strip of 32
# columns; a strip holding 4 or 8 channels computes 8 or 4 times the products. The same on
# every target, so that a model's schedule and arena do not depend on the vector width (the
# emulated targets' tests compare whole compiled models with the host's). 1 thread, AVX-512,
# 3x3 pad 1, ms im2col -> taps: 16 -> 4 at 56 x 56 0.184 -> 0.241, 16 -> 8 0.204 -> 0.282,
# 16 -> 16 0.254 -> 0.240, 16 -> 24 0.287 -> 0.240; 3x3x3 4 -> 4 at 28^3 0.644 -> 1.110,
# 8 -> 8 at 32^3 2.97 -> 2.90, 16 -> 16 8.60 -> 5.45.
MIN_OUT_CHANNELS = 16
MAX_STRIDE = 2  # a stride s has s phases per axis (s**2 planes per channel in 2-D)
# A strided Conv takes the taps with at least STRIDED_MIN_K sums per output (C/g x taps) and
# phase planes of at most PHASE_BYTES: the planes are copied for the whole input, 4x the
# output positions at stride 2, before the panels read them. 1 thread, AVX-512, 3x3 stride 2
# unless named, + Relu, ms im2col -> taps: 3 -> 64 7x7 at 224 (ResNet's stem) 2.05 -> 1.86,
# 16 -> 32 at 112 0.435 -> 0.354, 64 -> 64 at 56 0.675 -> 0.541, 128 -> 128 at 56 1.94 ->
# 1.61, 256 -> 256 at 28 1.95 -> 1.83, 512 -> 512 at 14 2.69 -> 2.66, 8 -> 32 at 224 0.862
# -> 0.845, 32 -> 64 at 112 1.27 -> 1.23; left to im2col: 3 -> 32 at 224 (K 27) 0.379 ->
# 0.463, 3 -> 64 at 224 unpadded 0.696 -> 0.721, 64 -> 64 at 113 unpadded (3.4 MB of
# planes) 2.17 -> 2.39.
STRIDED_MIN_K = 64
# Convs of this many spatial axes or more compute only their real positions, a product per
# line of outputs (`_line_products`), not the padded grid's rows (whose throw-away positions
# are 2 rows and 2 columns per plane at 3x3x3: 6% at 64^3, 13% at 32^3). 1 thread, AVX-512,
# 3x3x3 pad 1 + Relu, ms grid -> lines (same bits): 64 -> 32 at 64^3 217 -> 207, 16 -> 32
# 61.7 -> 60.1, 4 -> 16 15.9 -> 15.4, 32 -> 32 at 32^3 14.2 -> 13.5, 32 -> 64 27.2 -> 26.0,
# 128 -> 64 108 -> 106, 64 -> 64 44.2 -> 45.2; the 3D U-Net 1.02-1.03x at 1 and 2 threads.
# With no throw-away position the waste bound (MAX_WASTE) does not apply: 3-D Convs take the
# lines on small volumes too, in place of im2col: 128 -> 128 at 16^3 33.1 -> 29.2, 512 -> 256
# at 8^3 31.0 -> 26.8, 256 -> 256 at 8^3 15.0 -> 13.2, 64 -> 64 at 16^3 4.76 -> 4.66, 256 ->
# 128 at 16^3 57.9 -> 58.4. That needs the sum cut in pieces of at most LINE_K (whole
# channels' taps), every line's product over one piece before the next: with the whole sum
# per line, each line re-read W^T's strip (1.8 MB at 512 -> 256) and 512 -> 256 at 8^3 took
# 45 ms. In 2-D (one throw-away column pair per row) the lines measured the same as the grid
# or slower (0.97-1.01x at 55 x 55, 27 x 27, 13 x 13, 14 x 14, 28 x 28; 0.69-0.82x against
# im2col at 7 x 7 and 48 -> 192 at 13 x 13), so 2-D Convs keep the grid and the waste bound.
EXACT_MIN_AXES = 3
LINE_K = 128  # most of the sum per piece in `_line_products` (tile_matmul.UNIT_TK)
PHASE_BYTES = 2 * 1024 * 1024


def waste(k_sp, dil, out_sp, st=None) -> float:
    """Positions the tap schedule computes per output position: a row of the padded (phase)
    grid per output row, (out + (k - 1) * d // s) / out on every axis but the first."""
    st = st or [1] * len(k_sp)
    return math.prod((o + (k - 1) * d // s) / o
                     for k, d, o, s in zip(k_sp[1:], dil[1:], out_sp[1:], st[1:], strict=True))


def taps_apply(groups, st, k_sp, elem_bytes: int, lanes: int) -> bool:
    """Whether the tap schedule can take a Conv: one group, strides up to MAX_STRIDE, more
    than one tap, f32 on a target with vectors (W^T's strips are the f32 micro-kernel's)."""
    return (groups == 1 and all(1 <= s <= MAX_STRIDE for s in st) and math.prod(k_sp) > 1
            and lanes > 1 and elem_bytes == 4)


def taps_pay(conv: _Conv, lanes: int) -> bool:
    """Whether the tap schedule takes the Conv (conv.py's "classic"): it applies
    (`taps_apply`), computes few throw-away positions (`computes_little`), has at
    least MIN_OUT_CHANNELS output channels, and if strided, STRIDED_MIN_K sums per output and
    phase planes of at most PHASE_BYTES."""
    size = onnx_d.numpy_dtype(conv.elem).itemsize
    strided = any(s > 1 for s in conv.st)
    return (taps_apply(conv.groups, conv.st, conv.k_sp, size, lanes)
            and computes_little(conv.k_sp, conv.dil, conv.out_sp, conv.st)
            and conv.oc >= MIN_OUT_CHANNELS
            and (not strided or (conv.cg * math.prod(conv.k_sp) >= STRIDED_MIN_K
                                 and math.prod(_phase_shape(conv)) * size <= PHASE_BYTES)))


def _panel_rows(rows: int, row_bytes: int, row_positions: int) -> tuple[int, int]:
    """(output rows (first spatial axis) per panel, chunks; a chunk has a t of its own and
    takes rows / (height x chunks) panels in turn): the most rows dividing the rows evenly
    with t within T_BYTES, preferring an even panel count of MIN_POSITIONS or more positions
    each (2 chunks, one per thread); failing that, the most rows that fit, and a chunk per
    panel if there are RAGGED_PANELS or more panels and their t's fit in SLOTS_BYTES; else 1
    chunk."""
    fits = [h for h in range(1, rows + 1) if rows % h == 0 and h * row_bytes <= T_BYTES] or [1]
    even = [h for h in fits if (rows // h) % 2 == 0 and h * row_positions >= MIN_POSITIONS]
    height = max(even or fits)
    panels = rows // height
    if panels % 2 == 0:
        return height, 2
    if panels >= RAGGED_PANELS and rows * row_bytes <= SLOTS_BYTES:
        return height, panels
    return height, 1


def tap_panels(b: KernelBuilder, conv: _Conv, out, wt, strip: int):
    """The tap schedule (the module docstring) for `conv` into `out`; `wt`: W^T in strips of
    `strip` columns (conv.py's `_columns_weights`)."""
    strided = any(s > 1 for s in conv.st)
    scratch = _phase_planes(b, conv) if strided else _scratch(b, conv, always=True,
                                                                extra_rows=1)
    ext = shape(scratch)[-conv.r:]  # a (phase) plane's grid
    pitch = [math.prod(ext[d + 1:]) for d in range(conv.r)]
    plane = math.prod(ext)
    phases = [math.prod(conv.st[d + 1:]) for d in range(conv.r)]  # a phase's plane index
    taps = [sum((k * conv.dil[d] % conv.st[d]) * phases[d] * plane
                + (k * conv.dil[d] // conv.st[d]) * pitch[d] for d, k in enumerate(ks))
            for ks in _tap_positions(conv.k_sp)]
    plane *= math.prod(conv.st)  # a channel's planes, every phase
    kdim = conv.cg * len(taps)
    width = -(-conv.oc // strip) * strip
    # t's rows one cache line longer than the strips (see _transposed_gemm), and as long on
    # every target up to AVX-512's strips of 32: the arena does not depend on the lanes (the
    # emulated targets' tests compare whole compiled models with the host's)
    ldt = max(width, -(-conv.oc // 32) * 32) + 16
    rows = conv.out_sp[0]
    exact = exact_lines(conv)
    # positions per output row (first spatial axis): its lines only, or the padded grid's
    row_positions = math.prod(conv.out_sp[1:]) if exact else pitch[0]
    height, chunks = _panel_rows(rows, row_positions * ldt * 4, row_positions)
    per_chunk = rows // (height * chunks)
    pw = height * row_positions  # positions per panel (t's rows)
    t = b.alloc([chunks, pw, ldt], conv.elem)
    p = math.prod(conv.out_sp)
    ov = b.view(out, [conv.n, conv.oc, p])
    zero = b.index(0)
    with b.nest([conv.n]) as (nn,):
        if strided:
            _copy_phases_in(b, conv, scratch, nn)
        else:
            _copy_in(b, conv, scratch, nn, zero)
        with b.nest([chunks, per_chunk]) as (jc, ji):
            jp = b.affine([(jc, per_chunk), (ji, 1)])  # this panel: rows jp * height ...
            _bias_rows(b, conv, t, jc, pw, width)
            if exact:
                _line_products(b, conv, scratch, wt, t, (jc, jp), height, pitch, plane, kdim,
                               ldt, width, strip, taps)
            else:
                a_off = b.affine([(jp, pw)])  # the panel's first position in the planes
                emit_strip_matmul(b, scratch, wt, t, pw, width, kdim,
                                  [a_off, zero, b.affine([(jc, pw * ldt)])], (1, plane), ldt,
                                  strip, a_taps=taps)
            # the panel's real positions, transposed back to NCHW
            where = [math.prod(conv.out_sp[d + 1:]) for d in range(conv.r)] if exact else pitch

            def write(o, ivs):
                i, inner = ivs[0], ivs[1:]
                q = b.affine([(i, where[0])] + [(v, where[d + 1]) for d, v in enumerate(inner)])
                at = b.affine([(jp, height * (p // rows)), (i, p // rows)]
                              + [(v, math.prod(conv.out_sp[d + 2:])) for d, v in
                                 enumerate(inner)])
                b.store(_finish(b, conv, b.load(t, [jc, q, o]), [nn, o, at]), ov, [nn, o, at])

            transposing_nests(b, conv.oc, [height] + conv.out_sp[1:], write)


def exact_lines(conv: _Conv) -> bool:
    """Whether the panels' products run line by line (`_line_products`)."""
    return _by_lines(conv.r)


def _by_lines(rank: int) -> bool:
    """Convs of EXACT_MIN_AXES or more spatial axes (2 at least: a line is the last axis)."""
    return rank >= max(2, EXACT_MIN_AXES)


def computes_little(k_sp, dil, out_sp, st=None) -> bool:
    """Whether the tap schedule computes few positions beyond the real ones: none where it runs
    line by line (`_by_lines`), else at most MAX_WASTE per output (`waste`)."""
    return _by_lines(len(out_sp)) or waste(k_sp, dil, out_sp, st) <= MAX_WASTE


def _line_products(b: KernelBuilder, conv: _Conv, planes, wt, t, panel, height, pitch, plane,
                   kdim, ldt, width, strip, taps):
    """A panel's product line by line: for each strip of W^T's columns and each piece of the
    sum (whole channels' taps, at most LINE_K), each line of outputs (a run along the last
    axis) one product of out_sp[-1] rows, read at the line's first position in the planes and
    added to t at its place among the panel's real positions: no throw-away position is
    computed, and the piece's rows of the strip stay in cache while every line reads them.
    The pieces go in order over k, so every sum keeps the grid's order (the same bits)."""
    jc, jp = panel
    line = conv.out_sp[-1]
    lines = [height] + conv.out_sp[1:-1]
    pw = math.prod(lines) * line
    per = max(1, LINE_K // len(taps))  # channels per piece
    full, rest = divmod(kdim // len(taps), per)
    with b.nest([width // strip]) as (s,):
        for count, first, depth in ((full, 0, per), (1 if rest else 0, full * per, rest)):
            if not count:
                continue
            with b.nest([count]) as (pc,):
                ch = b.affine([(pc, depth)], first)  # the piece's first channel
                with b.nest(lines) as lv:
                    a_at = b.affine([(jp, height * pitch[0]), (ch, plane)]
                                    + [(v, pitch[d]) for d, v in enumerate(lv)])
                    b_at = b.affine([(s, kdim * strip), (ch, len(taps) * strip)])
                    c_at = b.affine([(jc, pw * ldt), (s, strip)]
                                    + [(v, math.prod(lines[d + 1:]) * line * ldt)
                                       for d, v in enumerate(lv)])
                    emit_matmul(b, planes, wt, t, line, strip, depth * len(taps),
                                [a_at, b_at, c_at], (1, plane), strip, ldt, a_taps=taps)


def _tap_positions(k_sp):
    """The kernel's taps in W's order (row-major over the kernel's axes)."""
    out = [()]
    for k in k_sp:
        out = [ks + (i,) for ks in out for i in range(k)]
    return out


def _phase_planes(b: KernelBuilder, conv: _Conv):
    """The padded input planes split by phase on every axis: [C, phases, grid...], padded
    position P on axis d at phase P % s_d, grid position P // s_d (phases numbered row-major
    over the axes); the grid's first axis has a spare row, as `_scratch(extra_rows=1)`."""
    return b.alloc(_phase_shape(conv), conv.elem)


def _phase_shape(conv: _Conv) -> list[int]:
    ext = [max(conv.pads[d] + conv.in_sp[d], conv.reach(d)) for d in range(conv.r)]
    grid = [-(-e // s) for e, s in zip(ext, conv.st, strict=True)]
    grid[0] += 1
    return [conv.c_in, math.prod(conv.st)] + grid


def _copy_phases_in(b: KernelBuilder, conv: _Conv, planes, nn):
    """x[nn] into the phase planes: zeros everywhere (the padding; the arena is shared, so
    every call), then the inputs i_d = j_d*s_d + q_d, at padded position i_d + pad_d: phase
    (q_d + pad_d) % s_d, grid j_d + (q_d + pad_d) // s_d. A nest per phase of the leading axes
    (whole rows); on the last axis the phases that share j go in one nest (depthwise's
    `phase_pieces`: s neighbouring loads per j, which LLVM vectorises with shuffles, where a
    nest per phase would load every s-th element lane by lane)."""
    with b.nest(shape(planes)) as ivs:
        b.store(b.const(0.0, conv.elem), planes, ivs)
    st, pads, in_sp = conv.st, conv.pads, conv.in_sp
    s, pad, width = st[-1], pads[-1], in_sp[-1]
    cols = [(0, -(-(width - q) // s)) for q in range(min(s, width))]
    for lead in _tap_positions(st[:-1]):
        spans = [-(-(n - q) // t) for n, q, t in zip(in_sp[:-1], lead, st[:-1], strict=True)]
        if min(spans, default=1) <= 0:
            continue
        base = 0
        for d, q in enumerate(lead):
            base = base * st[d] + (q + pads[d]) % st[d]
        for phases, span_j in _pieces(cols):
            with b.nest([conv.c_in] + spans + [span_j]) as ivs:
                c, js, j = ivs[0], ivs[1:-1], ivs[-1]
                rows = [b.affine([(v, t)], q) for v, t, q in zip(js, st[:-1], lead, strict=True)]
                at = [b.affine([(v, 1)], (q + p) // t)
                      for v, q, p, t in zip(js, lead, pads[:-1], st[:-1], strict=True)]
                for q in phases:
                    v = b.load(conv.x, [nn, c] + rows + [b.affine([(j, s)], q)])
                    phase = b.index(base * s + (q + pad) % s)
                    b.store(v, planes, [c, phase] + at + [b.affine([(j, 1)], (q + pad) // s)])
